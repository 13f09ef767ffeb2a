"""The live reply on screen: engine events recorded as they come, painted by the flow's timers.

Events arrive as queued signals and are only recorded here; the frame timer
(16 ms) appends the text received since the last frame, so a burst of tokens
costs one paint, never one per token, and the gauge timer (100 ms) refreshes
the gauges and the waiting line, so they move even while no event arrives.
ChatFlow (app.ui.chat.flow) is the one class that mixes this in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from app.engine.events import ReasoningDelta, TextDelta

if TYPE_CHECKING:
    from app.chat.live_gauges import LiveGauges
    from app.ui.chat.gauges import GaugesPanel
    from app.ui.chat.running import Running
    from app.ui.chat.view import ChatView


class LiveFrames:
    """ChatFlow's painting of the reply it runs; the attributes below are ChatFlow's."""

    _run: Running | None
    gauges: LiveGauges
    panel: GaugesPanel
    view: ChatView
    _streaming: Callable[[], bool]

    @property
    def busy(self) -> bool:
        raise NotImplementedError

    def _on_event(self, job_id: int, ev) -> None:
        run = self._run
        if run is None or job_id != run.job.id:
            return
        run.gauges.feed(ev, time.perf_counter())
        if isinstance(ev, TextDelta):
            run.thinking.feed_answer(ev.t)
            run.parts.append(ev.text)
        elif isinstance(ev, ReasoningDelta):
            run.thinking.feed_reasoning(ev.text, ev.t, ev.generated)

    def _paint_frame(self) -> None:
        run = self._run
        if run is None or not self.busy or not self._streaming():
            return
        think = run.thinking
        if think.started and not think.folded:
            if think.t_answer is None:
                line, new = think.clock(time.perf_counter()), think.unpainted()
                if new or line != think.line:  # a frame with nothing new paints nothing
                    self.view.live_think(line, new)
                    think.line = line
                return
            self.view.fold_thinking(think.folded_line())
            think.folded = True
        if run.painted < len(run.parts):
            opening = run.opening if run.painted == 0 else ""
            self.view.live_append(opening + "".join(run.parts[run.painted:]))
            run.painted = len(run.parts)

    def _waiting_line(self, elapsed: float) -> str:
        reading = self.gauges.prompt_progress()  # the prompt's own count while it is read
        if reading is not None:
            return f"reading the prompt… {elapsed:.1f} s · {reading}"
        if self.gauges.preparing:
            return f"{self.gauges.preparing}… {elapsed:.1f} s"
        if self._streaming():
            return f"waiting for the first token… {elapsed:.1f} s"
        return f"generating the full reply… {elapsed:.1f} s · {self.gauges.generated} tokens"

    def _refresh_gauges(self) -> None:
        snap = self.gauges.snapshot(time.perf_counter())
        self.panel.show_snapshot(snap)
        if self.busy and not (self._streaming() and self._run.parts):
            self.view.live_status(self._waiting_line(snap.elapsed_s))
