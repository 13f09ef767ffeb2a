"""Generated hostile input files: every line becomes one request or one error record, none is lost.

Lines start as valid OpenAI batch requests and are mutated: a field of the
wrong type, a key gone, NaN, infinities, numbers past any C type, odd
Unicode (U+2028, U+0085 and the like, which JSON keeps raw inside strings),
ids that collide or look automatic, non-objects, JSON cut short, plain text.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.batch_jsonl.requests import read_input
from app.batch_jsonl.results import ResultWriter
from app.engine.sampling import GenerationSettings

DEFAULTS = GenerationSettings(max_tokens=8)
FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# Number literals json.dumps never writes but json.loads reads (1e400 is inf to it).
RAW = ["1e400", "-1e400", "1e30", "9" * 5000, "-0.0", "4294967295", "2147483648", "NaN", "Infinity"]
FIELDS = ["max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
          "repeat_penalty", "seed", "stop", "messages"]

odd_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12) | st.sampled_from(
    ["", " ", "#", "#abc", "line-1", "line-2", "a\u2028b", "\x85", "\r", "é🐉", "\ufeff", "\x00"])
raw_number = st.sampled_from([f"RAW{i}" for i in range(len(RAW))])
scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | odd_text
           | st.floats(allow_nan=True, allow_infinity=True) | raw_number)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(odd_text, inner, max_size=3), max_leaves=6)


@st.composite
def request_line(draw) -> str:
    body = {"model": "m", "messages": [{"role": draw(st.sampled_from(["user", "system", "assistant"])),
                                        "content": draw(odd_text)}]}
    for f in draw(st.lists(st.sampled_from(FIELDS[:-1]), max_size=3)):
        body[f] = draw(st.integers(1, 50) | st.floats(0.01, 1.0) | st.just("x"))
    obj = {"custom_id": draw(odd_text | st.sampled_from(["a", "b", "line-2"])), "method": "POST",
           "url": "/v1/chat/completions", "body": body}
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["field", "top", "drop", "content", "parts"]))
        if kind == "field":
            body[draw(st.sampled_from(FIELDS))] = draw(values)
        elif kind == "top":
            obj[draw(st.sampled_from(["custom_id", "method", "url", "body"]))] = draw(values)
        elif kind == "drop":
            target = draw(st.sampled_from([obj, body]))
            if target:
                target.pop(draw(st.sampled_from(sorted(target))), None)
        elif kind == "content":
            body["messages"] = [{"role": draw(odd_text), "content": draw(values)}]
        else:
            body["messages"] = [{"role": "user", "content": [{"type": "text", "text": draw(values)}]}]
    if draw(st.integers(0, 9)) == 0:
        obj = draw(values)
    line = json.dumps(obj, ensure_ascii=draw(st.booleans()), allow_nan=True)
    for i, raw in enumerate(RAW):
        line = line.replace(f'"RAW{i}"', raw)
    if draw(st.integers(0, 7)) == 0:
        line = line[: draw(st.integers(0, max(0, len(line) - 1)))]
    return line


plain_line = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\n"),
                     max_size=30)
any_line = request_line() | request_line() | request_line() | plain_line | st.sampled_from(["", "   ", "\r"])


def check_items(lines: list[str], suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / f"in{suffix}"
        f.write_text("\n".join(lines) + "\n", encoding="utf-8")
        nonblank = [n for n, s in enumerate(lines, 1) if s.strip()]
        if not nonblank:
            return
        items = read_input(f, DEFAULTS)
        assert [it.line for it in items] == nonblank  # never a lost line
        ids = [it.custom_id for it in items]
        assert len(set(ids)) == len(ids) and all(ids), ids
        as_jsonl = suffix == ".jsonl" or lines[nonblank[0] - 1].removesuffix("\r").lstrip().startswith("{")
        for it in items:
            if it.error is None:
                assert it.request is not None and it.request.custom_id == it.custom_id
                assert it.request.messages and it.custom_id.startswith("#") != as_jsonl  # user ids
                it.request.settings.validate()
            else:
                assert it.request is None and it.custom_id
                assert it.error.startswith(f"line {it.line}: ") and "\n" not in it.error
                assert "\r" not in it.error and len(it.error) < 300, it.error
        w = ResultWriter(Path(d) / "out.jsonl", "m")  # every error record can be written
        for it in items:
            if it.error is not None:
                w.write_error(it)
        w.close()
        recs = (Path(d) / "out.jsonl").read_text(encoding="utf-8").split("\n")[:-1]
        assert [json.loads(r)["custom_id"] for r in recs] == [it.custom_id for it in items if it.error]


@FUZZ
@given(line=request_line())
def test_every_line_is_a_request_or_one_error(line):
    check_items([line], ".jsonl")


@FUZZ
@given(lines=st.lists(any_line, min_size=1, max_size=8), suffix=st.sampled_from([".jsonl", ".txt"]))
def test_a_whole_file_keeps_every_line_under_a_distinct_id(lines, suffix):
    check_items(lines, suffix)
