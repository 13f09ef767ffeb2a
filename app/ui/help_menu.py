"""The Help menu: About, the keyboard shortcuts, the README, and where LlamaDesk keeps its files.

About says what a bug report needs and a user otherwise has to dig for: the
LlamaDesk version, llama-cpp-python's and llama.cpp's, what this llama.cpp
build can run on and what the loaded model does run on.

The shortcuts are read from the window when the dialog opens (its QActions'
shortcuts and its QShortcuts), never kept in a list of their own here, so a
shortcut added elsewhere is listed and one removed is not. A QShortcut has no
text, so it is named by its whatsThis, or else by the tooltip of the control
that names the same keys ("Start a new conversation (Ctrl+N)"), or is listed
by its keys alone.

"Where my data lives" names the folders app.paths resolves (the settings, the
history and saved data, the models, the caches), each with a button that
opens it in the file manager: the answer to "how do I back up / reset /
free space" without reading the source.
"""

from __future__ import annotations

import html
import importlib.metadata
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QUrl
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHeaderView,
    QLabel,
    QMainWindow,
    QMenu,
    QPushButton,
    QTextBrowser,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

import app
from app import paths
from app.ui.chat.engine_thread import Loaded

README = Path(app.__file__).resolve().parent.parent / "README.md"  # present when run from source


@dataclass(frozen=True)
class Shortcut:
    keys: str  # as the platform writes them
    what: str


@dataclass(frozen=True)
class Folder:
    title: str
    path: Path
    holds: str


def _keys(seq: QKeySequence) -> str:
    return seq.toString(QKeySequence.SequenceFormat.NativeText)


def _action_name(a: QAction) -> str:
    return a.text().replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…").strip()


def _named_by_tooltip(window: QWidget, seq: QKeySequence) -> str:
    """The tooltip of a control in `window` that cites `seq` in parentheses, without them."""
    cited = f"({seq.toString(QKeySequence.SequenceFormat.PortableText)})"
    for w in window.findChildren(QWidget):
        tip = w.toolTip().split("\n")[0]
        if cited in tip and w.window() is window:
            return tip.replace(cited, "").strip().rstrip(".").strip()
    return ""


def window_shortcuts(window: QWidget) -> list[Shortcut]:
    """Every shortcut `window` defines, in the order they were made: its actions' (menus
    included) and its QShortcuts', not those of the windows it opened."""
    out: list[Shortcut] = []
    seen: set[str] = set()
    found: list[QAction | QShortcut] = [*window.findChildren(QAction), *window.findChildren(QShortcut)]
    for obj in found:
        if not _belongs(obj, window):
            continue
        if isinstance(obj, QAction):
            seqs, what = obj.shortcuts(), _action_name(obj)
        else:
            seqs = obj.keys()
            what = obj.whatsThis() or next((t for t in (_named_by_tooltip(window, s) for s in seqs) if t), "")
        for seq in seqs:
            keys = _keys(seq)
            if keys and keys not in seen:
                seen.add(keys)
                out.append(Shortcut(keys, what or "(no description)"))
    return out


def _belongs(obj: QObject, window: QWidget) -> bool:
    """Whether `obj` is `window`'s own: under it, and not under another window it opened (a
    menu is a window to Qt, but its actions are the window's)."""
    w = obj.parent()
    while w is not None and w is not window:
        if isinstance(w, QWidget) and w.isWindow() and not isinstance(w, QMenu):
            return False
        w = w.parent()
    return w is window


def open_url(url: QUrl) -> bool:
    """The desktop's own opener: the file manager for a folder, the browser for a page."""
    return QDesktopServices.openUrl(url)


def data_folders() -> list[Folder]:
    return [
        Folder("Settings", paths.config_dir(), "settings.json: the settings, the saved servers"),
        Folder("Data", paths.data_dir(), "the conversation history, saved comparisons"),
        Folder("Models", paths.user_models_dir(create=False), "the bundled model and downloaded ones"),
        Folder("Cache", paths.cache_dir(), "the prompt cache and measurements: safe to delete"),
    ]


def readme_url() -> QUrl | None:
    """The README as a file when run from source, else the project's page if it names one."""
    if README.is_file():
        return QUrl.fromLocalFile(str(README))
    try:
        urls = importlib.metadata.metadata("llamadesk").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in urls:
        _label, _, url = entry.partition(",")
        if url.strip():
            return QUrl(url.strip())
    return None


def about_html(loaded: Loaded | None) -> str:
    import llama_cpp

    from app.engine import backend

    try:
        llama_cpp_build = llama_cpp.llama_version().decode("utf-8", "replace")
    except (AttributeError, OSError):  # an older binding without it
        llama_cpp_build = "?"
    devices = ", ".join(f"{d.kind} {d.description or d.name}" for d in backend.devices()) or "none reported"
    runs = loaded.report.runs_on if loaded is not None else "no model loaded yet"
    rows = (("LlamaDesk", app.__version__),
            ("llama-cpp-python", llama_cpp.__version__),
            ("llama.cpp", llama_cpp_build),
            ("This build offloads to", backend.compiled_gpu_backend() or "no GPU backend (CPU only)"),
            ("Devices", devices),
            ("The chat runs on", runs))
    cells = "".join(f"<tr><td><b>{html.escape(k)}</b>&nbsp;&nbsp;</td><td>{html.escape(v)}</td></tr>"
                    for k, v in rows)
    return ("<h3>LlamaDesk</h3><p>A desktop chat app for local GGUF models, on llama.cpp, with live "
            f"gauges of what the decoder does.</p><table>{cells}</table>")


class AboutDialog(QDialog):
    def __init__(self, loaded: Loaded | None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("About LlamaDesk")
        self.text = QLabel(about_html(loaded))
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        col = QVBoxLayout(self)
        col.addWidget(self.text)
        col.addWidget(buttons)

    def plain(self) -> str:
        return re.sub(r"<[^>]+>", " ", self.text.text()).replace("&nbsp;", " ")


class ShortcutsDialog(QDialog):
    def __init__(self, shortcuts: list[Shortcut], parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts — LlamaDesk")
        self.table = QTreeWidget()
        self.table.setRootIsDecorated(False)
        self.table.setHeaderLabels(("Keys", "Does"))
        self.table.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        for s in shortcuts:
            QTreeWidgetItem(self.table, [s.keys, s.what])
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        col = QVBoxLayout(self)
        col.addWidget(self.table)
        col.addWidget(buttons)
        self.resize(460, 360)

    def rows(self) -> list[tuple[str, str]]:
        return [(self.table.topLevelItem(i).text(0), self.table.topLevelItem(i).text(1))
                for i in range(self.table.topLevelItemCount())]


class FoldersDialog(QDialog):
    def __init__(self, folders: list[Folder], opener: Callable[[QUrl], object],
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Where my data lives — LlamaDesk")
        grid = QGridLayout()
        self.open_buttons: dict[str, QPushButton] = {}
        for row, f in enumerate(folders):
            title = QLabel(f"<b>{html.escape(f.title)}</b>")
            where = QLabel(f"{html.escape(str(f.path))}<br><small>{html.escape(f.holds)}</small>")
            where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            button = QPushButton("Open")
            if f.path.is_dir():
                button.setToolTip(f"Open {f.path} in the file manager")
                button.clicked.connect(lambda _c=False, p=f.path: opener(QUrl.fromLocalFile(str(p))))
            else:
                button.setEnabled(False)
                button.setToolTip("Not created yet: LlamaDesk makes it when it first writes there")
            grid.addWidget(title, row, 0, Qt.AlignmentFlag.AlignTop)
            grid.addWidget(where, row, 1)
            grid.addWidget(button, row, 2, Qt.AlignmentFlag.AlignTop)
            self.open_buttons[f.title] = button
        grid.setColumnStretch(1, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        col = QVBoxLayout(self)
        col.addLayout(grid)
        col.addWidget(buttons)


class ReadmeDialog(QDialog):
    """The README as installed with the package, where no file or page is at hand."""

    def __init__(self, text: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("README — LlamaDesk")
        view = QTextBrowser()
        view.setOpenExternalLinks(True)
        view.setMarkdown(text)
        col = QVBoxLayout(self)
        col.addWidget(view)
        self.resize(760, 600)


class HelpMenu:
    """The window's Help menu; `loaded()` is the window's loaded model (None: none yet)."""

    def __init__(self, window: QMainWindow, loaded: Callable[[], Loaded | None]) -> None:
        self.window, self.loaded = window, loaded
        self.dialog: QDialog | None = None  # the one open last (tests look at it)
        menu = window.menuBar().addMenu("&Help")
        self.menu = menu
        self.shortcuts_action = menu.addAction("&Keyboard shortcuts")
        self.shortcuts_action.setShortcut(QKeySequence(QKeySequence.StandardKey.HelpContents))
        self.shortcuts_action.triggered.connect(self.show_shortcuts)
        self.readme_action = menu.addAction("&README")
        self.readme_action.setToolTip("How LlamaDesk works, every feature and command")
        self.readme_action.triggered.connect(self.show_readme)
        self.folders_action = menu.addAction("&Where my data lives")
        self.folders_action.triggered.connect(self.show_folders)
        menu.addSeparator()
        self.about_action = menu.addAction("&About LlamaDesk")
        self.about_action.setMenuRole(QAction.MenuRole.AboutRole)
        self.about_action.triggered.connect(self.show_about)
        menu.setToolTipsVisible(True)

    def _open(self, dlg: QDialog) -> QDialog:
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.dialog = dlg
        dlg.open()
        return dlg

    def show_about(self) -> QDialog:
        return self._open(AboutDialog(self.loaded(), self.window))

    def show_shortcuts(self) -> QDialog:
        return self._open(ShortcutsDialog(window_shortcuts(self.window), self.window))

    def show_folders(self) -> QDialog:
        return self._open(FoldersDialog(data_folders(), open_url, self.window))

    def show_readme(self) -> QDialog | None:
        url = readme_url()
        if url is not None:
            open_url(url)
            return None
        try:
            text = str(importlib.metadata.metadata("llamadesk").json.get("description", ""))
        except importlib.metadata.PackageNotFoundError:
            text = ""
        return self._open(ReadmeDialog(text or "The README is not installed with this copy.", self.window))
