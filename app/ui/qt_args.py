"""Qt's own command-line options (`llamadesk -platform xcb`, `-style Fusion`), told apart from ours.

Qt documents options such as -platform, -style or -reverse that every Qt
program takes; argparse knew none of them and refused `-platform xcb` as an
unknown command. They are taken out before argparse sees the rest and handed
to the QApplication, which consumes them. Only those before a command are
Qt's: after `ask`, `-style` may be a prompt's text. No Qt import here: this
runs before the platform check decides whether Qt can start at all.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

# QGuiApplication's and QApplication's documented options, and whether each takes a value.
WITH_VALUE = frozenset({
    "platform", "platformpluginpath", "platformtheme", "plugin", "qmljsdebugger", "qwindowgeometry",
    "qwindowicon", "qwindowtitle", "session", "style", "stylesheet", "display", "geometry",
})
FLAGS = frozenset({"reverse", "widgetcount", "nograb", "dograb", "sync"})


def _name(arg: str) -> str | None:
    """'platform' for -platform or --platform (Qt takes both); None for anything else."""
    if not arg.startswith("-") or arg in ("-", "--"):
        return None
    name = arg[2:] if arg.startswith("--") else arg[1:]
    return name if name in WITH_VALUE or name in FLAGS else None


def split_qt_args(argv: list[str], commands: Collection[str],
                  ours_with_value: Collection[str] = ("--model",)) -> tuple[list[str], list[str]]:
    """(Qt's options, the rest), Qt's in their order with their values. Scanning ends at the
    first command, or at "--"; `ours_with_value` are our options whose value is skipped."""
    qt: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in commands or arg == "--":
            rest += argv[i:]
            break
        if arg in ours_with_value and i + 1 < len(argv):
            rest += argv[i:i + 2]
            i += 2
            continue
        name = _name(arg)
        if name in WITH_VALUE and i + 1 < len(argv):
            qt += argv[i:i + 2]
            i += 2
        elif name in FLAGS:
            qt.append(arg)
            i += 1
        else:
            rest.append(arg)
            i += 1
    return qt, rest


def platform_env(qt_args: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The environment as Qt will see the platform: -platform wins over QT_QPA_PLATFORM."""
    env = dict(environ)
    for i, arg in enumerate(qt_args[:-1]):
        if _name(arg) == "platform":
            env["QT_QPA_PLATFORM"] = qt_args[i + 1]
    return env
