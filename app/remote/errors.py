"""Remote failures, as one line naming the endpoint and the reason.

The CLI exits 1 for a remote failure (the server or the network let us down)
and 2 for a bad configuration (the user's URL or key), so scripts can tell
"try again later" from "fix your command".

A failure an option would cure (a key the server wants, one model of several
to pick) names that option. The option is said in the words of the front end
that met the failure: the command line's flags by default, through `explain`
another's (`llamadesk compare` takes them after each --endpoint; the window
has fields), so each says its own without a copy of the messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.errors import LlamaDeskError

# The options of `ask`, `batch`, `bench` and `embed` (app.commands.common.add_endpoint_args).
CLI_OPTIONS: Mapping[str, str] = {"api_key": "--api-key-env VAR", "model": "--remote-model NAME"}


@dataclass(frozen=True)
class Fix:
    """What would cure a failure: `do` ("give one with"), then the option, a key of CLI_OPTIONS."""

    do: str
    option: str

    def said(self, options: Mapping[str, str] | None = None) -> str:
        return f"{self.do} {(options or CLI_OPTIONS).get(self.option) or CLI_OPTIONS[self.option]}"


def _with(text: str, fix: Fix | None, options: Mapping[str, str] | None = None) -> str:
    return f"{text}; {fix.said(options)}" if fix is not None else text


class RemoteError(LlamaDeskError):
    """The server or the network failed: retrying later may work."""

    exit_code = 1

    def __init__(self, endpoint: str, reason: str, fix: Fix | None = None):
        self.endpoint = endpoint
        self.bare, self.fix = reason, fix
        self.reason = _with(reason, fix)
        super().__init__(f"{endpoint}: {self.reason}")

    def worded(self, options: Mapping[str, str]) -> str:
        return f"{self.endpoint}: {_with(self.bare, self.fix, options)}"


class EndpointConfigError(LlamaDeskError):
    """The endpoint as configured cannot work (bad URL, missing key, unknown model)."""

    exit_code = 2

    def __init__(self, message: str, fix: Fix | None = None):
        self.bare, self.fix = message, fix
        super().__init__(_with(message, fix))

    def worded(self, options: Mapping[str, str]) -> str:
        return _with(self.bare, self.fix, options)


def explain(e: BaseException, options: Mapping[str, str] | None = None) -> str:
    """The one line of `e`, its cure (if any) named in `options`' words (None: the command line's)."""
    worded = getattr(e, "worded", None)
    return worded(options) if worded is not None and options is not None else str(e)
