"""Plain-text export: for pasting anywhere; stats as one indented line per reply."""

from __future__ import annotations

from app.history.export.common import ROLE_NAMES, header_facts, marks, stamp, title
from app.history.records import StoredConversation
from app.rendering.tool_parts import calls_text, pretty_arguments


def render(conv: StoredConversation) -> str:
    t = title(conv)
    out = [t, "=" * max(3, len(t)), " · ".join(header_facts(conv)), ""]
    if conv.system_prompt:
        out += ["System prompt:", *("  " + line for line in conv.system_prompt.splitlines()), ""]
    for m in conv.messages:
        extra = marks(m)
        head = f"[{stamp(m)}] {ROLE_NAMES.get(m.role, m.role)}"
        out.append(head + (f" ({', '.join(extra)})" if extra else "") + ":")
        if m.role == "tool":
            out.append(f"Result of {m.tool_name}:")
            out += ["  " + line for line in pretty_arguments(m.content).splitlines()]
        elif m.content or not m.tool_calls:
            out.append(m.content)
        out += calls_text(m.tool_calls)
        if m.stats is not None:
            out.append(f"  -- {m.stats.summary()}")
        out.append("")
    return "\n".join(out)
