"""Plain-text export: for pasting anywhere; stats as one indented line per reply.

A reply's reasoning comes before its answer, under its label ("Thought for
12.4 s · 431 tokens:") with every line marked "  | ", so where the thinking
ends and the answer begins is plain without any rendering.

The path shown, a message with alternatives marked "version 2 of 3"; with
`all_branches`, each branch after it as an underlined section from where it
leaves the ones before (app.history.export.common says why). A question's attachments follow
it ("Attached: ..."), and a reply's documents and numbered sources follow the reply.
"""

from __future__ import annotations

from app.history.export.common import (
    ROLE_NAMES,
    attachment_label,
    branch_heading,
    docs_label,
    header_facts,
    heading_marks,
    sections,
    source_label,
    stamp,
    thought_label,
    title,
    versions,
)
from app.history.records import StoredConversation
from app.rendering.tool_parts import calls_text, pretty_arguments


def render(conv: StoredConversation, all_branches: bool = False) -> str:
    t = title(conv)
    out = [t, "=" * max(3, len(t)), " · ".join(header_facts(conv, all_branches)), ""]
    if conv.system_prompt:
        out += ["System prompt:", *("  " + line for line in conv.system_prompt.splitlines()), ""]
    parts = sections(conv, all_branches)
    branched = len(parts) > 1
    version = versions(conv)
    for b in parts:
        if branched:
            heading = branch_heading(b, len(parts))
            out += [heading, "-" * len(heading), ""]
        for m in b.messages:
            extra = heading_marks(m, version.get(m.id), branched)
            head = f"[{stamp(m)}] {ROLE_NAMES.get(m.role, m.role)}"
            out.append(head + (f" ({', '.join(extra)})" if extra else "") + ":")
            if m.reasoning:
                out.append(f"{thought_label(m)}:")
                out += [f"  | {line}".rstrip() for line in m.reasoning.strip("\n").split("\n")]
            if m.role == "tool":
                out.append(f"Result of {m.tool_name}:")
                out += ["  " + line for line in pretty_arguments(m.content).splitlines()]
            elif m.content or not (m.tool_calls or m.reasoning):
                out.append(m.content)
            out += calls_text(m.tool_calls)
            out += [f"Attached: {attachment_label(a)}" for a in m.attachments]
            if m.docs is not None:
                out.append(f"{docs_label(m.docs)}:" if m.docs.sources else docs_label(m.docs))
                out += [f"  {source_label(s)}" for s in m.docs.sources]
            if m.stats is not None:
                out.append(f"  -- {m.stats.summary()}")
            out.append("")
    return "\n".join(out)
