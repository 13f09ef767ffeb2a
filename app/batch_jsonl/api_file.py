"""A file given to the Batch API, read as OpenAI's Batch API specifies it: every line a request.

`read_input` serves `llamadesk batch`, where a file of plain prompts, one a
line, is a convenience. A file uploaded to the server's Batch API is not
that: it is a list of requests, and a line that is not one (a CSV row, a
`# comment`, a bare string) must become an error record, never a prompt
answered under an invented id. So every line here is a JSON object with
exactly `custom_id`, `method` ("POST"), `url` and `body`, and the body names
the model this server has; the body's own checks are the batch file's
(requests.py), so a line is refused with the same words either way. Ids,
duplicates and the resume journal are requests.py's too.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.batch_jsonl.requests import CHAT_URL, BatchInputError, InputItem, _assign_ids, _parse_json_line
from app.engine.sampling import GenerationSettings

KEYS = ("custom_id", "method", "url", "body")


def read_api_file(path: str | Path, defaults: GenerationSettings, model: str,
                  endpoint: str = CHAT_URL) -> list[InputItem]:
    """The items of a Batch API input file; a line that is not a request to `endpoint` for
    `model` is an item with an error. BatchInputError only when the file as a whole is unusable."""
    p = Path(path)
    try:
        lines = p.read_bytes().decode("utf-8-sig").split("\n")  # "\n" only: JSON allows U+2028 raw
    except (OSError, UnicodeDecodeError) as e:
        why = ("is not UTF-8 text" if isinstance(e, UnicodeDecodeError)
               else f"cannot be read ({e.strerror or e})")
        raise BatchInputError(f"the input file {why}") from None
    items = []
    for n, raw in enumerate(lines, 1):
        s = raw.removesuffix("\r")
        if not s.strip():
            continue
        item = _parse_json_line(n, s, defaults, endpoint)
        if item.error is None:  # a JSON object whose body the batch file's checks take
            item.error = _not_a_request(n, json.loads(s), model)
            if item.error is not None:
                item.request = item.embed = None
        items.append(item)
    if not items:
        raise BatchInputError("the input file holds no requests")
    _assign_ids(items)
    return items


def _not_a_request(n: int, obj: dict, model: str) -> str | None:
    """What makes a line the batch file's checks take still not a Batch API request, or None."""
    extra = [k for k in obj if k not in KEYS]
    if extra:
        return (f"line {n}: unknown field {extra[0]!r} (a Batch API line has only "
                f"{', '.join(KEYS)})")
    if "method" not in obj:
        return f"line {n}: missing method (a Batch API line has {', '.join(KEYS)}; method is \"POST\")"
    named = obj["body"].get("model")
    if named is None:
        return f"line {n}: body.model is required (this server has {model!r})"
    if named != model:
        return f"line {n}: the model {named!r} does not exist (this server has {model!r})"
    return None
