"""LlamaDesk's own JSON transcript: the full-fidelity, versioned export format.

Documented in docs/transcript-format.md. Reading validates the whole document
before anything is written, so a malformed or newer file changes nothing and
gets one line saying what is wrong and where. That includes what JSON allows
but a history cannot hold: text with lone surrogates (SQLite cannot store it),
NaN and infinities (no JSON export could write them back), and times no clock
produced (the list could not show them); milliseconds, which JavaScript tools
write, are read as the time they mean.

Version 2 carries the conversation's whole tree: every message of every
branch with its `id` and the `parent_id` of the message it follows, and the
`active_leaf` that ends the path shown. A reader takes it only when it is a
tree: each parent written before its child (so there is no loop to follow),
no id twice, the leaf one of the messages; the store renumbers the ids on
import and rebuilds the same shape. Version 1 (a line) still reads. Writing
never fails on a tree a hand-edited database has bent: a parent that is gone
or a loop is written as a first message, so every export reads back.

Version 3 adds a reply's reasoning (a thinking model's, kept apart from its
`content`) as `reasoning`, only on the messages that have one. A document
with none is written as version 2, byte for byte what LlamaDesk wrote before:
any reader takes it. One with reasoning says 3, so an older LlamaDesk refuses
it in one line instead of importing it without the thinking, which its
reader, ignoring unknown keys, would otherwise quietly do.

Version 4 adds documents and MCP tools: a user message's `attachments` (the documents given
with it, each naming its text by sha256), an assistant message's `docs` (whole or retrieved,
its tokens and numbered sources), a tool message's `tool_server` (the MCP server that answered),
each only where a message has one, and the conversation's `documents`, the texts its
attachments name ({sha256: {name, kind, pages, text, page_starts}}), so an import reopens with
the words the model read. Only a conversation with any of these says 4; one without is
written as before, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import MISSING, fields, replace
from datetime import UTC, datetime
from pathlib import Path

from app import __version__
from app.engine.message import ROLES, Attachment, DocsUse
from app.engine.stats import ReplyStats
from app.history import timestamps, tree
from app.history.errors import TranscriptError
from app.history.records import FORMATS, STATES, StoredConversation, StoredMessage
from app.history.tool_rows import calls_from_list

FORMAT = "llamadesk.transcript"
VERSION = 4  # written when a message has documents or an MCP server; see _version
THINKING_VERSION = 3  # a message has reasoning (and none of version 4's fields)
PLAIN_VERSION = 2
READS = (1, 2, 3, 4)  # a version 1 file is a line: each message follows the one before


def _finite(v):
    """JSON has no NaN/Infinity; a non-finite value (never written by LlamaDesk, but
    a hand-edited database may hold one) becomes null rather than failing the export."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def to_document(conv: StoredConversation) -> dict:
    rows, parents = written_tree(conv)
    written = {m.id for m in rows}
    leaf = conv.messages[-1].id if conv.messages and conv.tree else (rows[-1].id if rows else None)
    return {
        "format": FORMAT,
        "version": _version(rows),
        "app_version": __version__,
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "conversation": {
            "id": conv.id,
            "title": conv.title,
            "created_at": _finite(conv.created_at),
            "updated_at": _finite(conv.updated_at),
            "system_prompt": conv.system_prompt,
            "model": conv.model,
            "settings": conv.settings,
            "reply_format": conv.reply_format,
            "tools": conv.tools,
            "active_leaf": leaf if leaf in written else None,
            **({"documents": _documents(conv, rows)} if _documents(conv, rows) else {}),
            "messages": [
                {
                    "id": m.id,
                    "parent_id": parents[i],
                    "role": m.role,
                    "content": m.content,
                    "created_at": _finite(m.created_at),
                    "updated_at": _finite(m.updated_at),
                    "state": m.state,
                    "out_of_context": m.out_of_context,
                    "edited": m.edited,
                    "format": m.format,
                    "stats": ({k: _finite(v) for k, v in m.stats.to_json().items()}
                              if m.stats is not None else None),
                    **_tool_fields(m),
                    **({"reasoning": m.reasoning} if m.reasoning else {}),
                    **_document_fields(m),
                }
                for i, m in enumerate(rows)
            ],
        },
    }


def _version(rows: list[StoredMessage]) -> int:
    """The oldest version that holds what the messages have: an older LlamaDesk then refuses
    only what it would import without some of it."""
    if any(m.attachments or m.docs is not None or m.tool_server is not None for m in rows):
        return VERSION
    return THINKING_VERSION if any(m.reasoning for m in rows) else PLAIN_VERSION


def _document_fields(m: StoredMessage) -> dict:
    out: dict = {}
    if m.attachments:
        out["attachments"] = [a.to_json() for a in m.attachments]
    if m.docs is not None:
        out["docs"] = m.docs.to_json()
    if m.tool_server is not None:
        out["tool_server"] = m.tool_server
    return out


def _documents(conv: StoredConversation, rows: list[StoredMessage]) -> dict:
    """The texts the written messages' attachments name, those the conversation has."""
    named = {a.sha256 for m in rows for a in m.attachments}
    return {sha: d for sha, d in (conv.documents or {}).items() if sha in named}


def written_tree(conv: StoredConversation) -> tuple[list[StoredMessage], list[int | None]]:
    """The messages to write, each after the one it follows, and each one's parent as written.

    The tree as the store keeps it (oldest first, so a parent already comes before its replies);
    a conversation without one (built in memory) is its messages in a line, numbered by position
    when their ids do not tell them apart. A message whose parent is not in the conversation, or
    that a loop would put after itself, is written as a first message: the file must read back.
    """
    if not conv.tree:
        rows = list(conv.messages)
        if len({m.id for m in rows}) != len(rows):
            rows = [replace(m, id=i + 1) for i, m in enumerate(rows)]
        return rows, [None] + [m.id for m in rows[:-1]]
    kept: dict[int, StoredMessage] = {}
    for m in conv.tree:
        kept.setdefault(m.id, m)  # a second row with one id (never written by the store): the first
    parent = {i: (m.parent_id if m.parent_id in kept and m.parent_id != i else None) for i, m in kept.items()}
    done: set[int] = set()
    for start in kept:  # a loop starts again from its oldest message
        chain: list[int] = []
        on_chain: set[int] = set()
        cur: int | None = start
        while cur is not None and cur not in done and cur not in on_chain:
            chain.append(cur)
            on_chain.add(cur)
            cur = parent[cur]
        if cur is not None and cur in on_chain:
            parent[min(chain[chain.index(cur):])] = None
        done.update(chain)
    waiting: dict[int, list[int]] = {}
    placed: set[int] = set()
    rows, parents = [], []
    for i in kept:  # oldest first; one older than its parent (a hand-edited file) waits for it
        p = parent[i]
        if p is not None and p not in placed:
            waiting.setdefault(p, []).append(i)
            continue
        stack = [i]
        while stack:
            cur = stack.pop()
            placed.add(cur)
            rows.append(kept[cur])
            parents.append(parent[cur])
            stack.extend(reversed(waiting.pop(cur, [])))
    return rows, parents


def _tool_fields(m: StoredMessage) -> dict:
    """Only on the messages that have them, so a conversation without tools reads as before."""
    out: dict = {}
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    if m.role == "tool":
        out["tool_call_id"], out["tool_name"] = m.tool_call_id, m.tool_name
    return out


def dumps(conv: StoredConversation) -> str:
    return json.dumps(to_document(conv), ensure_ascii=False, indent=2, allow_nan=False) + "\n"


# --- reading ---------------------------------------------------------------

_NUM = (int, float)
_STAT_TYPES = {"int": (int,), "float": _NUM, "str": (str,)}


class _Bad(Exception):
    pass


def _get(obj: dict, key: str, types: tuple, where: str, optional: bool = False):
    if key not in obj:
        if optional:
            return None
        raise _Bad(f"{where} has no {key!r}")
    v = obj[key]
    if v is None and optional:
        return None
    if (isinstance(v, bool) and bool not in types) or not isinstance(v, types):
        raise _Bad(f"{where}.{key} should be {' or '.join(t.__name__ for t in types)}, "
                   f"not {type(v).__name__}")
    return v


def _stats(d, where: str) -> ReplyStats | None:
    if d is None:
        return None
    if not isinstance(d, dict):
        raise _Bad(f"{where}.stats should be an object or null")
    for f in fields(ReplyStats):
        base, _, rest = str(f.type).partition(" | ")
        if f.name not in d and f.default is not MISSING:
            continue  # a field newer than the file: its default applies
        if d.get(f.name) is None and rest == "None" and f.name in d:
            continue
        _get(d, f.name, _STAT_TYPES[base], f"{where}.stats")
    return ReplyStats.from_json(d)


def _time(obj: dict, key: str, where: str) -> float:
    ts = _time_or_none(obj, key, where, optional=False)
    assert ts is not None  # a required field: _get raised if it was missing
    return ts


def _time_or_none(obj: dict, key: str, where: str, optional: bool = True) -> float | None:
    v = _get(obj, key, _NUM, where, optional)
    if v is None:
        return None
    ts = timestamps.seconds(v)
    if ts is None:
        shown = f"{v:.6g}" if isinstance(v, float) else (str(v) if abs(v) < 10**20 else "a huge number")
        raise _Bad(f"{where}.{key} {shown} is not a time: expected seconds since 1970 (up to year 9999) "
                   "or milliseconds")
    return ts


def _walk(doc, root: str) -> None:
    """What JSON allows but a history cannot keep, anywhere in the document (an
    explicit stack: a deeply nested settings object must not hit the recursion limit)."""
    stack = [(doc, root)]
    while stack:
        v, where = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as e:
                raise _Bad(f"{where} is not valid UTF-8 text (character {e.start + 1} is a lone "
                           "surrogate, such as an escaped \\ud800 with no pair)") from None
        elif isinstance(v, float) and not math.isfinite(v):
            name = "NaN" if v != v else ("-Infinity" if v < 0 else "Infinity")
            raise _Bad(f"{where} is {name}, which JSON does not allow and no export could write back")
        elif isinstance(v, dict):
            for k, x in v.items():
                stack.append((k, f"a key in {where}"))
                named = isinstance(k, str) and k.isidentifier() and k.isascii()
                stack.append((x, f"{where}.{k}" if named else f"{where}[{k!a}]"))
        elif isinstance(v, list):
            stack.extend((x, f"{where}[{i}]") for i, x in enumerate(v))


def from_document(doc) -> StoredConversation:
    """Validate a parsed document and build the conversation it describes (id 0)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _Bad(f'not a LlamaDesk transcript (no "format": "{FORMAT}")')
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _Bad("the transcript has no integer version")
    if version not in READS:
        newer = "a newer" if version > VERSION else "an unknown"
        raise _Bad(f"transcript version {_shown(version)} is {newer} version; this LlamaDesk reads "
                   f"versions {', '.join(map(str, READS[:-1]))} and {READS[-1]}")
    c = _get(doc, "conversation", (dict,), "document")
    _walk(c, "conversation")
    w = "conversation"
    conv = StoredConversation(
        id=0,
        title=_get(c, "title", (str,), w),
        created_at=_time(c, "created_at", w),
        updated_at=_time(c, "updated_at", w),
        system_prompt=_get(c, "system_prompt", (str,), w, optional=True),
        model=_get(c, "model", (str,), w, optional=True),
        settings=_get(c, "settings", (dict,), w, optional=True) or {},
        reply_format=_get(c, "reply_format", (dict,), w, optional=True),
        tools=_get(c, "tools", (dict,), w, optional=True),
        documents=_read_documents(c),
    )
    listed = _get(c, "messages", (list,), w)
    if version == 1:  # a line, as version 1 kept every conversation
        conv.messages = [_message(m, f"messages[{i}]") for i, m in enumerate(listed)]
        return conv
    at: dict[int, int] = {}  # an id -> where the document first wrote it
    for i, m in enumerate(listed):
        mw = f"messages[{i}]"
        msg = _message(m, mw)
        msg.id = _get(m, "id", (int,), mw)
        if msg.id in at:
            raise _Bad(f"{mw}.id {_shown(msg.id)} is the id of messages[{at[msg.id]}] already: each "
                       "message has its own")
        if "parent_id" not in m:
            raise _Bad(f"{mw} has no 'parent_id' (null for a first message)")
        msg.parent_id = _get(m, "parent_id", (int,), mw, optional=True)
        if msg.parent_id is not None and msg.parent_id not in at:
            raise _Bad(f"{mw}.parent_id {_shown(msg.parent_id)} {_where(listed, msg.parent_id, i)}")
        msg.edited = bool(_get(m, "edited", (bool,), mw, optional=True))
        at[msg.id] = i
        conv.tree.append(msg)
    leaf = _get(c, "active_leaf", (int,), w, optional=True)
    if leaf is not None and leaf not in at:
        raise _Bad(f"conversation.active_leaf {_shown(leaf)} is not the id of any message of the document")
    conv.active_leaf = conv.tree[-1].id if leaf is None and conv.tree else leaf
    conv.messages = tree.path_to(conv.tree, conv.active_leaf)
    return conv


def _shown(n: int) -> str:
    return str(n) if abs(n) < 10**20 else "(a huge number)"


def _where(listed: list, parent: int, i: int) -> str:
    """Why a parent id is not one a message may follow: itself, a later message, or nothing."""
    if parent == listed[i].get("id"):
        return "is the message's own id: a message follows one written before it"
    later = next((j for j in range(i + 1, len(listed))
                  if isinstance(listed[j], dict) and type(listed[j].get("id")) is int
                  and listed[j]["id"] == parent), None)
    if later is not None:
        return (f"is the id of messages[{later}], written after it: a message follows one written "
                "before it (so the messages cannot loop)")
    return "is not the id of any message of the document"


def _message(m, mw: str) -> StoredMessage:
    if not isinstance(m, dict):
        raise _Bad(f"{mw} should be an object")
    role = _get(m, "role", (str,), mw)
    if role not in ROLES:
        raise _Bad(f"{mw}.role {role!r} is not one of {', '.join(ROLES)}")
    state = _get(m, "state", (str,), mw)
    if state not in STATES:
        raise _Bad(f"{mw}.state {state!r} is not one of {', '.join(STATES)}")
    fmt = _get(m, "format", (str,), mw, optional=True)
    if fmt is not None and fmt not in FORMATS:
        raise _Bad(f"{mw}.format {fmt!r} is not one of {', '.join(FORMATS)} (or null: Markdown text)")
    created = _time(m, "created_at", mw)
    updated = _time_or_none(m, "updated_at", mw)
    try:
        calls = calls_from_list(m.get("tool_calls") or [])
    except ValueError as e:
        raise _Bad(f"{mw}.{e}") from None
    reasoning = _get(m, "reasoning", (str,), mw, optional=True) or ""
    if reasoning and role != "assistant":
        raise _Bad(f"{mw}.reasoning: only an assistant message has reasoning, and this one is {role!r}")
    msg = StoredMessage(
        id=0, conversation_id=0, role=role, content=_get(m, "content", (str,), mw), reasoning=reasoning,
        created_at=created, updated_at=created if updated is None else updated,
        state=state, stats=_stats(m.get("stats"), mw),
        out_of_context=bool(_get(m, "out_of_context", (bool,), mw, optional=True)), format=fmt,
        tool_calls=calls, tool_call_id=_get(m, "tool_call_id", (str,), mw, optional=True),
        tool_name=_get(m, "tool_name", (str,), mw, optional=True),
    )
    msg.attachments, msg.docs = _attachments(m, mw), _docs(m, mw)
    msg.tool_server = _get(m, "tool_server", (str,), mw, optional=True)
    problem = msg.problem()
    if problem:
        raise _Bad(f"{mw}: {problem}")
    return msg


def _attachments(m: dict, mw: str) -> tuple[Attachment, ...]:
    listed = _get(m, "attachments", (list,), mw, optional=True) or []
    out = []
    for i, a in enumerate(listed):
        where = f"{mw}.attachments[{i}]"
        if not isinstance(a, dict):
            raise _Bad(f"{where} should be an object")
        for key in ("name", "sha256", "kind"):
            _get(a, key, (str,), where)
        for key in ("pages", "tokens", "chars"):
            _get(a, key, (int,), where, optional=True)
        _get(a, "path", (str,), where, optional=True)
        out.append(Attachment.from_json({k: v for k, v in a.items() if v is not None}))
    return tuple(out)


def _docs(m: dict, mw: str) -> DocsUse | None:
    d = _get(m, "docs", (dict,), mw, optional=True)
    if d is None:
        return None
    where = f"{mw}.docs"
    if _get(d, "mode", (str,), where) not in ("whole", "retrieved"):
        raise _Bad(f"{where}.mode {d['mode']!r} is not whole or retrieved")
    _get(d, "tokens", (int,), where, optional=True)
    for i, s in enumerate(_get(d, "sources", (list,), where, optional=True) or []):
        sw = f"{where}.sources[{i}]"
        if not isinstance(s, dict):
            raise _Bad(f"{sw} should be an object")
        _get(s, "n", (int,), sw)
        _get(s, "document", (str,), sw)
        _get(s, "sha256", (str,), sw)
        for key in ("start", "end"):
            _get(s, key, (int,), sw, optional=True)
        for key in ("where", "snippet", "collection"):
            _get(s, key, (str,), sw, optional=True)
    return DocsUse.from_json(d)


def _read_documents(c: dict) -> dict[str, dict]:
    """The conversation's document texts, each checked against the hash it is kept under (the
    store keeps one text per hash: a hand-edited text must not pass for another)."""
    docs = _get(c, "documents", (dict,), "conversation", optional=True) or {}
    out = {}
    for sha, d in docs.items():
        where = f"conversation.documents[{sha!a}]"
        if not isinstance(d, dict):
            raise _Bad(f"{where} should be an object")
        text = _get(d, "text", (str,), where)
        for key in ("name", "kind"):
            _get(d, key, (str,), where)
        _get(d, "pages", (int,), where, optional=True)
        starts = _get(d, "page_starts", (list,), where, optional=True) or []
        if any(type(p) is not int or not 0 <= p <= len(text) for p in starts):
            raise _Bad(f"{where}.page_starts should be character offsets into its text")
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != sha:
            raise _Bad(f"{where}.text does not match its sha256: the text was changed")
        out[sha] = {"name": d["name"], "kind": d["kind"], "pages": d.get("pages") or 0, "text": text,
                    "page_starts": list(starts)}
    return out


def load(path: str | Path) -> StoredConversation:
    """Read and validate a transcript file; raises TranscriptError naming the file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TranscriptError(path, f"cannot read it: {e.strerror or e}") from e
    try:
        text = raw.decode("utf-8-sig")  # a BOM, as some Windows editors write, is harmless
    except UnicodeDecodeError as e:
        raise TranscriptError(path, f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start} is "
                                    "not UTF-8), so not a LlamaDesk transcript") from e
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TranscriptError(path, f"not valid JSON (line {e.lineno} column {e.colno}: {e.msg})") from e
    except RecursionError as e:
        raise TranscriptError(path, "not a LlamaDesk transcript: its JSON is nested too deeply") from e
    except ValueError as e:  # Python refuses integers of more than 4300 digits
        raise TranscriptError(path, "not a LlamaDesk transcript: it has a number thousands of digits "
                                    "long") from e
    try:
        return from_document(doc)
    except _Bad as e:
        raise TranscriptError(path, str(e)) from e
