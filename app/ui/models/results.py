"""A search's answer as a tree: each repository, under it each GGUF with its quantization,
size, fit (with the numbers) and a Download button.

Files come smallest first, as `models search` prints them; vision projectors and imatrix
files are already left out by app.hub.search. A gated repository says so on its own row
and its files' fit stays "?": the header cannot be read without access.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPalette
from PySide6.QtWidgets import QHeaderView, QPushButton, QTreeWidget, QTreeWidgetItem

from app.engine.gguf import human_size
from app.ui.models.labels import fit_colour, fit_text, fit_tooltip
from app.ui.models.worker import Found

COLUMNS = ("Repository / file", "Quant", "Size", "Fit here", "")
NAME, QUANT, SIZE, FIT, ACTION = range(len(COLUMNS))


class ResultsView(QTreeWidget):
    download_requested = Signal(str)  # "org/name:file.gguf"

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setColumnCount(len(COLUMNS))
        self.setHeaderLabels(COLUMNS)
        self.setRootIsDecorated(True)
        self.setAlternatingRowColors(True)
        head = self.header()
        head.setStretchLastSection(False)
        head.setSectionResizeMode(NAME, QHeaderView.ResizeMode.Stretch)
        for col in (QUANT, SIZE, FIT, ACTION):
            head.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.buttons: dict[str, QPushButton] = {}  # spec -> its Download button
        self._split: set[str] = set()
        self._enabled = True
        self.found: Found | None = None

    def changeEvent(self, ev) -> None:
        super().changeEvent(ev)
        if ev.type() == ev.Type.PaletteChange and self.found is not None:
            self.show_found(self.found)  # the fit colours are the palette's

    def show_found(self, found: Found) -> None:
        self.found = found
        self.clear()
        self.buttons, self._split = {}, set()
        tip = fit_tooltip(found.n_ctx)
        for r in found.repos:
            top = QTreeWidgetItem([r.repo, "", "", "", ""])
            bits = [f"{r.downloads:,} downloads" if r.downloads is not None else ""]
            if r.gated:
                bits.append("gated: needs HF_TOKEN and the licence accepted")
            if r.note and not r.gated:
                bits.append(r.note)
            top.setText(FIT, " · ".join(b for b in bits if b))
            top.setToolTip(NAME, r.repo)
            top.setToolTip(FIT, top.text(FIT))
            font = top.font(NAME)
            font.setBold(True)
            top.setFont(NAME, font)
            self.addTopLevelItem(top)
            for f in r.files:
                self._file_row(top, r.repo, f, found, tip)
            top.setExpanded(True)
            if not r.files:
                QTreeWidgetItem(top, ["no GGUF model files", "", "", "", ""])

    def _file_row(self, top: QTreeWidgetItem, repo: str, f, found: Found, tip: str) -> None:
        parts = f" ({f.parts} files)" if f.parts > 1 else ""
        fit = fit_text(f.fit, f.needs, found.ram_free)
        item = QTreeWidgetItem(top, [f.name + parts, f.quant, human_size(f.size), fit, ""])
        item.setTextAlignment(SIZE, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        item.setToolTip(FIT, tip)
        item.setData(FIT, Qt.ItemDataRole.UserRole, f.fit)
        colour = fit_colour(f.fit, dark=self.palette().color(QPalette.ColorRole.Base).lightness() < 128)
        if colour:
            item.setForeground(FIT, QBrush(QColor(colour)))
        spec = f"{repo}:{f.name}"
        button = QPushButton("Download")
        button.setToolTip(f"Download {f.name} ({human_size(f.size)}), checked against the Hub's sha256")
        button.clicked.connect(lambda _c=False, s=spec: self.download_requested.emit(s))
        button.setEnabled(self._enabled and f.parts == 1)
        if f.parts > 1:
            self._split.add(spec)
            button.setToolTip("split GGUFs cannot be downloaded yet")
        self.setItemWidget(item, ACTION, button)
        self.buttons[spec] = button

    def set_downloads_enabled(self, on: bool) -> None:
        """One download at a time: the buttons wait while one runs or is paused."""
        self._enabled = on
        for spec, b in self.buttons.items():
            b.setEnabled(on and spec not in self._split)

    def rows(self) -> list[tuple[str, str, str, str, str]]:
        """(repository, file, quant, size, fit) of every file row, as shown."""
        out = []
        for i in range(self.topLevelItemCount()):
            top = self.topLevelItem(i)
            for j in range(top.childCount()):
                c = top.child(j)
                out.append((top.text(NAME), c.text(NAME), c.text(QUANT), c.text(SIZE), c.text(FIT)))
        return out
