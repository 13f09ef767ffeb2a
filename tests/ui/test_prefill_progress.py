"""While a long prompt is read, the waiting line and the gauges count the prompt, chunk by chunk.

The line used to read "reading prompt · 5.2 s · 0/512 tok" for the whole
prefill, 512 being max tokens. It names the prompt's own tokens to read (what
the cache does not hold) and moves as each n_batch chunk is evaluated.
"""

from __future__ import annotations

from types import SimpleNamespace

from app.chat.live_gauges import LiveGauges
from app.engine.events import FirstToken, PrefillStarted, Progress
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.ui.chat.flow import ChatFlow
from app.ui.chat.gauges import GaugesPanel

CHUNK = 128
MAX_TOKENS = 2


def long_prompt(engine, at_least: int) -> list[int]:
    text = " ".join(f"Line {i}: the lighthouse keeper counted ships." for i in range(at_least // 11))
    toks = engine.prompt_tokens([MessageBody("user", text + " Summarize.")])
    assert len(toks) >= at_least
    return toks


def test_prefill_progress_counts_the_prompt_chunk_by_chunk(engine, qtbot, monkeypatch):
    monkeypatch.setattr(engine.decoder, "n_batch", CHUNK)  # several chunks from a modest prompt
    prompt = long_prompt(engine, 512)
    panel = GaugesPanel()
    qtbot.addWidget(panel)
    g = LiveGauges()
    g.start(0.0, MAX_TOKENS, engine.n_ctx)
    flow = SimpleNamespace(gauges=g, _streaming=lambda: True)  # all _waiting_line reads
    seen: list[tuple[int, str, str]] = []
    after_first: list[str | None] = []

    def on_event(ev) -> None:
        g.feed(ev, ev.elapsed_s if isinstance(ev, Progress) else 0.0)
        if isinstance(ev, Progress) and ev.phase == "prefill":
            panel.show_snapshot(g.snapshot(ev.elapsed_s))
            seen.append((ev.prefill_done, ChatFlow._waiting_line(flow, ev.elapsed_s), panel.phase.text()))
        elif isinstance(ev, FirstToken):
            after_first.append(g.prompt_progress())
        events.append(ev)

    events: list = []
    engine.decoder.reset()
    done = engine.decoder.generate(prompt, GenerationSettings(max_tokens=MAX_TOKENS, temperature=0,
                                                              ignore_eos=True), on_event=on_event)
    started = next(e for e in events if isinstance(e, PrefillStarted))
    total = len(prompt)
    assert started.new_tokens == total == done.stats.prefill_tokens and started.cached_tokens == 0
    assert started.reply_budget == MAX_TOKENS

    counts = [n for n, _line, _status in seen]
    assert counts[0] == 0 and counts[-1] == total
    assert counts == sorted(counts)  # never backwards
    assert set(range(CHUNK, total, CHUNK)) <= set(counts)  # every chunk boundary was reported
    for n, line, status in seen:
        assert line.startswith("reading the prompt… ") and f"{n}/{total} prompt tok" in line
        assert status.startswith("reading prompt · ") and f"{n}/{total} prompt tok" in status
        assert f"/{MAX_TOKENS} tok" not in line + status  # max tokens is not the prompt
    assert any("s to go" in line for _n, line, _s in seen[1:-1])  # a running rate, once there is one
    assert after_first == [None]  # the line gives way once the prompt is read
