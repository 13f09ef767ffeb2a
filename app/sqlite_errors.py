"""SQLite's errors sorted by blame, for both stores: the history and the server's Batch API.

A busy, read-only, full, unreadable or damaged database is the machine's: one
line the user can act on (free space, close the other program, move the file
aside). Anything else (bad SQL, a broken constraint, a misused connection) is
a bug of ours; worded as the machine's, it would send the user to check a disk
that is fine, and hide the traceback a fix needs. The result code says which,
as qutebrowser's misc/sql.py sorts them.

Only the judgement and the bug's wording live here: each store keeps its own
error classes (the history's are FileProblems, the server's map to HTTP
answers), so this module needs nothing above the standard library.
"""

from __future__ import annotations

import logging
import sqlite3

# Primary result codes that blame the machine, not the code.
ENVIRONMENT_CODES = frozenset({
    sqlite3.SQLITE_PERM, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_NOMEM,
    sqlite3.SQLITE_READONLY, sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CORRUPT,
    sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOLFS,
    sqlite3.SQLITE_AUTH, sqlite3.SQLITE_NOTADB})


def is_bug(e: sqlite3.Error) -> bool:
    """True when LlamaDesk, not the machine, is to blame for `e`."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is None:  # raised by Python's sqlite3 itself: a closed or misused connection
        return isinstance(e, (sqlite3.ProgrammingError, sqlite3.InterfaceError))
    return (code & 0xFF) not in ENVIRONMENT_CODES  # the extended code's low byte is the primary one


def name(e: sqlite3.Error) -> str:
    """SQLite's name for the code (SQLITE_CONSTRAINT_TRIGGER...), else the exception's class."""
    return getattr(e, "sqlite_errorname", None) or type(e).__name__


def report_bug(log: logging.Logger, where: str, e: sqlite3.Error) -> str:
    """Log `e` with its traceback (the log file is where a bug report starts) and return the
    one line the user reads instead: `where` failed, and it is LlamaDesk's bug."""
    log.error("bug in %s (%s): %s", where, name(e), e, exc_info=e)
    return f"internal error in {where} ({name(e)}: {e}); this is a LlamaDesk bug"
