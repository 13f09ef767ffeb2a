"""HTML export: one self-contained page that opens in any browser, read as the window shows it.

A reply is rendered from Markdown by the window's own renderer
(app.rendering.markdown_html: the same parse, the same Pygments colours,
tables), and a person's message is shown as typed with its code blocks boxed,
as in the window's "You" bubble. Every figure is the footer's: the summary
line is ReplyStats.summary, and the table under it ReplyStats.details, the
same formatting, so no raw float or "None" reaches the page.

Model output is untrusted text: the renderer takes no raw HTML (a `<script>`
or `<img onerror=...>` in a reply is escaped and shows as the characters it
is), and every other string passes through html.escape (quotes too). As a
second fence the page forbids scripts outright through its
Content-Security-Policy, and uses no scripts of its own (stats open with
<details>).

The path shown is written, a message with alternatives marked "version 2 of
3"; with `all_branches`, each branch after it as a section from where it
leaves the ones before (app.history.export.common says why).

A reply's reasoning is folded above its answer, in a <details> whose summary
says how long it thought ("Thought for 12.4 s · 431 tokens"), rendered by the
same renderer as the answer: reasoning is model output like any other.

A question's attachments and a reply's documents (whole or retrieved) with its numbered sources
are listed under the message, escaped like every other string; their style is added only to a
page that has some, so one without exports byte for byte as before.
"""

from __future__ import annotations

from html import escape

from app.history.export.common import (
    ROLE_NAMES,
    attachment_label,
    branch_heading,
    docs_label,
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
from app.history.records import StoredConversation, StoredMessage
from app.rendering.markdown_html import HtmlRenderer, page_css, typed_segments

CSS = """
:root { color-scheme: light dark; --bg: #f6f7f9; --card: #fff; --fg: #1d2330; --muted: #6b7280;
  --user: #e8f0fe; --asst: #fff; --line: #d9dde3; --warn: #b45309;
  --code: #f0f0f0; }
@media (prefers-color-scheme: dark) { :root { --bg: #15181d; --card: #1e2229; --fg: #e6e8eb;
  --muted: #9aa3ae; --user: #1f2b3d; --asst: #1e2229; --line: #333a44; --warn: #f59e0b;
  --code: #272822; } }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 860px; margin: 0 auto; padding: 24px 16px 48px; }
h1 { font-size: 1.5em; margin: 0 0 4px; overflow-wrap: anywhere; }
.facts, .when, .stats { color: var(--muted); font-size: 0.85em; }
.system { border-left: 3px solid var(--line); padding: 4px 12px; margin: 16px 0; white-space: pre-wrap; }
.msg { background: var(--card); border: 1px solid var(--line); border-radius: 10px;
  padding: 10px 14px; margin: 12px 0; }
.msg.user { background: var(--user); }
.msg.tool { border-left: 4px solid var(--muted); }
.msg.out-of-context { opacity: 0.6; }
.head { display: flex; gap: 8px; align-items: baseline; flex-wrap: wrap; }
.role { font-weight: 600; }
.mark { color: var(--warn); font-size: 0.85em; }
.content { overflow-wrap: anywhere; margin: 6px 0; }
.content > :first-child { margin-top: 0; } .content > :last-child { margin-bottom: 0; }
.typed { white-space: pre-wrap; }
.content table { border-collapse: collapse; margin: 8px 0; }
.content th, .content td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; }
.content code { font-family: ui-monospace, "SF Mono", Menlo, Consolas, monospace; font-size: 0.92em; }
figure.code { margin: 8px 0; }
figure.code figcaption { color: var(--muted); font-size: 0.8em; }
figure.code pre { margin: 2px 0 0; padding: 8px 10px; border-radius: 6px; overflow-x: auto;
  background: var(--code); font-family: ui-monospace, "SF Mono", Menlo, Consolas, monospace;
  font-size: 0.9em; line-height: 1.4; }
h2.branch { font-size: 1.15em; margin: 28px 0 4px; padding-top: 12px; border-top: 2px solid var(--line);
  overflow-wrap: anywhere; }
.stats summary { cursor: pointer; }
.stats table { border-collapse: collapse; margin-top: 4px; }
.stats td { padding: 1px 10px 1px 0; font-variant-numeric: tabular-nums; }
""" + page_css()
# Only on a page with reasoning: a conversation without any exports byte for byte as before.
THINKING_CSS = """
.thinking { color: var(--muted); border-left: 3px solid var(--line); padding: 0 0 0 10px; margin: 6px 0; }
.thinking summary { cursor: pointer; font-size: 0.85em; }
.thinking .reasoning { overflow-wrap: anywhere; }
"""

DOCS_CSS = """
.docs { color: var(--muted); font-size: 0.85em; margin: 6px 0; }
.docs ul { margin: 2px 0; padding-left: 18px; }
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _e(s: object) -> str:
    return escape(str(s), quote=True)


def _stats(m: StoredMessage) -> str:
    if m.stats is None:
        return ""
    rows = "".join(f"<tr><td>{_e(label)}</td><td>{_e(text)}</td></tr>" for label, text in m.stats.details())
    return (f'<details class="stats"><summary>{_e(m.stats.summary())}</summary>'
            f"<table>{rows}</table></details>")


def _typed(text: str, renderer: HtmlRenderer) -> str:
    """A person's message: as typed, code blocks in code boxes."""
    return "".join(renderer.code_box(renderer.highlight(seg.text, seg.lang), seg.lang, None) if seg.code
                   else f'<p class="typed">{_e(seg.text.strip(chr(10)))}</p>'
                   for seg in typed_segments(text, renderer.md))


def _thinking(m: StoredMessage, renderer: HtmlRenderer) -> str:
    if not m.reasoning:
        return ""
    return (f'<details class="thinking"><summary>{_e(thought_label(m))}</summary>'
            f'<div class="reasoning">{renderer.render(m.reasoning).html}</div></details>')


def _documents(m: StoredMessage) -> str:
    out = ""
    if m.attachments:
        items = "".join(f"<li>{_e(attachment_label(a))}</li>" for a in m.attachments)
        out += f'<div class="docs attached">Attached<ul>{items}</ul></div>'
    if m.docs is not None:
        items = "".join(f"<li>{_e(source_label(s))}</li>" for s in m.docs.sources)
        out += (f'<div class="docs sources">{_e(docs_label(m.docs))}'
                f'{f"<ul>{items}</ul>" if items else ""}</div>')
    return out


def _message(m: StoredMessage, renderer: HtmlRenderer, version: tuple[int, int] | None = None,
             with_id: bool = False) -> str:
    cls = ["msg", _e(m.role)] + (["out-of-context"] if m.out_of_context else [])
    extra = "".join(f'<span class="mark">{_e(x)}</span>' for x in heading_marks(m, version, with_id))
    shown = m.role in ("assistant", "tool")  # a model's Markdown, or a tool's result in its box
    body = renderer.render(reply_markdown(m)).html if shown else _typed(m.content, renderer)
    return (f'<section class="{" ".join(cls)}"><div class="head">'
            f'<span class="role">{_e(ROLE_NAMES.get(m.role, m.role))}</span>'
            f'<span class="when">{_e(stamp(m))}</span>{extra}</div>{_thinking(m, renderer)}'
            f'<div class="content">{body}</div>{_documents(m)}{_stats(m)}</section>')


def render(conv: StoredConversation, all_branches: bool = False) -> str:
    t = _e(title(conv))
    system = (f'<div class="system"><strong>System prompt</strong>\n{_e(conv.system_prompt)}</div>'
              if conv.system_prompt else "")
    renderer = HtmlRenderer(inline=False)  # colours from page_css, light and dark
    parts = sections(conv, all_branches)
    branched = len(parts) > 1
    version = versions(conv)
    shown = [m for b in parts for m in b.messages]
    css = CSS + (THINKING_CSS if any(m.reasoning for m in shown) else "") \
        + (DOCS_CSS if any(m.attachments or m.docs is not None for m in shown) else "")
    body = "\n".join(
        (f'<h2 class="branch">{_e(branch_heading(b, len(parts)))}</h2>\n' if branched else "")
        + "\n".join(_message(m, renderer, version.get(m.id), branched) for m in b.messages)
        for b in parts)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="LlamaDesk">\n<title>{t}</title>\n'
        f"<style>{css}</style>\n</head>\n<body>\n<main>\n"
        f"<h1>{t}</h1>\n<div class=\"facts\">{_e(' · '.join(header_facts(conv, all_branches)))}</div>\n"
        f"{system}\n{body}\n</main>\n</body>\n</html>\n"
    )
