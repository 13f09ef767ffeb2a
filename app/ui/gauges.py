"""The live gauges panel: numbers, the KV bar and the plot, from a Snapshot.

It is a pure view of app.chat.live_gauges.Snapshot; the window's gauge timer decides
when to refresh (10 Hz while a reply runs), so the panel never depends on the
rate at which engine events arrive.
"""

from __future__ import annotations

from PySide6.QtWidgets import QFormLayout, QGroupBox, QLabel, QVBoxLayout

from app.chat.live_gauges import Snapshot
from app.ui.plots import CACHED, GENERATED, NEW, KvBar, RatePlot


def _ms(s: float | None) -> str:
    if s is None:
        return "–"
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.1f} s"


def _rate(r: float | None) -> str:
    return f"{r:.1f} tok/s" if r else "–"


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


def _swatch(color, text: str) -> str:
    return f'<span style="color:{color.name()};">■</span> {text}'


class GaugesPanel(QGroupBox):
    def __init__(self, parent=None):
        super().__init__("Live gauges", parent)
        self.phase = QLabel("idle")
        self.ttft = QLabel("–")
        self.recent = QLabel("–")
        self.live_rate = QLabel("–")
        self.final_rates = QLabel("–")
        self.remaining = QLabel("–")
        self.kv_bar = KvBar()
        self.kv_text = QLabel("–")
        self.dropped = QLabel("none")
        self.bandwidth = QLabel("–")
        self.bandwidth.setToolTip("Decoding reads every weight once per token, so it is bound by memory "
                                  "bandwidth: the rate it reads at, against this machine's peak (a short "
                                  "probe), and the fastest decode that peak allows for this model.")
        self.machine = QLabel("–")
        self.gpu = QLabel("–")
        self.machine.setToolTip("This machine: CPU use overall and per core, and LlamaDesk's memory "
                                "(sampled twice a second)")
        self.gpu.setToolTip("NVIDIA GPUs through NVML: use, memory, power and temperature")
        self.plot = RatePlot()
        for w in (self.recent, self.final_rates, self.kv_text, self.remaining, self.phase, self.bandwidth,
                  self.machine, self.gpu):
            w.setWordWrap(True)
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        for label, w in (("Status", self.phase), ("TTFT", self.ttft), ("Recent TTFT", self.recent),
                         ("Decode (live)", self.live_rate), ("Last reply", self.final_rates),
                         ("Remaining", self.remaining), ("Bandwidth", self.bandwidth),
                         ("Machine", self.machine), ("GPU", self.gpu), ("Dropped", self.dropped)):
            form.addRow(label, w)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(QLabel("KV cache"))
        lay.addWidget(self.kv_bar)
        lay.addWidget(self.kv_text)
        lay.addWidget(self.plot, 1)
        self.updates = 0  # refresh count (tests check the panel moves mid-reply)

    def show_machine(self, lines: tuple[str, str]) -> None:
        """The machine sampler's latest (app.engine.machine.describe)."""
        self.machine.setText(lines[0])
        self.gpu.setText(lines[1])

    def show_snapshot(self, s: Snapshot) -> None:
        self.updates += 1
        if s.phase == "idle":
            self.phase.setText("idle")
        elif s.active:
            what = {"waiting": "waiting", "prefill": "reading prompt", "decode": "generating"}[s.phase]
            self.phase.setText(f"{what} · {s.elapsed_s:.1f} s · {s.generated}/{s.max_tokens} tok")
        else:
            self.phase.setText(f"done in {s.elapsed_s:.2f} s · {s.generated} tok")
        counting = s.active and not s.ttft_final
        self.ttft.setText(_ms(s.ttft_s) + ("  (waiting…)" if counting else ""))
        self.recent.setText(", ".join(_ms(t) for t in s.recent_ttft) or "–")
        self.live_rate.setText(_rate(s.rate_tok_s) if s.active or s.rate_tok_s else "–")
        if s.prefill_tok_s or s.decode_tok_s:
            pre = f"{s.prefill_tok_s:.0f}" if s.prefill_tok_s else "–"
            dec = f"{s.decode_tok_s:.1f}" if s.decode_tok_s else "–"
            self.final_rates.setText(f"prefill {pre} · decode {dec} tok/s")
        elif s.source is not None and not s.active:
            got = f" · received at {s.wall_decode_tok_s:.1f}/s" if s.wall_decode_tok_s else ""
            self.final_rates.setText(f"not reported by the server{got}")
        elif s.active:
            self.final_rates.setText("(after this reply)")
        if s.active and s.remaining_s is not None:
            self.remaining.setText(f"≤ {s.remaining_s:.1f} s to max tokens ({s.max_tokens})")
        else:
            self.remaining.setText("–")
        used = s.kv_cached + s.kv_new + s.kv_generated
        self.kv_bar.set_values(s.kv_cached, s.kv_new, s.kv_generated, s.n_ctx)
        pct = f" ({100 * used / s.n_ctx:.0f}%)" if s.n_ctx else ""
        self.kv_text.setText(
            f"{_swatch(CACHED, _cached(s))} &nbsp;"
            f"{_swatch(NEW, f'new {s.kv_new}')} &nbsp;"
            f"{_swatch(GENERATED, f'generated {s.kv_generated}')}<br>"
            f"{used} / {s.n_ctx}{pct}"
        )
        self.bandwidth.setText(_bandwidth(s))
        self.dropped.setText(f"{s.dropped_messages} msgs ({s.dropped_tokens} tok) left out of context"
                             if s.dropped_messages else "none")
        self.plot.set_data(s.rate_series, s.turns)
