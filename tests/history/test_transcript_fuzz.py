"""The transcript importer against generated hostile documents.

Each document is a valid transcript with mutations (wrong types, missing keys,
huge, negative and non-finite numbers, odd strings with lone surrogates, raw
byte damage). Whatever it is, the importer gives either a conversation that
round-trips through the store, `llamadesk list` and every export, or one
TranscriptError whose message is one printable line; never another exception,
and never a partial import. The documents start from a conversation in a line
(version 3: a reply carries reasoning, so `reasoning` is mutated too), the same
with branches (an edited question, a regenerated reply, a path shown that is
not the latest), and the line as version 1 wrote it, so the ids, parents and
active leaf are mutated too. Derandomized with no example
database, so CI runs exactly the same 200 documents every time.
"""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from app.cli import main
from app.engine.stats import ReplyStats
from app.history import export, transcript
from app.history.errors import TranscriptError
from app.history.records import COMPLETE, GENERATING, INTERRUPTED, StoredConversation, StoredMessage
from app.history.store import Store
from tests.store_rows import row_counts
from tests.transcripts import by_position

STATS = ReplyStats(ttft_s=0.5, prefill_tokens=10, cached_tokens=0, prefill_s=0.01, prefill_tok_s=1000.0,
                   decode_tokens=5, decode_s=0.05, decode_tok_s=100.0, total_s=0.6, kv_used=15, n_ctx=512,
                   stop_reason="stop", prompt_tokens=10, wall_decode_tok_s=None)
VALID = transcript.to_document(StoredConversation(
    id=7, title="Owls 🦉", created_at=1733040000.0, updated_at=1733040100.5, system_prompt="Be brief.",
    model="m.gguf", settings={"seed": 1, "stop": ["\n\n"], "model": {"file": "m.gguf"}},
    messages=[StoredMessage("user", "Tell me\tabout owls", id=0, conversation_id=7, created_at=1733040000.0,
                            updated_at=1733040000.0),
              StoredMessage("assistant", "They hunt at night.", id=0, conversation_id=7,
                            created_at=1733040001.0, updated_at=1733040002.0, state=COMPLETE, stats=STATS,
                            out_of_context=True, reasoning="Owls: nocturnal.\n  Say so."),
              StoredMessage("user", "More?", id=0, conversation_id=7, created_at=1733040050.0,
                            updated_at=1733040050.0),
              StoredMessage("assistant", "Partly", id=0, conversation_id=7, created_at=1733040051.0,
                            updated_at=1733040052.0, state=GENERATING)]))


def _paths(v, here=()) -> list[tuple]:
    out = [here]
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, (*here, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, (*here, i))
    return out




def _branched() -> dict:
    """VALID with branches: its second question edited (the new one and its reply after the first
    reply), its last reply regenerated, and the path shown through the first version."""
    doc = copy.deepcopy(VALID)
    msgs = doc["conversation"]["messages"]
    edited = copy.deepcopy(msgs[2]) | {"id": 5, "parent_id": 2, "content": "And more?"}
    reply = copy.deepcopy(msgs[1]) | {"id": 6, "parent_id": 5, "content": "Owls are birds.", "edited": True}
    again = copy.deepcopy(msgs[3]) | {"id": 7, "parent_id": 3, "state": COMPLETE}
    msgs += [edited, reply, again]
    doc["conversation"]["active_leaf"] = 7
    return doc


def _version_1() -> dict:
    doc = copy.deepcopy(VALID)
    doc["version"] = 1
    del doc["conversation"]["active_leaf"]
    for m in doc["conversation"]["messages"]:
        for k in ("id", "parent_id", "edited"):
            del m[k]
    return doc


BASES = [VALID, _branched(), _version_1()]
PATHS = [_paths(b)[1:] for b in BASES]

odd_text = st.one_of(st.text(max_size=12), st.sampled_from(
    ["", "\ud800", "a\udcffb", "\udfff\ud800", "\x00", "line\nbreak", "\u202eevil", "🦙" * 3, "complete",
     "generating", "user", "assistant", "system", "llamadesk.transcript"]))
odd_number = st.one_of(
    st.integers(min_value=-(10**25), max_value=10**25),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -0.0, 1, -1, 1733040000000, 253402128000, 253402128001, 2**63, 10**400, 1e300]))
leaf = st.one_of(st.none(), st.booleans(), odd_number, odd_text)
value = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(odd_text, inner, max_size=3), max_leaves=6)


def _parent(doc, path):
    for k in path[:-1]:
        doc = doc[k]
    return doc


@st.composite
def documents(draw) -> bytes:
    base = draw(st.integers(0, len(BASES) - 1))
    doc = copy.deepcopy(BASES[base])
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(PATHS[base]))
        how = draw(st.sampled_from(["delete", "any", "same kind", "same kind"]))
        try:
            parent = _parent(doc, path)
            key = path[-1]
            old = parent[key]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation took this path away
        if how == "delete" and isinstance(parent, dict):
            del parent[key]  # a missing key
        elif how == "same kind" and isinstance(old, str):
            parent[key] = draw(odd_text)
        elif how == "same kind" and isinstance(old, (int, float)) and not isinstance(old, bool):
            parent[key] = draw(odd_number)  # huge, negative, NaN, milliseconds...
        else:
            parent[key] = draw(value)  # a wrong type
    raw = json.dumps(doc).encode()  # ASCII: surrogates, NaN and Infinity as JSON tools write them
    if draw(st.integers(0, 9)) == 7:  # now and then (not the shrinker's favourite 0), damaged bytes
        at = draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1:]
    return raw


def comparable(conv: StoredConversation) -> dict:
    doc = by_position(transcript.to_document(conv))
    for m in doc["conversation"]["messages"]:
        if m["state"] == GENERATING:  # no writer in this process: it arrives interrupted
            m["state"] = INTERRUPTED
    return doc


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(raw=documents())
def test_any_document_imports_whole_or_not_at_all(tmp_path, capsys, raw):
    path = tmp_path / "fuzzed.json"
    path.write_bytes(raw)
    with Store.open() as s:
        db = s.path
    before = row_counts(db)
    try:
        conv = transcript.load(path)
    except TranscriptError as e:
        msg = str(e)
        event(f"refused: {msg[len(str(path)) + 2:][:30]}")
        assert "\n" not in msg and msg.startswith(str(path)), msg
        msg.encode("utf-8")  # printable: no lone surrogate in the message itself
        assert row_counts(db) == before
        return
    event("imported")
    with Store.open() as s:
        cid = s.import_conversation(conv)
        back = s.get_conversation(cid)
    rows = len(conv.tree or conv.messages)  # every branch
    assert row_counts(db) == (before[0] + 1, before[1] + rows)
    assert [m.content for m in back.messages] == [m.content for m in conv.messages]  # the path shown
    assert comparable(back) == comparable(conv)
    capsys.readouterr()
    assert main(["list", "--json"]) == 0
    listed = {c["id"]: c for c in json.loads(capsys.readouterr().out)}
    assert listed[cid]["message_count"] == rows
    assert listed[cid]["updated_at"] is not None
    for fmt in export.FORMATS:
        assert export.render(back, fmt)
    again = tmp_path / "again.json"
    again.write_text(transcript.dumps(back), "utf-8")
    assert comparable(transcript.load(again)) == comparable(back)
