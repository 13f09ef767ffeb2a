"""`llamadesk` with no command: the window on a qasync event loop.

qasync makes Qt's loop the asyncio loop, so future async code (the store,
downloads) can run beside the widgets. The engine does not use the loop's
executor: it has its own thread (see chat/engine_thread.py), which the window stops
*before* the loop closes; closing a qasync loop waits for executor jobs and
would hang on a reply still decoding (qasync issue 115).

Qt is imported inside run_window, after platform_check: a missing system
library (libxcb-cursor0, libEGL...) then reads as one line, not a core dump
or an ImportError traceback.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from app.ui import platform_check
from app.ui.qt_args import platform_env


def run_window(model: str | None = None, qt_args: list[str] | None = None) -> int:
    """`qt_args`: Qt's own options from the command line (-platform xcb, -style Fusion...)."""
    qt_args = qt_args or []
    problem = platform_check.check(platform_env(qt_args, os.environ))
    if problem:
        print(f"llamadesk: error: {problem}", file=sys.stderr)
        return 2
    import qasync
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from app.ui.window import MainWindow

    existing = QApplication.instance()
    argv0 = sys.argv[:1] or ["llamadesk"]
    app = existing if isinstance(existing, QApplication) else QApplication([*argv0, *qt_args])
    app.setApplicationName("LlamaDesk")
    app.setApplicationDisplayName("LlamaDesk")
    app.setDesktopFileName("llamadesk")  # ties the window to packaging/llamadesk.desktop
    icon = Path(__file__).resolve().parents[2] / "resources" / "llamadesk-256.png"
    if icon.is_file():  # present in a checkout and in the bundle
        app.setWindowIcon(QIcon(str(icon)))
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    done: asyncio.Future = loop.create_future()
    win = MainWindow(model=model)
    win.closed.connect(lambda: None if done.done() else done.set_result(0))
    # Ctrl+C in the terminal closes the window the normal way (stop, then quit).
    old_sigint = signal.signal(signal.SIGINT, lambda *_: win.close())
    tick = QTimer(interval=200)  # lets Python see the signal
    tick.timeout.connect(lambda: None)
    tick.start()
    win.resize(1200, 800)
    win.show()
    win.focus_composer()  # ready to type the moment the window appears
    try:
        with loop:
            return loop.run_until_complete(done)
    finally:
        tick.stop()
        win.shutdown()
        signal.signal(signal.SIGINT, old_sigint)
