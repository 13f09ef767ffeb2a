"""Markdown export: readable on GitHub or in any editor; stats as one quoted line per reply.

Message text goes in verbatim (replies are usually Markdown already); an
unclosed code fence is closed so it cannot swallow the rest of the file.
A reply's reasoning goes before its answer in a `<details>` block, which
GitHub, GitLab and most renderers fold and an editor shows as the text it
is; its fences are closed and a `</details>` in it, outside code, written as
an entity, so nothing in it can end the fold early.
The path shown is written, each message a `##` heading ("## Assistant
(version 2 of 3)" where it has alternatives); with `all_branches`, each
branch is a `##` section of `###` messages after the path shown, from where
it leaves it (app.history.export.common says why sections, not the tree).
A question's attachments and a reply's documents and sources are lists under the message, their
names and snippets escaped so a file called `*x*` reads as its name.
"""

from __future__ import annotations

import re

from app.history.export.common import (
    ROLE_NAMES,
    attachment_label,
    branch_heading,
    docs_label,
    has_body,
    header_facts,
    heading_marks,
    reply_markdown,
    sections,
    source_label,
    stamp,
    thought_label,
    title,
    versions,
)
from app.history.records import StoredConversation

_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)
_END_FOLD = re.compile(r"</(details|summary)", re.IGNORECASE)
_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|!~&])")


def _plain(text: str) -> str:
    """Text that Markdown shows as the characters it is."""
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _documents(m) -> list[str]:
    """A question's attachments, a reply's documents and sources; nothing for a message without."""
    out: list[str] = []
    if m.attachments:
        out += ["**Attached:**", "", *(f"- {_plain(attachment_label(a))}" for a in m.attachments), ""]
    if m.docs is not None:
        out += [f"**{_plain(docs_label(m.docs))}**", ""]
        if m.docs.sources:
            out += [*(f"- {_plain(source_label(s))}" for s in m.docs.sources), ""]
    return out


def _close_fences(text: str) -> str:
    if len(_FENCE.findall(text)) % 2:
        opener = _FENCE.findall(text)[-1]
        return text.rstrip("\n") + "\n" + opener
    return text


def _thinking(m) -> list[str]:
    """The reasoning as a folded section, or nothing for a reply without any."""
    if not m.reasoning:
        return []
    return [f"<details><summary>{thought_label(m)}</summary>", "", _fold_safe(m.reasoning), "",
            "</details>", ""]


def _fold_safe(text: str) -> str:
    """Fences closed, and outside code a closing tag of the fold as an entity (which renders as
    the `<` it stands for; inside code a tag is text already)."""
    text, out, in_code = _close_fences(text.strip("\n")), [], False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
        out.append(line if in_code else _END_FOLD.sub(r"&lt;/\1", line))
    return "\n".join(out)


def render(conv: StoredConversation, all_branches: bool = False) -> str:
    out = [f"# {' '.join(title(conv).split())}", "", " · ".join(header_facts(conv, all_branches)), ""]
    if conv.system_prompt:
        out += ["**System prompt:**", ""]
        out += ["> " + line if line else ">" for line in conv.system_prompt.splitlines()]
        out.append("")
    parts = sections(conv, all_branches)
    branched = len(parts) > 1
    version = versions(conv)
    for b in parts:
        if branched:
            out += [f"## {branch_heading(b, len(parts))}", ""]
        for m in b.messages:
            head = f"{'###' if branched else '##'} {ROLE_NAMES.get(m.role, m.role)}"
            extra = heading_marks(m, version.get(m.id), branched)
            if extra:
                head += f" ({', '.join(extra)})"
            body = _close_fences(reply_markdown(m)) if has_body(m) else "*(empty)*"
            out += ["---", "", head, "", f"*{stamp(m)}*", "", *_thinking(m)]
            if has_body(m) or not m.reasoning:  # cut off while thinking: the fold is all it says
                out += [body, ""]
            out += _documents(m)
            if m.stats is not None:
                out += [f"> stats: {m.stats.summary()}", ""]
    return "\n".join(out)
