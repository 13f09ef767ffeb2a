"""The live gauges panel, a pure view of app.chat.live_gauges.Snapshot.

The window's gauge timer decides when to refresh (10 Hz while a reply runs),
so the panel never depends on the rate at which engine events arrive. The
panel scrolls rather than squeezing its plots, so it stays usable in a small
window; every number carries its unit, and hovering one says what it means.
Its Machine and GPU rows are fed by MachineFeed, twice a second, whether a
reply runs or not.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QFormLayout, QFrame, QGridLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.chat.live_gauges import Snapshot, Turn
from app.engine.machine import MachineSampler
from app.engine.machine import describe as describe_machine
from app.ui.chat.meters import BigNumber, CeilingBar, KvBar
from app.ui.widgets.charts import LineChart, TimelineChart
from app.ui.widgets.colors import CACHED, GENERATED, NEW, WAIT

TTFT_HELP = ("Time to first token: from Send until the first word appears. It is mostly prefill, "
             "reading the whole prompt; a prefix still in the cache is not read again.")
PREFILL_HELP = ("Prefill reads the prompt, many tokens per step in parallel: it is bound by arithmetic, "
                "so it runs far faster than decode.")
DECODE_HELP = ("Decode writes one token per step, and every step reads all the weights: it is bound by "
               "memory bandwidth. Live while a reply runs, then the reply's own rate.")
BANDWIDTH_HELP = ("Decoding reads every weight once per token, so it is bound by memory bandwidth: the "
                  "rate it reads at, against this machine's peak (a short probe, or NVML for an NVIDIA "
                  "GPU), and the fastest decode that peak allows for this model (the purple mark).")
TIMELINE_HELP = ("Each reply from Send: grey is the wait before the prompt was read, orange the prefill, "
                 "green the decode. A blue diamond marks a cached prefix: those tokens needed no prefill.")


def _ms(s: float | None) -> tuple[str | None, str]:
    if s is None:
        return None, "ms"
    return (f"{s * 1000:.0f}", "ms") if s < 10 else (f"{s:.1f}", "s")


def _num(v: float | None, digits: int) -> str | None:
    return f"{v:.{digits}f}" if v else None


def _cached(s: Snapshot) -> str:
    """The legend's cached count, and how much of it came from the prompt cache on disk."""
    if not s.kv_cached_disk:
        return f"cached {s.kv_cached}"
    if s.kv_cached_disk >= s.kv_cached:
        return f"cached {s.kv_cached} (disk)"
    return f"cached {s.kv_cached} ({s.kv_cached_disk} from disk)"


def _bandwidth(s: Snapshot) -> str:
    """'23.3 GB/s · 54% of peak · ceiling 174 tok/s', or why there is no figure."""
    if s.ceiling_tok_s is None:
        return "not measured (a server, or a GPU)" if s.source or s.bw_source is None else "–"
    if s.bw_gbs is None:
        return f"ceiling {s.ceiling_tok_s:.0f} tok/s"
    share = 100 * s.bw_utilization
    return f"{s.bw_gbs:.1f} GB/s · {share:.0f}% of peak · ceiling {s.ceiling_tok_s:.0f} tok/s"


def _peak(s: Snapshot) -> str:
    if s.peak_gbs is None or s.ceiling_tok_s is None:
        return ""
    line = f"peak {s.peak_gbs:.1f} GB/s, {s.bw_source}"
    if s.prefill_gflop_s:
        line += f"<br>prefill computed {s.prefill_gflop_s:.1f} GFLOP/s"
    return line


def _turn_line(t: Turn) -> str:
    tokens = f"{t.prefill_tokens} new" + (f", {t.cached} cached" if t.cached else "")
    return (f"last: wait {t.wait_s * 1000:.0f} ms · prefill {t.prefill_s * 1000:.0f} ms ({tokens}) · "
            f"decode {t.decode_s:.1f} s ({t.decode_tokens} tok)")


def swatch(color, text: str, mark: str = "■") -> str:
    return f'<span style="color:{color.name()};">{mark}</span> {text}'


def _rich_label(text: str = "") -> QLabel:
    lab = QLabel(text)
    lab.setWordWrap(True)
    lab.setTextFormat(Qt.TextFormat.RichText)
    return lab


def _heading(text: str, explain: str = "") -> QLabel:
    lab = QLabel(f"<b>{text}</b>")
    lab.setToolTip(explain)
    return lab


class GaugesPanel(QScrollArea):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.phase = QLabel("idle")
        self.phase.setWordWrap(True)
        self.ttft = BigNumber("TTFT", "ms", TTFT_HELP)
        self.prefill = BigNumber("Prefill", "tok/s", PREFILL_HELP)
        self.decode = BigNumber("Decode", "tok/s", DECODE_HELP)
        self.final_rates = _rich_label("–")
        self.ceiling_bar = CeilingBar()
        self.ceiling_bar.setToolTip(BANDWIDTH_HELP)
        self.bandwidth = _rich_label("–")
        self.bandwidth.setToolTip(BANDWIDTH_HELP)
        self.peak = _rich_label()
        self.kv_bar = KvBar()
        self.kv_text = _rich_label("–")
        self.plot = LineChart("decode (tok/s)", "seconds since first token")
        self.plot.setToolTip("The decode rate over this reply (last second of tokens), with the ceiling "
                             "this machine's memory allows.")
        self.timeline = TimelineChart()
        self.timeline.setToolTip(TIMELINE_HELP)
        self.timeline_text = _rich_label(
            " ".join((swatch(WAIT, "wait"), swatch(NEW, "prefill"), swatch(GENERATED, "decode"),
                      swatch(CACHED, "cached prefix", "◆"))))
        self.turn_text = _rich_label()
        self.remaining = _rich_label("–")
        self.recent = _rich_label("–")
        self.machine = _rich_label("–")
        self.gpu = _rich_label("–")
        self.dropped = _rich_label("none")
        self.machine.setToolTip("This machine: CPU use overall and per core, and LlamaDesk's memory "
                                "(sampled twice a second)")
        self.gpu.setToolTip("NVIDIA GPUs through NVML: use, memory, power and temperature")
        self._build()
        self.updates = 0  # refresh count (tests check the panel moves mid-reply)

    def _build(self) -> None:
        body = QWidget()
        col = QVBoxLayout(body)
        col.setContentsMargins(6, 6, 6, 6)
        col.addWidget(_heading("Live gauges"))
        col.addWidget(self.phase)
        tiles = QGridLayout()
        tiles.setSpacing(4)
        for i, tile in enumerate((self.ttft, self.prefill, self.decode)):
            tiles.addWidget(tile, 0, i)
        col.addLayout(tiles)
        col.addWidget(self.final_rates)
        col.addWidget(_heading("Memory bandwidth", BANDWIDTH_HELP))
        col.addWidget(self.ceiling_bar)
        col.addWidget(self.bandwidth)
        col.addWidget(self.peak)
        col.addWidget(_heading("KV cache", "The model's context memory: the prompt reused from the "
                               "cache, the prompt read now, and the generated tokens, of the whole context."))
        col.addWidget(self.kv_bar)
        col.addWidget(self.kv_text)
        col.addWidget(self.plot)
        col.addWidget(_heading("Timeline", TIMELINE_HELP))
        col.addWidget(self.timeline)
        col.addWidget(self.timeline_text)
        col.addWidget(self.turn_text)
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        for label, w in (("Remaining", self.remaining), ("Recent TTFT", self.recent),
                         ("Machine", self.machine), ("GPU", self.gpu), ("Dropped", self.dropped)):
            form.addRow(label, w)
        col.addLayout(form)
        col.addStretch(1)
        for chart in (self.plot, self.timeline):
            chart.setMinimumHeight(120)
            chart.setMaximumHeight(170)
        self.setWidget(body)
        self.setMinimumWidth(260)

    def show_machine(self, lines: tuple[str, str]) -> None:
        """The machine sampler's latest (app.engine.machine.describe)."""
        self.machine.setText(lines[0])
        self.gpu.setText(lines[1])

    def show_snapshot(self, s: Snapshot) -> None:
        self.updates += 1
        self._status(s)
        self.ttft.set_value(*_ms(s.ttft_s))
        self.ttft.caption.setText("TTFT…" if s.active and not s.ttft_final else "TTFT")
        self.prefill.set_value(_num(s.prefill_tok_s, 0))
        live = s.rate_tok_s if s.active else (s.decode_tok_s or s.wall_decode_tok_s)
        self.decode.set_value(_num(live, 1))
        self.decode.caption.setText("Decode (live)" if s.active else "Decode")
        self._final_rates(s)
        self.remaining.setText(f"≤ {s.remaining_s:.1f} s to max tokens ({s.max_tokens})"
                               if s.active and s.remaining_s is not None else "–")
        self.recent.setText(", ".join(f"{t * 1000:.0f} ms" for t in s.recent_ttft) or "–")
        self._kv(s)
        self.ceiling_bar.set_values(live, s.ceiling_tok_s)
        self.bandwidth.setText(_bandwidth(s))
        self.peak.setText(_peak(s))
        self.peak.setVisible(bool(self.peak.text()))
        self.dropped.setText(f"{s.dropped_messages} msgs ({s.dropped_tokens} tok) left out of context"
                             if s.dropped_messages else "none")
        self.plot.set_data(s.rate_series, s.ceiling_tok_s)
        self.timeline.set_turns(s.turns)
        self.turn_text.setText(_turn_line(s.turns[-1]) if s.turns else "")

    def _status(self, s: Snapshot) -> None:
        if s.phase == "idle":
            self.phase.setText("idle")
        elif s.active:
            what = {"waiting": "waiting", "prefill": "reading prompt", "decode": "generating"}[s.phase]
            self.phase.setText(f"{what} · {s.elapsed_s:.1f} s · {s.generated}/{s.max_tokens} tok")
        else:
            self.phase.setText(f"done in {s.elapsed_s:.2f} s · {s.generated} tok")

    def _final_rates(self, s: Snapshot) -> None:
        if s.prefill_tok_s or s.decode_tok_s:
            pre = f"{s.prefill_tok_s:.0f}" if s.prefill_tok_s else "–"
            dec = f"{s.decode_tok_s:.1f}" if s.decode_tok_s else "–"
            self.final_rates.setText(f"last reply: prefill {pre} · decode {dec} tok/s")
        elif s.source is not None and not s.active:
            got = f" · received at {s.wall_decode_tok_s:.1f}/s" if s.wall_decode_tok_s else ""
            self.final_rates.setText(f"rates not reported by the server{got}")
        elif s.active:
            self.final_rates.setText("rates of this reply: when it ends")

    def _kv(self, s: Snapshot) -> None:
        used = s.kv_cached + s.kv_new + s.kv_generated
        self.kv_bar.set_values(s.kv_cached, s.kv_new, s.kv_generated, s.n_ctx)
        pct = f" ({100 * used / s.n_ctx:.0f}%)" if s.n_ctx else ""
        self.kv_text.setText(
            f"{swatch(CACHED, _cached(s))} &nbsp;{swatch(NEW, f'new {s.kv_new}')} &nbsp;"
            f"{swatch(GENERATED, f'generated {s.kv_generated}')}<br>{used} / {s.n_ctx} tokens{pct}")


class MachineFeed(QObject):
    """The machine sampler's latest in the panel's Machine and GPU rows, twice a second.

    The sampler reads on its own thread; this only copies its newest sample
    on the GUI thread. close() stops both (the window does, when it closes).
    """

    def __init__(self, panel: GaugesPanel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.sampler = MachineSampler()
        self._timer = QTimer(self)
        self._timer.setInterval(500)
        self._timer.timeout.connect(lambda: panel.show_machine(describe_machine(self.sampler.latest)))
        self._timer.start()

    def close(self) -> None:
        self._timer.stop()
        self.sampler.close()
