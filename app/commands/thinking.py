"""A thinking model's reasoning on the command line: the flags that ask for it, and its text on
stderr while it streams.

stdout is the answer alone, so a script that pipes `ask` gets what it got from a model that does
not think; the thinking is for the person watching, on stderr, dimmed where stderr is a terminal
(an escape code in a log file is noise) and gone with --hide-thinking.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields, replace

from app.engine.events import Finished, ReasoningDelta, TextDelta
from app.engine.sampling import GenerationSettings
from app.remote.reasoning import THINK_CHOICES

INT32_MAX = 2**31 - 1  # llama-server reads the budget as a C int
DIM, RESET = "\x1b[2m", "\x1b[0m"


def add_thinking_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("thinking (a model that reasons before it answers)")
    g.add_argument("--think", choices=THINK_CHOICES, default=None,
                   help="on or off, or an effort (low, medium, high) for a server that takes one "
                        "(default: as the model and server decide)")
    g.add_argument("--think-budget", type=int, default=None, metavar="N",
                   help="end the thinking after N tokens (0: answer at once), where the server can")
    g.add_argument("--hide-thinking", action="store_true",
                   help="do not print the thinking on stderr (--json still carries it)")


def check_thinking(args: argparse.Namespace) -> None:
    """A budget no server could take, refused in one line before anything opens."""
    n = getattr(args, "think_budget", None)
    if n is not None and not 0 <= n <= INT32_MAX:
        raise ValueError(f"--think-budget must be between 0 and {INT32_MAX} tokens, got {n}")


def with_thinking(settings: GenerationSettings, args: argparse.Namespace) -> GenerationSettings:
    """`settings` with --think and --think-budget. GenerationSettings gains `think` and
    `think_budget` in the engine's own change; until it has them, they ride on a copy as plain
    attributes, where the remote engine reads them by name all the same."""
    think, budget = getattr(args, "think", None), getattr(args, "think_budget", None)
    think = {"on": True, "off": False}.get(think, think)  # a level stays a word: "low", "medium", "high"
    if think is None and budget is None:
        return settings
    if {"think", "think_budget"} <= {f.name for f in fields(settings)}:
        return replace(settings, think=think, think_budget=budget)  # type: ignore[call-arg, unused-ignore]
    out = replace(settings)
    setattr(out, "think", think)  # noqa: B010 - not a field yet: see above
    setattr(out, "think_budget", budget)  # noqa: B010
    return out


class ThinkingPrinter:
    """Streams ReasoningDelta text to stderr, and closes it (reset, a line break) when the answer
    begins or the reply ends, so the answer on stdout starts on a terminal line of its own."""

    def __init__(self, stream=None, hide: bool = False):
        self.out = stream if stream is not None else sys.stderr
        self.hide = hide
        self.dim = _is_tty(self.out)
        self.open = False

    def __call__(self, ev) -> None:
        if isinstance(ev, ReasoningDelta):
            self.write(ev.text)
        elif isinstance(ev, (TextDelta, Finished)):
            self.close()

    def write(self, text: str) -> None:
        if self.hide or not text:
            return
        if not self.open:
            self.open = True
            if self.dim:
                self.out.write(DIM)
        self.out.write(text)
        self.out.flush()

    def close(self) -> None:
        if self.open:
            self.open = False
            self.out.write((RESET if self.dim else "") + "\n")
            self.out.flush()

    def whole(self, text: str) -> None:
        """A reply's thinking printed at once (--no-stream, or a reply with tools)."""
        self.write(text)
        self.close()


def _is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False
