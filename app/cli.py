"""The `llamadesk` command: the window by default, headless subcommands otherwise.

Each subcommand lives in app/commands/<name>.py with `add_parser(sub)` and
`run(args) -> int`. Every error a user can cause ends here as one line on
stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import select
import sys

from app import __version__, paths
from app.errors import LlamaDeskError
from app.ui.qt_args import split_qt_args

# Subcommand modules under app.commands, in the order `--help` lists them.
COMMANDS = ("ask", "models", "pull", "embed", "docs", "mcp", "bench", "batch", "serve", "compare", "list",
            "export", "import_")


class OneLineParser(argparse.ArgumentParser):
    """argparse's errors as every other LlamaDesk error: one line, exit 2.

    argparse prints the whole usage first; the line that says what was wrong
    is the one a user needs, and `--help` has the rest.
    """

    def error(self, message: str):
        # A command's prog is "llamadesk ask"; the top level's is the bare name the line starts with.
        where = "" if self.prog == "llamadesk" else f"{self.prog}: "
        self.exit(2, f"llamadesk: error: {where}{message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="llamadesk",
        description="Chat with local GGUF models. With no command, opens the window.",
    )
    p.add_argument("--version", action="version", version=f"llamadesk {__version__}")
    p.add_argument("--model", help="GGUF file to open in the window (default: bundled Gemma 3 270M)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        mod = importlib.import_module(f"app.commands.{name}")
        sp = mod.add_parser(sub)
        sp.set_defaults(_run=mod.run)
    return p


def _command_names(parser: argparse.ArgumentParser) -> set[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def setup_logging() -> None:
    """Log to a file under the user log dir; the terminal stays for the user."""
    try:
        handler = logging.FileHandler(paths.log_dir() / "llamadesk.log", encoding="utf-8")
    except OSError:
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("llamadesk")
    root.addHandler(handler)
    root.setLevel(logging.INFO)


def fail(message: str, code: int = 2) -> int:
    """2 for what the user must fix (arguments, files, configuration); 1 for what a
    remote server or the network did (a LlamaDeskError's exit_code says which)."""
    print(f"llamadesk: error: {message}", file=sys.stderr)
    return code


# Arguments that name files. A POSIX file name is bytes, and the surrogate
# escapes Python gives the undecodable ones turn back into the same bytes, so
# such a name is valid; in free text they would reach the model, the history
# or a JSON file as characters no encoder accepts.
PATH_ARGS = frozenset({"model", "draft_model", "paths", "file", "input", "output"})
TEXT_LABELS = {"prompt": "the prompt", "system": "the system prompt (--system)",
               "search": "the search text (--search)"}


def check_text_args(args: argparse.Namespace) -> None:
    """Refuse undecodable free text up front, before a model loads or the history is touched."""
    for dest, value in vars(args).items():
        if dest.startswith("_") or dest in PATH_ARGS:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and not _is_utf8(item):
                label = TEXT_LABELS.get(dest, f"the {dest.replace('_', ' ')} argument")
                raise ValueError(f"{label} is not valid UTF-8 text")


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _usable_streams() -> None:
    """Standard streams every command can write to without a codec error or a crash.

    Started with stdout or stderr closed (`>&-`), Python leaves it None; devnull
    stands in, as if the user had redirected it there, on the descriptor itself,
    so no file the command opens later (the history database) lands on fd 1 or
    2, where a stray write would corrupt it. Text no encoder takes (a
    PYTHONIOENCODING=ascii terminal) is shown escaped, as stderr already does;
    surrogateescape, Python's choice for some locales, is kept, as it writes
    undecodable file names back as their own bytes.
    """
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:
            devnull = os.open(os.devnull, os.O_WRONLY)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
            setattr(sys, name, open(fd, "w", encoding="utf-8", closefd=False))
    out = sys.stdout
    if getattr(out, "errors", None) == "strict" and hasattr(out, "reconfigure"):
        out.reconfigure(errors="backslashreplace")


def stdout_closed() -> bool:
    """True when nobody reads our stdout any more (`| head` exited)."""
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError):
        return True


def quiet_exit_on_closed_stdout() -> int:
    """What Python's docs advise for SIGPIPE: point stdout at devnull so the
    interpreter's own flush at exit does not fail again, and exit as a shell
    reports a process killed by SIGPIPE, without a word."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)
    return 128 + 13  # 128 + SIGPIPE


def main(argv: list[str] | None = None) -> int:
    _usable_streams()
    parser = build_parser()
    # Qt's own options (-platform xcb, -style Fusion) go to the window's QApplication.
    qt_args, argv = split_qt_args(sys.argv[1:] if argv is None else argv, _command_names(parser))
    try:
        args = parser.parse_args(argv)
    except SystemExit:  # --help, --version or a usage error: flush now, a closed pipe included
        with contextlib.suppress(BrokenPipeError):
            sys.stdout.flush()
        if stdout_closed():
            quiet_exit_on_closed_stdout()
        raise
    setup_logging()
    try:
        check_text_args(args)
        if getattr(args, "_run", None) is None:
            from app.ui.main import run_window  # Qt only when the window is wanted

            return run_window(model=args.model, qt_args=qt_args)
        if qt_args:
            return fail(f"{' '.join(qt_args)}: Qt's options are for the window, not for "
                        f"`llamadesk {args.command}`")
        rc = args._run(args)
        sys.stdout.flush()  # here, not at interpreter exit, so a closed pipe is handled below
        return rc
    except BrokenPipeError as e:
        if stdout_closed():
            return quiet_exit_on_closed_stdout()
        return fail(f"{e.filename}: the reader closed it" if e.filename else "the reader closed the pipe")
    except LlamaDeskError as e:
        return fail(str(e), getattr(e, "exit_code", 2))
    except OSError as e:  # "[Errno 13] Permission denied: 'x'" reads worse than "x: permission denied"
        if e.filename and e.strerror:
            return fail(f"{e.filename}: {e.strerror.lower()}")
        return fail(str(e))
    except ValueError as e:
        return fail(str(e))
    except KeyboardInterrupt:
        return 130
