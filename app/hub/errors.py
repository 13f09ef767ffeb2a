"""The Hub's failures as one line each, split by who can fix them.

Exit code 2 for what the user must change (a repository or file that does not
exist, a licence not accepted, a full disk) and 1 for what the server or the
network did (a dropped connection, a 500, a file that arrived damaged twice),
the same split app.remote makes, so a script can tell "fix your command" from
"try again later".
"""

from __future__ import annotations

from app.errors import LlamaDeskError


class HubError(LlamaDeskError):
    """The Hub (or the mirror HF_ENDPOINT names) or the network failed: retrying may work."""

    exit_code = 1


class HubRequestError(HubError):
    """What was asked for cannot be had as asked: no such repository, revision or file, a
    gated repository without access, a bad token."""

    exit_code = 2


class Unreachable(HubError):
    """Nothing answered: the connection was refused or timed out. Another request to the same
    endpoint now would wait the same way, so a caller with several to make stops at the first."""


class DownloadStopped(HubError):
    """The transfer stopped before the end with the partial file kept for a later resume."""


class DiskSpaceError(HubError):
    """Not enough free space for the file, found before a byte was fetched, or on the way."""

    exit_code = 2


class UnsafeAnswer(HubError):
    """The Hub named a file, commit or sha256 that would be written outside its folder, or
    could not be written as named: refused before a byte is written, since only the server
    can mend it."""
