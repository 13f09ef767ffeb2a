"""A conversation's reply format: free text, any JSON object, or JSON that matches a schema.

The choice belongs to the conversation, not to the settings: one chat extracts
records to a schema while the next one talks, so it is stored with the
conversation (app.history: `reply_format`) and every turn of it gets the
format's constraint in its GenerationSettings, whichever engine answers (the
chat's own, a slot of the Batch window or the window's server, a remote
server as response_format). A schema is checked when it is given, by the
compiler that will enforce it, so one that cannot be enforced is refused then,
in one line, and never sent to fail a turn later. No Qt: the window's chooser
and the tests use the same checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app.engine.grammar import Constraint, GrammarError, compile_grammar
from app.errors import LlamaDeskError
from app.history.records import JSON_REPLY

TEXT, ANY_JSON, SCHEMA = "text", "json", "schema"
MODES = (TEXT, ANY_JSON, SCHEMA)
SCHEMA_FILE_MAX = 1 << 20  # a schema file past 1 MiB is surely not one


class ReplyFormatError(LlamaDeskError):
    """A schema that cannot be used, said in one line; the format in use stays as it was."""


@dataclass(frozen=True)
class ReplyFormat:
    mode: str = TEXT
    schema: str = ""  # SCHEMA: the schema's JSON as the user gave it (kept for editing it again)
    name: str = ""  # SCHEMA: the file it came from, or its "title", to show in the chooser

    @property
    def is_json(self) -> bool:
        return self.mode != TEXT

    def constraint(self) -> Constraint | None:
        """What every reply of the conversation must match (None: free text)."""
        if self.mode == ANY_JSON:
            return Constraint.any_json()
        if self.mode == SCHEMA:
            return Constraint.json_schema(json.loads(self.schema))
        return None

    def label(self) -> str:
        return {TEXT: "Text", ANY_JSON: "Any JSON"}.get(self.mode) or f"Schema: {self.name or 'pasted'}"

    def to_json(self) -> dict:
        if self.mode == SCHEMA:
            return {"mode": SCHEMA, "schema": self.schema, "name": self.name}
        return {"mode": self.mode}

    @classmethod
    def from_json(cls, d: dict | None) -> ReplyFormat:
        """The stored format; None (a conversation from before formats, or the CLI's) is text.
        A stored schema is checked again (a hand edit, another LlamaDesk's compiler)."""
        if d is None:
            return cls()
        mode = d.get("mode")
        if mode not in MODES:
            raise ReplyFormatError(f"unknown reply format {mode!r} (one of {', '.join(MODES)})")
        if mode != SCHEMA:
            return cls(mode)
        schema, name = d.get("schema"), d.get("name", "")
        if not isinstance(schema, str) or not isinstance(name, str):
            raise ReplyFormatError("a stored schema format has no schema text")
        return schema_format(schema, name)


def reply_kind(c: Constraint | None) -> str | None:
    """How a reply held to `c` is marked in the store and drawn: JSON_REPLY for JSON (a code
    block), None for free text (Markdown); a grammar's or a regex's output is text too."""
    return JSON_REPLY if c is not None and c.kind in ("json_schema", "json_object") else None


def schema_format(text: str, name: str = "") -> ReplyFormat:
    """A SCHEMA format from the schema's text, or ReplyFormatError saying why it cannot be used:
    not JSON (where), not a schema, or a construct the grammar compiler cannot enforce."""
    if not text.strip():
        raise ReplyFormatError("the schema is empty: paste one, or load a .json file")
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReplyFormatError(f"the schema is not JSON: {e.msg} at line {e.lineno}, "
                               f"column {e.colno}") from None
    except (ValueError, RecursionError):
        raise ReplyFormatError("the schema is not JSON that can be read (nested too deeply, or a "
                               "number thousands of digits long)") from None
    if not isinstance(schema, dict):
        raise ReplyFormatError(f"a JSON schema is an object ({{...}}), not {_kind(schema)}")
    try:
        compile_grammar(Constraint.json_schema(schema))
    except GrammarError as e:
        raise ReplyFormatError(str(e)) from None
    title = schema.get("title")
    shown = name or (" ".join(title.split())[:40] if isinstance(title, str) else "")
    return ReplyFormat(SCHEMA, text, shown)


def read_schema_file(path: str | Path) -> str:
    """A schema file's text, or ReplyFormatError naming the file and why it cannot be read."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > SCHEMA_FILE_MAX:
            raise ReplyFormatError(f"{p.name}: {size // 1024} KiB is too large for a schema "
                                   f"(up to {SCHEMA_FILE_MAX // 1024} KiB)")
        raw = p.read_bytes()
    except OSError as e:
        raise ReplyFormatError(f"{p.name}: cannot read it: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ReplyFormatError(f"{p.name}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                               f"{e.start}), so not a JSON schema") from None


def _kind(v) -> str:
    if isinstance(v, list):
        return "a list"
    if isinstance(v, bool):
        return "true or false"
    return "a string" if isinstance(v, str) else ("null" if v is None else "a number")
