"""Remote failures, as one line naming the endpoint and the reason.

The CLI exits 1 for a remote failure (the server or the network let us down)
and 2 for a bad configuration (the user's URL or key), so scripts can tell
"try again later" from "fix your command".
"""

from __future__ import annotations

from app.errors import LlamaDeskError


class RemoteError(LlamaDeskError):
    """The server or the network failed: retrying later may work."""

    exit_code = 1

    def __init__(self, endpoint: str, reason: str):
        self.endpoint = endpoint
        self.reason = reason
        super().__init__(f"{endpoint}: {reason}")


class EndpointConfigError(LlamaDeskError):
    """The endpoint as configured cannot work (bad URL, missing key, unknown model)."""

    exit_code = 2
