"""Batch input: OpenAI Batch API request lines (or one plain prompt per line) in.

Using OpenAI's request format means a batch prepared for a hosted API runs
locally unchanged. A bad line does not stop the run: it becomes an item with
an error, which the output records like any other result; only an input that
is unusable as a whole raises BatchInputError.

Ids. The output file is also the resume journal (results.py), so every line
needs an id that no other line can share, or a rerun takes one line's record
for another's and that request is never run. Two disjoint kinds:

- a user id is a request's own non-empty `custom_id`, used as is; one that
  starts with "#" is refused (an error record), because
- an automatic id is "#" + the first 16 hex digits of the SHA-256 of the
  line's text (stripped), with ".2", ".3", ... for the 2nd, 3rd, ... line of
  identical text that needs one. Plain-text lines, lines without a usable
  custom_id, and lines repeating an earlier line's custom_id get one.

No user id starts with "#" and no automatic id does not, so the kinds never
meet; automatic ids differ from each other by digest or by suffix. Ids come
from what a line says, not where it is, so an input edited between runs
still resumes right: an unchanged line keeps its id and is skipped, an
edited line gets a new one and runs, and inserting or deleting lines moves
no other line's id. The line number is in each record (`llamadesk.line`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.errors import LlamaDeskError
from app.openai_compat.embeddings import URL as EMBEDDINGS_URL
from app.openai_compat.fields import is_text, show
from app.openai_compat.params import parse
from app.openai_compat.refusal import RequestError
from app.slots.types import SlotRequest

CHAT_URL = "/v1/chat/completions"
AUTO = "#"  # automatic ids start with it; user ids may not
INVALID_URL = "invalid_url"  # OpenAI's code for a line whose url is not its batch's endpoint


class BatchInputError(LlamaDeskError):
    """The input file as a whole cannot be used (missing, unreadable, empty)."""


@dataclass
class InputItem:
    line: int
    custom_id: str
    request: SlotRequest | None = None
    error: str | None = None  # this line becomes an error record
    model: str | None = None  # the body's own "model", if it named one
    digest: str = ""  # SHA-256 of the line's stripped text: what the journal knows it by
    embed: dict | None = None  # an embeddings line's body, checked against the model that runs it
    # What makes the whole Batch API batch fail validation, as OpenAI's does ("invalid_url": the
    # line's url is not the batch's endpoint), rather than only this line.
    code: str | None = None
    n: int = 1  # a Batch API line's choices, answered together in its one record
    logprobs: bool = False  # its record's choices carry their tokens' logprobs


def read_input(path: str | Path, defaults: GenerationSettings) -> list[InputItem]:
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8-sig")  # a BOM is an editor's mark, not line 1's text
    except UnicodeDecodeError:
        raise BatchInputError(f"{p}: not UTF-8 text") from None
    except OSError as e:
        raise BatchInputError(f"{p}: cannot read ({e.strerror or e})") from None
    # Lines end at "\n" only: str.splitlines() also splits at U+2028, U+0085 and
    # others, which JSON allows raw inside a string, and would cut a request in two.
    lines = [(i, s.removesuffix("\r")) for i, s in enumerate(text.split("\n"), 1) if s.strip()]
    if not lines:
        raise BatchInputError(f"{p}: the input is empty (no requests)")
    as_jsonl = p.suffix.lower() in (".jsonl", ".json") or lines[0][1].lstrip().startswith("{")
    items = [_parse_json_line(i, s, defaults) if as_jsonl else _plain(i, s, defaults) for i, s in lines]
    _assign_ids(items)
    return items


def _assign_ids(items: list[InputItem]) -> None:
    """Give automatic ids (see the module docstring) to the items that have no
    usable user id, turning a repeated user id into an error first."""
    first: dict[str, int] = {}
    for it in items:
        if not it.custom_id:
            continue
        if it.custom_id in first:
            it.error = (f"line {it.line}: duplicate custom_id {show(it.custom_id)} "
                        f"(first on line {first[it.custom_id]})")
            it.request, it.custom_id = None, ""
        else:
            first[it.custom_id] = it.line
    seen: dict[str, int] = {}
    for it in items:
        if not it.custom_id:
            n = seen[it.digest] = seen.get(it.digest, 0) + 1
            it.custom_id = f"{AUTO}{it.digest[:16]}" + (f".{n}" if n > 1 else "")
            if it.request is not None:
                it.request.custom_id = it.custom_id


def _digest(s: str) -> str:
    return hashlib.sha256(s.strip().encode("utf-8")).hexdigest()


def _plain(line: int, s: str, defaults: GenerationSettings) -> InputItem:
    req = SlotRequest("", [MessageBody("user", s.strip())], GenerationSettings(**defaults.__dict__),
                       line=line)
    return InputItem(line, "", req, digest=_digest(s))


def _load(line: int, s: str) -> dict:
    try:
        obj = json.loads(s)
    except json.JSONDecodeError as e:
        raise ValueError(f"line {line}: malformed JSON ({e.msg})") from None
    except RecursionError:
        raise ValueError(f"line {line}: malformed JSON (nested too deeply)") from None
    except ValueError as e:  # an integer literal past Python's digit limit
        raise ValueError(f"line {line}: malformed JSON ({str(e).split(':')[0]})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"line {line}: expected a JSON object")
    return obj


def refusal(line: int, e: RequestError) -> str:
    """A line's error as the online refusal says it, with the parameter named when it does not."""
    return f"line {line}: {e.param + ': ' if e.param and e.param not in e.message else ''}{e}"


def _parse_json_line(line: int, s: str, defaults: GenerationSettings,
                     endpoint: str | None = None) -> InputItem:
    """`endpoint`: the Batch API batch's, which every line's url must name (one that does not is
    marked `code` invalid_url: its batch fails validation, as OpenAI's does); None for a batch
    file, whose lines are chat requests."""
    item = InputItem(line, "", digest=_digest(s))
    try:
        obj = _load(line, s)
    except ValueError as e:
        item.error = str(e)
        return item
    url = obj.get("url")
    if endpoint is not None and url != endpoint:  # first: OpenAI fails the whole batch for it
        item.code = INVALID_URL
        item.error = (f"line {line}: url {show(url)} is not this batch's endpoint {endpoint} (every line "
                      "of a batch goes to its endpoint)")
        return item
    cid = obj.get("custom_id")
    if not isinstance(cid, str) or not cid:
        item.error = f"line {line}: custom_id must be a non-empty string, got {show(cid)}"
        if "custom_id" not in obj:
            item.error = f"line {line}: missing custom_id"
        return item
    if not is_text(cid):
        item.error = f"line {line}: custom_id is not valid Unicode (a lone surrogate)"
        return item
    if cid.startswith(AUTO):
        item.error = f"line {line}: custom_id {show(cid)} starts with {AUTO!r}, kept for automatic ids"
        return item
    item.custom_id = cid
    try:
        method = obj.get("method", "POST")
        if method != "POST":
            raise ValueError(f"unsupported method {show(method)}")
        if endpoint is None and url != CHAT_URL:
            raise ValueError(f"unknown url {show(url)}; only {CHAT_URL} is served")
        body = obj.get("body")
        if not isinstance(body, dict):
            raise ValueError("body must be an object")
        if url == EMBEDDINGS_URL:
            item.model, item.embed = body.get("model"), body
            return item
        # Exactly the online request's checks: a parameter that cannot be honoured is this line's
        # error record, never answered as if it were not there. The model is the runner's to
        # check (a batch file names none for the window; the Batch API knows its model).
        p = parse({"model": "-", **body}, "chat", defaults)
        if p.stream:
            raise RequestError(400, "a batch line cannot stream: its answer is written whole", "stream")
        # The Batch API answers n choices and logprobs in its record, as the online body does; a
        # batch file's runners (`llamadesk batch`, the Batch window) write one choice, no logprobs.
        if endpoint is None and p.n != 1:
            raise RequestError(400, "a batch line answers with one choice: give each its own line", "n")
        if endpoint is None and p.logprobs:
            raise RequestError(400, "a batch line's output records carry no logprobs; ask online",
                               "logprobs")
        item.model = body.get("model")
        item.n, item.logprobs = p.n, p.logprobs
        item.request = SlotRequest(cid, p.messages or [], p.settings, line=line, reply_as=p.tools)
    except RequestError as e:
        item.error = refusal(line, e)
    except ValueError as e:
        item.error = f"line {line}: {e}"
    return item
