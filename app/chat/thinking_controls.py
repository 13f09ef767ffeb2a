"""What a loaded model lets the user choose about its thinking, read once where it loads.

A plain value, so the window's chooser can show the right choices without touching the
engine (its template is rendered on the engine's thread, never the GUI's): whether the
template has an on/off switch, its effort levels, and whether it thinks by default.
"""

from __future__ import annotations

from dataclasses import dataclass

BUDGETS = (256, 1024, 4096)  # the chooser's thinking budgets, in tokens (None: no budget)


@dataclass(frozen=True)
class ThinkingControls:
    format: str  # app.engine.reasoning_formats' name ("think-tags", "harmony", ...)
    switch: bool  # the template has enable_thinking (or the like) and it changes the prompt
    efforts: tuple[str, ...]  # its effort levels ("low", "medium", "high"), or none
    default_on: bool  # it thinks unless told otherwise

    @classmethod
    def of(cls, engine) -> ThinkingControls | None:
        """The engine's thinking template's controls (None: its replies are plain text, or the
        engine is a server's, which renders its own template)."""
        t = getattr(engine, "thinking", None)
        if t is None:
            return None
        return cls(t.format.name, bool(t.switch), tuple(t.efforts), bool(t.default_on()))
