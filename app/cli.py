"""The `llamadesk` command: the window by default, headless subcommands otherwise.

Each subcommand lives in app/commands/<name>.py with `add_parser(sub)` and
`run(args) -> int`. Every error a user can cause ends here as one line on
stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from app import __version__, paths
from app.errors import LlamaDeskError

# Subcommand modules under app.commands, in the order `--help` lists them.
COMMANDS = ("ask", "models", "bench", "batch", "list", "export", "import_")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
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


def fail(message: str) -> int:
    print(f"llamadesk: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    try:
        if getattr(args, "_run", None) is None:
            from app.ui.main import run_window  # Qt only when the window is wanted

            return run_window(model=args.model)
        return args._run(args)
    except LlamaDeskError as e:
        return fail(str(e))
    except OSError as e:  # "[Errno 13] Permission denied: 'x'" reads worse than "x: permission denied"
        if e.filename and e.strerror:
            return fail(f"{e.filename}: {e.strerror.lower()}")
        return fail(str(e))
    except ValueError as e:
        return fail(str(e))
    except KeyboardInterrupt:
        return 130
