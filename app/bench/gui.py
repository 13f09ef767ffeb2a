"""`llamadesk bench --gui`: a long reply streamed through the real window, measured.

The window, flow and view are the production ones; the benchmark only watches.
It answers three questions about "never freeze":
- does the view keep up with the engine (delivered_ratio: the slope of tokens
  reaching the view over time / the engine's own decode rate, both wall clock);
- does the GUI thread stay responsive (max_stall_ms: the longest gap between
  ticks of a 10 ms heartbeat timer while tokens stream);
- does painting stay cheap as the reply grows (paint_ms_first / paint_ms_last:
  mean cost of one frame, text append plus viewport paint, over the frames that
  delivered the first and the last 100 tokens).

The story reply is mostly paragraphs. `markdown=True` asks for a reply full of
code blocks, lists and tables instead (the view renders each one as it
finishes), and the report counts what the reply really contained.
"""

from __future__ import annotations

import itertools
import os
import statistics
import time
from typing import TYPE_CHECKING

from app.engine.loader import LoadOptions
from app.engine.sampling import GenerationSettings

if TYPE_CHECKING:
    from PySide6.QtCore import QTimer

PROMPT = "Write a long story about a dragon who learns to paint."
# The bundled base model writes Markdown when an earlier turn shows it how: one
# answer with a code block, a bullet list, a table and numbered steps.
MARKDOWN_SHOT = ("How do I sort a list of numbers in Python?", """\
Use `sorted()` for a new list, or `list.sort()` to sort in place.

```python
numbers = [5, 2, 9, 1]
print(sorted(numbers))
numbers.sort(reverse=True)
print(numbers)
```

Things to remember:

- `sorted()` returns a new list.
- `list.sort()` changes the list and returns `None`.
- Both accept `key=` and `reverse=`.

| Call | Returns | Changes the list |
|------|---------|------------------|
| `sorted(xs)` | a new list | no |
| `xs.sort()` | `None` | yes |

Steps:

1. Pick `sorted()` or `sort()`.
2. Add `key=` to sort by a field.
3. Add `reverse=True` for descending order.
""")
MARKDOWN_PROMPT = "How do I reverse a string in Python?"
HEARTBEAT_MS = 10
EDGE_TOKENS = 100


def _wait(signal, timeout_s: float) -> list:
    from PySide6.QtCore import QEventLoop, QTimer

    loop, got = QEventLoop(), []
    def on(*args):
        got.append(args)
        loop.quit()
    signal.connect(on)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()
    signal.disconnect(on)
    if not got:
        raise TimeoutError(f"no {signal} within {timeout_s:.0f} s")
    return list(got[0])


def _frames(log: list[tuple[str, float, float]],
            appends: list[tuple[float, int]]) -> list[tuple[int, float, float]]:
    """(tokens shown after the frame, append ms, paint ms): each append plus the paints it caused."""
    out: list[tuple[int, float, float]] = []
    ai = 0
    for kind, _t, ms in log:
        if kind == "append":
            out.append((appends[ai][1], ms, 0.0))
            ai += 1
        elif out:
            n, a, p = out[-1]
            out[-1] = (n, a, p + ms)
    return out


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def run_gui_bench(model_path: str | None, opts: LoadOptions, tokens: int = 1024,
                  markdown: bool = False) -> dict:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(["llamadesk-bench"])
    win = _window(model_path, opts, tokens)
    try:
        info = _load_and_warm_up(win, model_path)
        _prepare_long_reply(win, tokens)
        prompt = _show_markdown_shot(win) if markdown else PROMPT
        appends, ticks, beat = _instrument(win)
        paint_log = win.view.paint_log
        msg = _stream(app, win, beat, prompt)
        live_renders = win.view.live_renders
    finally:
        win.close()
    report = _report(info, msg.stats, paint_log, appends, ticks)
    report.update(reply="markdown" if markdown else "story", **_contents(msg.content),
                  live_renders=live_renders)
    return report


def _window(model_path: str | None, opts: LoadOptions, tokens: int):
    """The production window, shown offscreen, with nothing saved or autoloaded."""
    from app.config import AppConfig
    from app.ui.window import MainWindow

    cfg = AppConfig(streaming=True, model_path=model_path, n_ctx=max(opts.n_ctx, tokens + 512),
                    n_gpu_layers=opts.n_gpu_layers, n_threads=opts.n_threads or 0)
    win = MainWindow(model=model_path, config=cfg, persist=False, history=False, autoload=False)
    win.resize(1200, 800)
    win.show()
    return win


def _load_and_warm_up(win, model_path: str | None):
    """Load the model and send one short reply, so the measured reply is steady
    state (weights paged in); returns what model_loaded carried."""
    win.load_model(model_path)
    info = _wait(win.model_loaded, 300)[0]
    win.flow.settings_source = lambda: GenerationSettings(max_tokens=16, temperature=0)
    win.composer.set_text(PROMPT)
    win.flow.send()
    _wait(win.flow.reply_finished, 120)
    win.new_chat()
    return info


def _prepare_long_reply(win, tokens: int) -> None:
    # ignore_eos makes the engine decode exactly `tokens`: no end-of-generation
    # token and no stop string of the prompt format ends the reply early.
    win.flow.settings_source = lambda: GenerationSettings(max_tokens=tokens, temperature=0,
                                                          ignore_eos=True)


def _show_markdown_shot(win) -> str:
    """Open a chat whose first exchange is the Markdown example; return the question."""
    from app.chat.conversation import LiveConversation, LiveMessage

    q, a = MARKDOWN_SHOT
    win.flow.new_chat(LiveConversation(messages=[LiveMessage("user", q), LiveMessage("assistant", a)]))
    return MARKDOWN_PROMPT


def _contents(text: str) -> dict:
    """What the reply held, counted on the renderer's own parse, so the figures
    say which kind of reply was measured."""
    from app.ui.chat.markdown import markdown_parser

    kinds = [t.type for t in markdown_parser().parse(text)]
    return {"code_blocks": kinds.count("fence") + kinds.count("code_block"),
            "list_items": kinds.count("list_item_open"),
            "table_rows": kinds.count("tr_open"),
            "paragraphs": kinds.count("paragraph_open")}


def _instrument(win) -> tuple[list[tuple[float, int]], list[float], QTimer]:
    """Watch without changing the production path: note the token count at each
    view append, log paints, and tick a heartbeat timer while tokens stream."""
    from PySide6.QtCore import Qt, QTimer

    from app.engine.events import Finished, TextDelta

    view = win.view
    view.paint_log = []
    appends: list[tuple[float, int]] = []
    orig_append = view.live_append

    def counted_append(text: str) -> None:
        orig_append(text)
        appends.append((time.perf_counter(), win.flow.gauges.generated))

    view.live_append = counted_append
    ticks: list[float] = []
    streaming = {"on": False}

    def on_event(_jid, ev) -> None:
        if isinstance(ev, TextDelta):
            streaming["on"] = True
        elif isinstance(ev, Finished):
            streaming["on"] = False

    win.bridge.reply_event.connect(on_event)
    beat = QTimer()
    beat.setTimerType(Qt.TimerType.PreciseTimer)
    beat.setInterval(HEARTBEAT_MS)
    beat.timeout.connect(lambda: ticks.append(time.perf_counter()) if streaming["on"] else None)
    return appends, ticks, beat


def _stream(app, win, beat: QTimer, prompt: str):
    """Send the long prompt with the heartbeat running; returns the finished message."""
    beat.start()
    win.composer.set_text(prompt)
    win.flow.send()
    msg = _wait(win.flow.reply_finished, 600)[0]
    beat.stop()
    app.processEvents()
    return msg


def _report(info, st, paint_log: list[tuple[str, float, float]],
            appends: list[tuple[float, int]], ticks: list[float]) -> dict:
    (t0, g0), (t1, g1) = appends[0], appends[-1]
    view_rate = (g1 - g0) / (t1 - t0)
    engine_rate = st.wall_decode_tok_s
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(ticks)]
    frames = _frames(paint_log, appends)
    total = st.decode_tokens
    first = [(a, p) for n, a, p in frames if n <= EDGE_TOKENS]
    last = [(a, p) for n, a, p in frames if n > total - EDGE_TOKENS]
    return {
        "model": info.report.model_path,
        "runs_on": info.report.runs_on,
        "tokens": total,
        "engine_decode_tok_s": engine_rate,
        "llama_decode_tok_s": st.decode_tok_s,
        "view_tok_s": view_rate,
        "delivered_ratio": view_rate / engine_rate if engine_rate else None,
        "max_stall_ms": max(gaps) if gaps else None,
        "heartbeat_p99_ms": statistics.quantiles(gaps, n=100)[98] if len(gaps) >= 100 else None,
        "paint_ms_first": _mean([a + p for a, p in first]),
        "paint_ms_last": _mean([a + p for a, p in last]),
        "append_ms_first": _mean([a for a, _ in first]),
        "append_ms_last": _mean([a for a, _ in last]),
        "frames": len(frames),
        "paint_events": sum(1 for k, _t, _ms in paint_log if k == "paint"),
        "ttft_s": st.ttft_s,
    }
