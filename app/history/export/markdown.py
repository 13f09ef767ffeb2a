"""Markdown export: readable on GitHub or in any editor; stats as one quoted line per reply.

Message text goes in verbatim (replies are usually Markdown already); an
unclosed code fence is closed so it cannot swallow the rest of the file.
"""

from __future__ import annotations

import re

from app.history.export.common import ROLE_NAMES, has_body, header_facts, marks, reply_markdown, stamp, title
from app.history.records import StoredConversation

_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)


def _close_fences(text: str) -> str:
    if len(_FENCE.findall(text)) % 2:
        opener = _FENCE.findall(text)[-1]
        return text.rstrip("\n") + "\n" + opener
    return text


def render(conv: StoredConversation) -> str:
    out = [f"# {' '.join(title(conv).split())}", "", " · ".join(header_facts(conv)), ""]
    if conv.system_prompt:
        out += ["**System prompt:**", ""]
        out += ["> " + line if line else ">" for line in conv.system_prompt.splitlines()]
        out.append("")
    for m in conv.messages:
        head = f"## {ROLE_NAMES.get(m.role, m.role)}"
        extra = marks(m)
        if extra:
            head += f" ({', '.join(extra)})"
        body = _close_fences(reply_markdown(m)) if has_body(m) else "*(empty)*"
        out += ["---", "", head, "", f"*{stamp(m)}*", "", body, ""]
        if m.stats is not None:
            out += [f"> stats: {m.stats.summary()}", ""]
    return "\n".join(out)
