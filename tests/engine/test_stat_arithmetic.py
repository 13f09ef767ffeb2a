"""A reply's counts, times and rates say one arithmetic wherever they are shown.

The decode's count is the tokens its steps sampled: the reply's first token
comes from the prefill (TTFT times it), so a reply stopped at max tokens has
one fewer. The footer, the gauges' tile and KV legend, the JSON record that
`ask --json` prints and every export must give that count, and a rate that is
count / seconds to the digits shown (never compared as exact floats: the
times are measured).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest

from app.chat.live_gauges import LiveGauges
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats, phase_words, span
from app.history import export
from app.history.store import Store

PHASE = re.compile(r"(?P<what>prefill|decode) (?P<n>\d+) tok in (?P<t>[\d.]+) (?P<unit>ms|s)"
                   r"(?: @ (?P<rate>[\d.]+) tok/s)?")


def half_unit(shown: str) -> float:
    """Half of the last digit of a number as shown: '9.5' -> 0.05, '1574' -> 0.5."""
    return 0.5 * 10.0 ** Decimal(shown).as_tuple().exponent


def phases(text: str) -> dict[str, re.Match]:
    return {m["what"]: m for m in PHASE.finditer(text)}


def redo(m: re.Match) -> None:
    """tokens / seconds is the rate shown, within the rounding of the digits shown."""
    n, t, r = int(m["n"]), float(m["t"]), float(m["rate"])
    scale = 1000 if m["unit"] == "ms" else 1
    seconds, seconds_err = t / scale, half_unit(m["t"]) / scale
    allowed = half_unit(m["rate"]) + r * seconds_err / seconds + 1e-9
    assert abs(n / seconds - r) <= allowed, (m.group(0), n / seconds)


def test_a_real_reply_says_one_count_and_one_rate_everywhere(engine, qtbot):
    from app.ui.chat.gauges import GaugesPanel

    engine.decoder.reset()
    events: list = []
    reply = engine.reply([], "Tell me a story about a dragon.",
                         GenerationSettings(max_tokens=16, temperature=0, ignore_eos=True),
                         on_event=events.append)
    st = reply.stats
    assert st.stop_reason == "length" and st.decode_tokens == 16
    # The first token is the prefill's: 15 decode steps sampled the rest, and wrote 15 back.
    assert st.decode_sampled == 15 == st.kv_used - st.prompt_tokens

    footer = st.summary()
    shown = phases(footer)
    assert "reply 16 tok" in footer and shown["decode"]["n"] == "15"
    redo(shown["decode"])
    if shown["prefill"]["rate"]:
        redo(shown["prefill"])
    assert shown["decode"]["rate"] == st.decode().value

    # The JSON record (what `ask --json` prints): the same count, and its rate is count / time.
    record = json.loads(json.dumps(st.to_json()))
    assert (record["decode_tokens"], record["decode_sampled"]) == (16, 15)
    assert record["decode_tok_s"] == pytest.approx(record["decode_sampled"] / record["decode_s"], rel=1e-9)
    assert f"{record['decode_tok_s']:.1f}" == shown["decode"]["rate"]
    assert record["prefill_tok_s"] == pytest.approx(record["prefill_tokens"] / record["prefill_s"], rel=1e-9)
    assert ReplyStats.from_json(record).summary() == footer

    # The gauges: the tile's rate and count, the KV legend's decoded tokens, the reply's length.
    g = LiveGauges()
    g.start(0.0, 16, engine.n_ctx)
    for ev in events[:-1]:
        g.feed(ev, 0.5)
    g.finish(st, 1.0)
    panel = GaugesPanel()
    qtbot.addWidget(panel)
    panel.show_snapshot(g.snapshot(1.0))
    assert panel.decode.text() == str(st.decode()) and "15 tok" in panel.decode.unit_label.text()
    assert "decoded&nbsp;15" in panel.kv_text.text()
    assert panel.phase.text().endswith("· 16 tok")

    # Every export: the footer's line, the HTML table's decode row, the JSON transcript's record.
    with Store.open() as s:
        cid = s.create_conversation()
        s.add_message(cid, "user", "Tell me a story about a dragon.")
        s.add_message(cid, "assistant", reply.text, stats=st)
        conv = s.get_conversation(cid)
    for fmt in ("md", "txt", "html"):
        assert footer in export.render(conv, fmt), fmt
    rows = dict(st.details())
    assert rows["reply"] == "16 tok" and rows["decode"] == shown["decode"].group(0).removeprefix("decode ")
    assert f"<td>decode</td><td>{rows['decode']}</td>" in export.render(conv, "html")
    saved = json.loads(export.render(conv, "json"))["conversation"]["messages"][1]["stats"]
    assert saved["decode_sampled"] == 15 and saved["decode_tokens"] == 16


def test_a_reply_that_ends_early_counts_what_its_steps_wrote_back(engine):
    """A stop string ends a reply before its last token is fed back (N - 1 sampled by decode
    steps); an end-of-generation token is sampled by a step after the last one was (N)."""
    engine.decoder.reset()
    st = engine.reply([], "What is 2+2? Answer with one number.",
                      GenerationSettings(max_tokens=24, temperature=0)).stats
    assert st.decode_tokens is not None and st.decode_sampled in (st.decode_tokens - 1, st.decode_tokens)
    assert st.decode_sampled == st.kv_used - st.prompt_tokens
    m = phases(st.summary())["decode"]
    assert int(m["n"]) == st.decode_sampled and f"reply {st.decode_tokens} tok" in st.summary()
    if m["rate"]:
        redo(m)


def test_a_record_from_before_the_count_is_read_with_the_count_its_rate_was_over():
    """Stored replies said 'decode 16 tok' beside a rate over 15: the count comes back from the
    rate and the time, which it divided."""
    old = {"ttft_s": 0.5, "prefill_tokens": 97, "cached_tokens": 0, "prefill_s": 0.2403,
           "prefill_tok_s": 97 / 0.2403, "decode_tokens": 16, "decode_s": 1.5741,
           "decode_tok_s": 15 / 1.5741, "total_s": 2.4, "kv_used": 112, "n_ctx": 512,
           "stop_reason": "length"}
    st = ReplyStats.from_json(old)
    assert st.decode_sampled == 15 and "reply 16 tok" in st.summary()
    assert "decode 15 tok in 1574 ms @ 9.5 tok/s" in st.summary()
    assert "prefill 97 tok in 240.3 ms @ 404 tok/s" in st.summary()
    remote = ReplyStats.from_json({**old, "source": "llama-server at h:1", "decode_tok_s": 16 / 1.5741})
    assert remote.decode_sampled is None and remote.decode_count() == 16  # the server's own count


@pytest.mark.parametrize(("seconds", "text"), [(0.0020312, "2.031 ms"), (0.020312, "20.31 ms"),
                                               (0.24031, "240.3 ms"), (1.5741, "1574 ms"),
                                               (12.341, "12.34 s"), (123.41, "123.4 s")])
def test_a_phase_time_keeps_four_digits(seconds, text):
    assert str(span(seconds)) == text


def test_phase_words_without_a_rate_and_from_a_server():
    assert phase_words(0, 0.0, None, False) == "0 tok"
    assert phase_words(None, None, None, True) == "not reported"
    assert phase_words(16, None, None, True) == "16 tok @ rate not reported"
    st = ReplyStats(ttft_s=0.1, prefill_tokens=12, cached_tokens=0, prefill_s=0.045, prefill_tok_s=266.7,
                    decode_tokens=415, decode_s=4.14, decode_tok_s=414 / 4.14, total_s=4.3, kv_used=426,
                    n_ctx=512, stop_reason="length", prompt_tokens=12, reply_limit=415)
    assert "prefill 12 tok in 45 ms" in st.summary()  # a short prompt: its time, no rate
    assert "the context's limit reached" in st.summary()
    assert "reply limited to 415 tokens by the context" in st.summary()
    assert ("reply limit", "415 tok, by the context") in st.details()
