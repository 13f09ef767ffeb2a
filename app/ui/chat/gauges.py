"""The live gauges panel, a pure view of app.chat.live_gauges.Snapshot.

The window's gauge timer decides when to refresh (10 Hz while a reply runs),
so the panel never depends on the rate at which engine events arrive. Every
figure of a finished reply is formatted by its ReplyStats' own methods, the
footer's, so a number on a tile is the number under the message. Before the
conversation's first reply the panel says what will appear rather than
drawing empty axes; lines that come and go keep their room, so the panel
does not jump mid-reply. Every number carries its unit, and hovering one says
what it means. Its Machine and GPU rows are fed by MachineFeed, twice a
second, whether a reply runs or not. Under the KV cache, what the conversation's
tool definitions take of every prompt, counted with the loaded model's tokenizer
(app.chat.tool_cost): an MCP server's tools are prompt tokens before the user
says a word, and the first reply's prefill reads them.
"""

from __future__ import annotations

import re

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QFormLayout, QFrame, QGridLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.chat.live_gauges import Snapshot, Turn, prompt_words
from app.engine.machine import MachineSampler
from app.engine.machine import describe as describe_machine
from app.engine.stats import (
    PREFILL_RATE_MIN_TOKENS,
    SETUP_NAMED_S,
    duration,
    grammar_figure,
    rate,
    speculation_words,
)
from app.ui.chat.meters import BigNumber, CeilingBar, KvBar
from app.ui.widgets.charts import ChartOrNote, LineChart, TimelineChart
from app.ui.widgets.colors import CACHED, GENERATED, NEW, SETUP, WAIT

FIRST = "will show after your first message"
TTFT_HELP = ("Time to first token: from Send until the first word appears. It is mostly prefill, "
             "reading the whole prompt; a prefix still in the cache is not read again.")
PREFILL_HELP = ("Prefill reads the prompt, many tokens per step in parallel: it is bound by arithmetic, "
                "so it runs far faster than decode. Under {n} tokens the time it took is shown instead "
                "of a rate: over a handful of tokens a rate is mostly the fixed cost of one step.")
DECODE_HELP = ("Decode writes one token per step, and every step reads all the weights: it is bound by "
               "memory bandwidth. Live while a reply runs, then the reply's own rate: the tokens its "
               "steps sampled over their time. The first token comes from the prefill (its time is "
               "TTFT's), so a reply of 16 tokens is 15 decoded, or 16 when the model ended it (the last "
               "step samples the end).")
BANDWIDTH_HELP = ("Decoding reads every weight once per token, so it is bound by memory bandwidth: the "
                  "rate it reads at, against this machine's peak (a short probe, or NVML for an NVIDIA "
                  "GPU), and the fastest decode that peak allows for this model (the purple mark).")
ROOFS_HELP = ("A token costs bytes (every weight read once) and arithmetic (a multiply-add per weight, "
              "plus attention's): two roofs. The decode's share of each, memory against the probed "
              "bandwidth and compute against the MAC rate llama.cpp's kernels reached on a long "
              "prompt here; the lower roof is the one that binds, and the ceiling above is it.")
KV_HELP = ("The model's context memory: the prompt reused from the cache, the prompt read now, and the "
           "tokens the decode wrote back, of the whole context. Each decode step writes the last token "
           "back and samples the next, so \"decoded\" is the footer's decode count: the reply's last "
           "token is written back only when the model ended the reply.")
SPEC_HELP = ("Speculative decoding: guesses at the next tokens, checked by the model in one step, the "
             "agreeing ones kept. The share of guesses kept, how many a check keeps, and the decode rate "
             "over the rate plain steps would give (measured as the reply runs). It steps aside for "
             "the rest of a reply it does not speed up.")
GRAMMAR_HELP = ("The reply is kept to its format (a JSON schema, any JSON, a grammar): each sampled token "
                "is checked and, when refused, the vocabulary is masked and the token drawn again. This "
                "is its time per generated token, part of every decode step, and its share of a step.")
TOOLS_HELP = ("Tool definitions are written into every prompt, so the model knows what it may call: "
              "these are their tokens, of the context. The first reply's prefill reads them; later "
              "replies find them in the cache while the conversation's start is unchanged.")
TIMELINE_HELP = ("Each reply of this conversation from Send: grey is the wait before the prompt was "
                 "read (brown, within it: setting up the reply's format; a model's first constrained "
                 "reply indexes its vocabulary), orange the prefill, green the decode; the last bar "
                 "grows while a reply runs. "
                 "A blue diamond marks a cached prefix: those tokens needed no prefill.")


def _num(v: float | None, digits: int) -> str | None:
    return f"{v:.{digits}f}" if v else None


def swatch(color, text: str, mark: str = "■") -> str:
    """A legend entry that wraps as one piece: its mark never lands on another line than its words."""
    words = text.replace(" ", "&nbsp;")
    return f'<span style="color:{color.name()};">{mark}</span>&nbsp;{words}'


def _cached(s: Snapshot) -> str:
    """The legend's cached count, and how much of it came from the prompt cache on disk."""
    if not s.kv_cached_disk:
        return f"cached {s.kv_cached}"
    if s.kv_cached_disk >= s.kv_cached:
        return f"cached {s.kv_cached} (disk)"
    return f"cached {s.kv_cached} ({s.kv_cached_disk} from disk)"


def source_words(source: str | None) -> str:
    """Where the peak comes from, in words ("probe (1 threads)" read as a typo)."""
    return re.sub(r"\b1 threads\b", "1 thread", source or "")


def _bandwidth(s: Snapshot) -> str:
    """'23.3 GB/s · 54% of peak · ceiling 174 tok/s', or why there is no figure."""
    if not s.started:
        return FIRST
    if s.ceiling_tok_s is None:
        return "not measured (a server, or a GPU)" if s.source or s.bw_source is None else "–"
    if s.bw_gbs is None or s.bw_utilization is None:
        return f"ceiling {s.ceiling_tok_s:.0f} tok/s"
    share = 100 * s.bw_utilization
    return f"{s.bw_gbs:.1f} GB/s · {share:.0f}% of peak · ceiling {s.ceiling_tok_s:.0f} tok/s"


def roofs_words(s: Snapshot) -> str:
    """'compute 23% of its roof · memory binds' (the line above gives memory's share of its
    peak), or what is not measured yet: one line, which a narrow panel keeps."""
    if not s.started or s.binds is None:
        return ""
    if s.compute_ceiling_tok_s is None:
        return "compute roof not measured yet"
    comp = f"{100 * s.compute_utilization:.0f}%" if s.compute_utilization is not None else "–"
    return f"compute {comp} of its roof · {s.binds} binds"


def _peak(s: Snapshot) -> str:
    """One line, once there is a peak (where it comes from is the label's tooltip): the panel
    keeps its room for the roofs line above it."""
    if s.peak_gbs is None or not s.started:
        return ""
    gflop = (f"last prefill {s.prefill_gflop_s:.1f} GFLOP/s" if s.prefill_gflop_s
             else "prefill: when a reply ends")
    return f"peak {s.peak_gbs:.1f} GB/s · {gflop}"


def grammar_words(s: Snapshot) -> str | None:
    """'Grammar 45 µs/tok · 0.2% of a decode step', live or the record's; None: free text. Two
    lines' room is kept for it (the panel is narrow), so it never moves what follows."""
    if not s.constrained:
        return None
    fig = grammar_figure(s.grammar_ms)
    if fig is None:
        return "Grammar: measured as the decode runs"
    step_rate = s.rate_tok_s if s.active else (s.decode_tok_s or s.wall_decode_tok_s)
    share = f" · {s.grammar_ms * step_rate / 10:.1f}% of a decode step" if step_rate and s.grammar_ms else ""
    return f"Grammar {fig}{share}"


def _answer(s: Snapshot) -> str:
    """A thinking model's first answer token, beside the status: TTFT's tile is the first token
    of any kind, and a second figure in the tile would widen the panel."""
    return f" · answer at {duration(s.ttfa_s)}" if s.ttfa_s is not None else ""


def _thought(s: Snapshot) -> str:
    """Of the decoded cells, those a thinking model's reasoning holds: they stay in the cache
    for this reply, though a later prompt may leave them out."""
    return f" · {min(s.reasoning_tokens, s.kv_generated)} of them thinking" if s.reasoning_tokens else ""


def legend(setup: bool) -> str:
    """The timeline's colours; the format's setup among them only while a turn shown has one
    (a model's first constrained reply), so the usual legend keeps to one line."""
    parts = [swatch(WAIT, "wait"), *([swatch(SETUP, "format setup")] if setup else []),
             swatch(NEW, "prefill"), swatch(GENERATED, "decode"), swatch(CACHED, "cached", "◆")]
    return " &nbsp; ".join(parts)


def turn_line(number: int, t: Turn) -> str:
    """A finished reply on the timeline, with the footer's TTFT and total (the segments' own
    times are the bars' lengths, and the turn's tooltip)."""
    tokens = f"{t.prefill_tokens} new" + (f", {t.cached} cached" if t.cached else "")
    head = f"#{number}: TTFT {duration(t.ttft_s)}" if t.ttft_s is not None else f"#{number}: no text"
    decode = f" · {t.decode_tokens} tok" if t.ttft_s is not None else ""
    setup = f" · format setup {duration(t.setup_s)}" if t.setup_s >= SETUP_NAMED_S else ""
    thought = f" · thought {t.reasoning_tokens} tok" if t.reasoning_tokens else ""
    answer = f", answer at {duration(t.ttfa_s)}" if t.reasoning_tokens and t.ttfa_s is not None else ""
    return f"{head} ({tokens}){decode}{thought}{answer}{setup} · total {t.total_s:.2f} s"


def turn_tip(t: Turn) -> str:
    setup = f" (format setup {duration(t.setup_s)})" if t.setup_s >= SETUP_NAMED_S else ""
    return (f"wait {duration(t.wait_s)}{setup} · reading the prompt {duration(t.prefill_s)} · "
            f"decode {duration(t.decode_s)}")


def tools_words(tokens: int | None, n_ctx: int, n_tools: int, counted: bool = True,
                pending: list[str] | tuple[str, ...] = ()) -> str:
    """'tools 3,412 tok of 8,192 (42%) · 5 definitions in every prompt', or why there is no count."""
    later = f" · {', '.join(pending)}: once started" if pending else ""
    if not n_tools:
        return f"tools: none yet{later}" if pending else ""
    defs = f"{n_tools} definition{'s' if n_tools != 1 else ''}"
    if tokens is None:
        why = "counted with a local model" if not counted else "not counted"
        return f"tools: {defs} in every prompt ({why}){later}"
    share = f" ({100 * tokens / n_ctx:.0f}%)" if n_ctx else ""
    of = f" of {n_ctx:,}" if n_ctx else ""
    return f"tools {tokens:,} tok{of}{share} · {defs} in every prompt{later}"


def _rich_label(text: str = "", lines: int = 0) -> QLabel:
    """`lines`: the room it keeps however much it holds, so what follows does not move."""
    lab = QLabel(text)
    lab.setWordWrap(True)
    lab.setTextFormat(Qt.TextFormat.RichText)
    if lines:
        lab.setMinimumHeight(lines * lab.fontMetrics().lineSpacing() + 2)
        lab.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
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
        self.phase = _rich_label(f"Gauges {FIRST}.")
        self.ttft = BigNumber("TTFT", "ms", TTFT_HELP)
        self.prefill = BigNumber("Prefill", "tok/s", PREFILL_HELP.format(n=PREFILL_RATE_MIN_TOKENS))
        self.decode = BigNumber("Decode", "tok/s", DECODE_HELP)
        self.note = _rich_label("", lines=2)
        self.spec = _rich_label("", lines=2)
        self.spec.setToolTip(SPEC_HELP)
        self.grammar = _rich_label("", lines=2)
        self.grammar.setToolTip(GRAMMAR_HELP)
        self.ceiling_bar = CeilingBar()
        self.ceiling_bar.setToolTip(BANDWIDTH_HELP)
        self.bandwidth = _rich_label(FIRST)
        self.bandwidth.setToolTip(BANDWIDTH_HELP)
        self.peak = _rich_label(lines=1)
        self.roofs = _rich_label(lines=1)
        self.roofs.setToolTip(ROOFS_HELP)
        self.kv_bar = KvBar()
        self.kv_bar.setToolTip(KV_HELP)
        self.kv_text = _rich_label(FIRST, lines=2)
        self.kv_text.setToolTip(KV_HELP)
        self.tools = _rich_label()
        self.tools.setToolTip(TOOLS_HELP)
        self.tools.hide()
        self.tools_tokens: int | None = None  # what the conversation's tool definitions take
        self.plot = LineChart("decode (tok/s)", "seconds since first token")
        self.plot.setToolTip("The decode rate over this reply (last second of tokens), with the ceiling "
                             "this machine's memory allows.")
        self.timeline = TimelineChart()
        self.timeline.setToolTip(TIMELINE_HELP)
        self.plot_box = ChartOrNote(self.plot, f"The decode rate {FIRST}.")
        self.timeline_box = ChartOrNote(self.timeline, f"Each reply's wait, prefill and decode {FIRST}.")
        self.timeline_text = _rich_label(legend(setup=False))
        self.turn_text = _rich_label(lines=1)
        self.machine = _rich_label("–")
        self.gpu = _rich_label("–")
        self.dropped = _rich_label("none")
        self.machine.setToolTip("This machine: CPU use overall and per core, and LlamaDesk's memory "
                                "(sampled twice a second)")
        self.gpu.setToolTip("NVIDIA GPUs through NVML: use, memory, power and temperature")
        self._build()
        self._setup_shown = False  # the legend names the format's setup
        self.updates = 0  # refresh count (tests check the panel moves mid-reply)

    def _build(self) -> None:
        body = QWidget()
        col = QVBoxLayout(body)
        col.setContentsMargins(6, 6, 6, 6)
        col.setSpacing(3)
        col.addWidget(self.phase)
        tiles = QGridLayout()
        tiles.setSpacing(4)
        for i, tile in enumerate((self.ttft, self.prefill, self.decode)):
            tiles.addWidget(tile, 0, i)
        col.addLayout(tiles)
        col.addWidget(self.note)
        col.addWidget(self.spec)
        col.addWidget(self.grammar)
        col.addWidget(_heading("Memory bandwidth", BANDWIDTH_HELP))
        col.addWidget(self.ceiling_bar)
        col.addWidget(self.bandwidth)
        col.addWidget(self.roofs)
        col.addWidget(self.peak)
        col.addWidget(_heading("KV cache", KV_HELP))
        col.addWidget(self.kv_bar)
        col.addWidget(self.kv_text)
        col.addWidget(self.tools)
        col.addWidget(self.plot_box, 1)  # the charts take the room a tall window has
        col.addWidget(_heading("Timeline", TIMELINE_HELP))
        col.addWidget(self.timeline_box, 1)
        col.addWidget(self.timeline_text)
        col.addWidget(self.turn_text)
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        for label, w in (("Machine", self.machine), ("GPU", self.gpu), ("Dropped", self.dropped)):
            form.addRow(label, w)
        col.addLayout(form)
        for box, most in ((self.plot_box, 220), (self.timeline_box, 170)):  # six turns' bars, no taller
            box.setMinimumHeight(112)
            box.setMaximumHeight(most)
        self.setWidget(body)
        # Room for the body and the scrollbar a short window shows: nothing is cut on the right.
        bar = self.verticalScrollBar().sizeHint().width()
        self.setMinimumWidth(max(260, body.minimumSizeHint().width() + bar + 2 * self.frameWidth() + 2))

    def show_tools_cost(self, tokens: int | None, n_ctx: int, n_tools: int, counted: bool = True,
                        pending: list[str] | tuple[str, ...] = ()) -> None:
        """What the conversation's tools take of every prompt (shown only while it has tools)."""
        self.tools_tokens = tokens if n_tools else None
        text = tools_words(tokens, n_ctx, n_tools, counted, pending)
        self.tools.setText(text)
        self.tools.setVisible(bool(text))

    def show_machine(self, lines: tuple[str, str]) -> None:
        """The machine sampler's latest (app.engine.machine.describe)."""
        self.machine.setText(lines[0])
        self.gpu.setText(lines[1])

    def show_snapshot(self, s: Snapshot) -> None:
        self.updates += 1
        self._status(s)
        self._tiles(s)
        self._note(s)
        self._speculation(s)
        self._grammar(s)
        self._kv(s)
        live = s.rate_tok_s if s.active else (s.decode_tok_s or s.wall_decode_tok_s)
        # The mark is the lower roof's ceiling (Limits.at), so the share is against that roof.
        share = s.compute_utilization if s.binds == "compute" else s.bw_utilization
        self.ceiling_bar.set_values(live, s.ceiling_tok_s, share)
        self.bandwidth.setText(_bandwidth(s))
        self.peak.setText(_peak(s))
        self.peak.setToolTip(f"The peak: {source_words(s.bw_source)}" if s.bw_source else "")
        self.roofs.setText(roofs_words(s))
        self.roofs.setVisible(s.started)
        self.peak.setVisible(s.started)  # from the first reply on, always its line
        self.dropped.setText(f"{s.dropped_messages} msgs ({s.dropped_tokens} tok) left out of context"
                             if s.dropped_messages else "none")
        # While a reply runs the two charts take turns, each at half the refresh rate: one paint
        # pass drawing both was the GUI thread's longest gap between frames.
        turn = self.updates % 2 if s.active else None
        if turn != 1:
            self.plot_box.show_chart(bool(s.rate_series) or s.active or s.stats is not None)
            self.plot.set_data(s.rate_series, s.ceiling_tok_s)
        if turn != 0:
            self.timeline_box.show_chart(bool(s.turns))
            self.timeline.set_turns(s.turns)
            setup = any(t.setup_s >= SETUP_NAMED_S for t in s.turns[-TimelineChart.SHOWN:])
            if setup != self._setup_shown:
                self._setup_shown = setup
                self.timeline_text.setText(legend(setup))
        done = [t for t in s.turns if not t.live]
        self.turn_text.setText(turn_line(len(done), done[-1]) if done else "")
        self.turn_text.setToolTip(turn_tip(done[-1]) if done else "")

    def _tiles(self, s: Snapshot) -> None:
        st = s.stats
        if st is not None and not s.active:  # the record's figures, as the footer shows them
            ttft, prefill = st.ttft(), st.prefill()
            decode = st.decode() or (rate(st.wall_decode_tok_s, 1) if st.remote else None)
        else:
            ttft, prefill, decode = duration(s.ttft_s), None, rate(s.rate_tok_s if s.active else None, 1)
        self.ttft.set_figure(ttft)
        streaming_off = not s.streaming and s.ttft_final
        self.ttft.caption.setText("TTFT…" if s.active and not s.ttft_final else
                                  ("First token" if streaming_off else "TTFT"))
        small = st is not None and prefill is not None and prefill.unit != "tok/s"
        # A short prompt shows its time, and how short it was.
        self.prefill.set_figure(prefill, f"{st.prefill_tokens} tok" if small and st is not None else "")
        # The count the rate is over: the footer's "decode 15 tok", not the reply's length.
        counted = st.decode_count() if st is not None and not s.active and st.decode() else None
        self.decode.set_figure(decode, f"{counted} tok" if counted is not None else "")
        self.decode.caption.setText("Decode (live)" if s.active else "Decode")

    def _note(self, s: Snapshot) -> None:
        """What the tiles cannot say: when a reply shown all at once appeared, a server's silence."""
        st = s.stats
        if s.active:
            text = "streaming is off: the reply shows when it is whole" if not s.streaming else ""
        elif st is None:
            text = ""
        elif not s.streaming:
            text = (f"streaming is off: first token at {st.ttft() or '–'}, "
                    f"the reply shown at {st.total()}")
        elif st.remote and not st.decode():
            got = f" · received at {st.wall_decode_tok_s:.1f}/s" if st.wall_decode_tok_s else ""
            text = f"rates not reported by the server{got}"
        else:
            text = ""
        self.note.setText(text)
        # Shown only while it has something to say: it changes with the streaming mode or the
        # server, never mid-reply, so hiding it moves nothing while a reply runs.
        self.note.setVisible(bool(text))

    def _speculation(self, s: Snapshot) -> None:
        """While a reply speculates: how many guesses it keeps and the rate it would have had
        without them; after, the record's line (ReplyStats.speculation)."""
        p, st = s.spec, s.stats
        text, plain = "", None
        if s.active and p is not None:
            text = speculation_words(p.mode, p.drafted, p.accepted, p.checks, p.speedup, p.stepped_aside)
            plain = p.plain_tok_s
        elif not s.active and st is not None and st.spec_mode is not None:
            text, plain = st.speculation() or "", st.plain_tok_s
        if text and plain:
            text += f" · {plain:.1f} tok/s without"
        self.spec.setText(text)
        self.spec.setVisible(bool(text))

    def _grammar(self, s: Snapshot) -> None:
        """A constrained reply's grammar cost per token: live from the decode's first Progress,
        then the record's. Shown from Send on (the line does not appear mid-reply)."""
        self.grammar.setText(grammar_words(s) or "")
        self.grammar.setVisible(s.constrained)

    def _status(self, s: Snapshot) -> None:
        if not s.started:
            self.phase.setText(f"Gauges {FIRST}.")
        elif s.phase == "idle":
            self.phase.setText("idle")
        elif s.active and s.phase == "waiting":
            doing = f" · {s.preparing}" if s.preparing else ""
            self.phase.setText(f"waiting{doing} · {s.elapsed_s:.1f} s")
        elif s.active and s.phase == "prefill":  # the prompt's own count, not max tokens
            self.phase.setText(f"reading prompt · {s.elapsed_s:.1f} s · "
                               f"{prompt_words(s.kv_new, s.kv_new_total, s.prompt_tok_s)}")
        elif s.active:
            left = f" · ≤ {s.remaining_s:.0f} s to go" if s.remaining_s is not None else ""
            doing = "generating"
            if s.thinking:
                doing = "thinking" + (f" ({s.reasoning_tokens}/{s.think_budget} of its budget)"
                                      if s.think_budget is not None else "")
            self.phase.setText(f"{doing} · {s.elapsed_s:.1f} s · {s.generated}/{s.max_tokens} tok{left}"
                               f"{_answer(s)}")
        elif s.stats is not None:  # the footer's total, not a second clock's
            self.phase.setText(f"done in {s.stats.total()} · {s.generated} tok{_answer(s)}")
        else:
            self.phase.setText(f"done in {s.elapsed_s:.2f} s · {s.generated} tok")

    def _kv(self, s: Snapshot) -> None:
        self.kv_bar.set_values(s.kv_cached, s.kv_new, s.kv_generated, s.n_ctx)
        if not s.started:
            self.kv_text.setText(f"{s.n_ctx} tokens of context; the split {FIRST}" if s.n_ctx else FIRST)
            return
        used = s.kv_used
        pct = f" ({100 * used / s.n_ctx:.0f}%)" if s.n_ctx else ""
        self.kv_text.setText(
            f"{swatch(CACHED, _cached(s))} &nbsp; {swatch(NEW, f'new {s.kv_new}')} &nbsp; "
            f"{swatch(GENERATED, f'decoded {s.kv_generated}')}<br>{used}/{s.n_ctx} tokens{pct}{_thought(s)}"
            f"{self._tools_part(used)}")

    def _tools_part(self, used: int) -> str:
        """The prompt's share the tool definitions took, once a prompt held them."""
        t = self.tools_tokens
        return f" · tools {t:,} of them" if t and used >= t else ""


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
