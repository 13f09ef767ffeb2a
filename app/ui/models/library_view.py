"""What is on disk: the downloaded models with their sizes (Use this model, Delete), the other
models in the models folders (the bundled one, files put there by hand: Use this model), and
the partial downloads left by a pause, a crash or a closed window (Resume, Remove).

The first two together are what `llamadesk models` lists, found the same way: a library that
showed only Hub pulls said "none yet" beside the bundled model the chat was running. The
others have no Delete: the bundled model is assembled again on the next start, and a file the
user put there is theirs to remove.

A partial is allocated whole when its download starts, so it takes the file's full size on
disk however little arrived; it is listed with both figures, so nothing taking space goes
unseen. Delete asks twice on the same button (its text turns to "Delete? click again" for
a few seconds) instead of a modal dialog: a mis-click costs nothing, and the window stays
usable.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QPushButton, QTreeWidget, QTreeWidgetItem, QWidget

from app.engine.gguf import human_size
from app.engine.models import ModelInfo, default_model_path
from app.hub.library import Downloaded, Partial
from app.ui.models.worker import Listing

COLUMNS = ("Model", "Size", "")
CONFIRM_MS = 4000


def _buttons(*buttons: QPushButton) -> QWidget:
    w = QWidget()
    row = QHBoxLayout(w)
    row.setContentsMargins(0, 0, 0, 0)
    for b in buttons:
        row.addWidget(b)
    return w


class LibraryView(QTreeWidget):
    use_requested = Signal(str)  # a downloaded model's path
    delete_requested = Signal(object)  # Downloaded
    resume_requested = Signal(str)  # "org/name:file.gguf"
    remove_requested = Signal(object)  # Partial

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setColumnCount(len(COLUMNS))
        self.setHeaderLabels(COLUMNS)
        head = self.header()
        head.setStretchLastSection(False)
        head.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        head.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        head.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.models = QTreeWidgetItem(["Downloaded models", "", ""])
        self.others = QTreeWidgetItem(["Other models in the models folders", "", ""])
        self.others.setToolTip(0, "The bundled model and GGUF files put in a models folder, as "
                                  "`llamadesk models` lists them")
        self.partial = QTreeWidgetItem(["Partial downloads", "", ""])
        self.addTopLevelItems([self.models, self.others, self.partial])
        self.listing: Listing | None = None
        self.in_use: str | None = None  # the chat's model: not deleted from under it
        self.busy: set[str] = set()  # specs downloading now: their partial is not removed
        self.use_buttons: dict[str, QPushButton] = {}
        self.delete_buttons: dict[str, QPushButton] = {}

    def show_listing(self, listing: Listing) -> None:
        self.listing = listing
        for top in (self.models, self.others, self.partial):
            top.takeChildren()
        self.use_buttons, self.delete_buttons = {}, {}
        total = sum(d.size for d in listing.downloaded)
        self.models.setText(0, f"Downloaded models ({len(listing.downloaded)})")
        self.models.setText(1, human_size(total) if listing.downloaded else "")
        for d in listing.downloaded:
            self._model_row(d)
        if not listing.downloaded:
            QTreeWidgetItem(self.models, ["none yet: search the Hub above", "", ""])
        self.others.setText(0, f"Other models in the models folders ({len(listing.others)})")
        self.others.setText(1, human_size(sum(m.size for m in listing.others)) if listing.others else "")
        for m in listing.others:
            self._other_row(m)
        self.others.setHidden(not listing.others)
        self.partial.setText(0, f"Partial downloads ({len(listing.partials)})")
        held = sum(p.on_disk for p in listing.partials)
        self.partial.setText(1, f"{human_size(held)} on disk" if listing.partials else "")
        for p in listing.partials:
            self._partial_row(p)
        self.partial.setHidden(not listing.partials)
        for top in (self.models, self.others, self.partial):
            top.setExpanded(True)

    def _model_row(self, d: Downloaded) -> None:
        item = QTreeWidgetItem(self.models, [f"{d.repo} / {d.name}", human_size(d.size), ""])
        item.setToolTip(0, str(d.path))
        item.setTextAlignment(1, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        use = QPushButton("Use this model")
        use.setToolTip("Load it in the chat")
        use.clicked.connect(lambda _c=False, p=str(d.path): self.use_requested.emit(p))
        delete = QPushButton("Delete")
        delete.clicked.connect(lambda _c=False, d=d, b=delete: self._confirm(b, d))
        if self.in_use == str(d.path):
            use.setEnabled(False)
            use.setText("In use")
            delete.setEnabled(False)
            delete.setToolTip("The chat is using it: switch to another model first")
        self.setItemWidget(item, 2, _buttons(use, delete))
        self.use_buttons[str(d.path)] = use
        self.delete_buttons[str(d.path)] = delete

    def _other_row(self, m: ModelInfo) -> None:
        bundled = m.path == str(default_model_path().resolve())
        name = f"{m.file} (bundled default)" if bundled else m.file
        shown = f"{name}: unusable" if m.error else name
        item = QTreeWidgetItem(self.others, [shown, human_size(m.size), ""])
        item.setToolTip(0, m.path + (f"\n{m.error}" if m.error else ""))
        item.setTextAlignment(1, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        use = QPushButton("Use this model")
        use.setToolTip("Load it in the chat")
        use.clicked.connect(lambda _c=False, p=m.path: self.use_requested.emit(p))
        if m.error:
            use.setEnabled(False)
            use.setToolTip(m.error)
        elif self.in_use and str(Path(self.in_use).resolve()) == m.path:
            use.setEnabled(False)
            use.setText("In use")
        self.setItemWidget(item, 2, _buttons(use))
        self.use_buttons[m.path] = use

    def _partial_row(self, p: Partial) -> None:
        size = f"{human_size(p.done)} of {human_size(p.size)}" if p.size else "?"
        item = QTreeWidgetItem(self.partial, [f"{p.repo} / {p.name}", size, ""])
        item.setToolTip(0, f"{p.path}\n{human_size(p.on_disk)} on disk (allocated whole when it started)")
        spec = f"{p.repo}:{p.name}"
        resume = QPushButton("Resume")
        resume.clicked.connect(lambda _c=False, s=spec: self.resume_requested.emit(s))
        remove = QPushButton("Remove")
        remove.setToolTip(f"Delete it: {human_size(p.on_disk)} back")
        remove.clicked.connect(lambda _c=False, p=p: self.remove_requested.emit(p))
        running = spec in self.busy
        resume.setEnabled(not running and bool(p.size))
        remove.setEnabled(not running)
        self.setItemWidget(item, 2, _buttons(resume, remove))

    def _confirm(self, button: QPushButton, d: Downloaded) -> None:
        if button.property("armed"):
            button.setProperty("armed", False)
            button.setEnabled(False)
            self.delete_requested.emit(d)
            return
        button.setProperty("armed", True)
        button.setText("Delete? click again")
        QTimer.singleShot(CONFIRM_MS, lambda: self._disarm(button))

    @staticmethod
    def _disarm(button: QPushButton) -> None:
        try:
            button.setProperty("armed", False)
            button.setText("Delete")
        except RuntimeError:  # the listing was redrawn meanwhile and the button is gone
            pass

    def downloaded_paths(self) -> list[str]:
        return [str(d.path) for d in self.listing.downloaded] if self.listing else []

    def other_paths(self) -> list[str]:
        return [m.path for m in self.listing.others] if self.listing else []

    def partial_names(self) -> list[str]:
        return [p.name for p in self.listing.partials] if self.listing else []
