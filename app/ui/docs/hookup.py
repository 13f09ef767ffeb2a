"""Documents wired into the main window: the menu, drops, the model's token count, sources opened.

Kept out of window.py, which many parts share, as the Models window's hookup is:
the window makes this once and calls shutdown() when it closes.

A folder dropped on the chat is indexed as a collection (named after the
folder) and chosen for the conversation shown at once, so its next questions
search it as far as it is indexed; the Collections window shows the progress
and has Cancel. Files dropped or picked become chips (app.ui.chat.composer).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QMainWindow

from app.docs.index import DocsIndex
from app.engine.message import Source
from app.ui.docs.chooser import DocsChooser
from app.ui.docs.passage import PassageDialog
from app.ui.docs.turns import PromptMeasure
from app.ui.docs.window import CollectionsWindow
from app.ui.widgets.message_bar import MessageBar


def token_counter(loaded) -> Callable[[str], int] | None:
    """Counts text in the loaded model's vocabulary, as the prompt will be counted (None: a server,
    whose tokenizer is not here: the chips estimate). The vocabulary is read-only and shared; no
    llama context is touched, so this runs on the GUI thread beside the engine's."""
    model = getattr(loaded, "model", None)
    if model is None:
        return None
    llm = model.llm
    return lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))


class DocsHookup(QObject):
    def __init__(self, window: QMainWindow, flow, composer, view, chooser: DocsChooser, bar: MessageBar,
                 index_path: Path | None = None) -> None:
        """`flow`, `composer` and `view`: the window's ChatFlow, Composer and ChatView (app.ui.chat,
        which imports this package's parts: named here only by what they do, so the two packages
        do not import each other)."""
        super().__init__(window)
        self.main, self.flow, self.composer, self.view = window, flow, composer, view
        self.chooser, self.bar, self.index_path = chooser, bar, index_path
        self.collections: CollectionsWindow | None = None  # made on first use
        self.dialog: PassageDialog | None = None  # the passage shown last (tests)
        menu = window.menuBar().addMenu("&Documents")
        self.attach_action = menu.addAction("Attach files…")
        self.attach_action.setShortcut(QKeySequence("Ctrl+Shift+A"))
        self.attach_action.triggered.connect(composer.choose_files)
        self.collections_action = menu.addAction("Collections…")
        self.collections_action.setToolTip("Index folders once, for any conversation to search")
        self.collections_action.triggered.connect(self.open_collections)
        chooser.manage.connect(self.open_collections)
        composer.attach_failed.connect(lambda line: bar.show_message(line, "warning"))
        composer.folder_dropped.connect(self.index_for_chat)
        view.files_dropped.connect(composer.attach_paths)
        view.source_clicked.connect(self.open_source)

    def use_model(self, loaded) -> None:
        """A model (or server) loaded: its tokenizer counts the chips from now on."""
        self.composer.counter = token_counter(loaded)
        self.composer.recount()
        self.flow.count_tokens = self.composer.counter
        model = getattr(loaded, "model", None)
        self.flow.measure = PromptMeasure(model, loaded.n_ctx) if model is not None else None

    def open_collections(self) -> CollectionsWindow:
        if self.collections is None:
            self.collections = CollectionsWindow(self.index_path, self.main)
        else:
            self.collections.refresh()
        self.collections.show()
        self.collections.raise_()
        return self.collections

    def index_for_chat(self, folder: str) -> None:
        """A dropped folder: indexed as a collection, and chosen for the conversation shown."""
        win = self.open_collections()
        job = win.add_folder(folder, Path(folder).name)
        if job is None:
            self.bar.show_message(win.status.text(), "warning")
            return
        if job.name not in self.chooser.names:
            self.chooser.choose([*self.chooser.names, job.name])
        self.bar.show_message(f"Indexing «{job.name}» as a collection: this conversation searches it "
                              "(Documents > Collections shows the progress).", "info")

    def text_of(self, source: Source) -> str | None:
        """The document's whole text a source points into: a collection's from its index, an
        attachment's from the history store (or from this session, when the chat is not saved)."""
        if source.collection is not None:
            try:
                with DocsIndex.open(self.index_path) as index:
                    return index.text(source.sha256)
            except Exception:  # noqa: BLE001 - the dialog says the text is not there
                return None
        return self.flow.document_text(source.sha256)

    def open_source(self, source: Source) -> PassageDialog:
        if self.dialog is not None:
            self.dialog.close()
        self.dialog = PassageDialog(source, self.text_of(source), self.main)
        self.dialog.show()
        return self.dialog

    def shutdown(self) -> None:
        self.composer.shutdown()
        if self.collections is not None:
            self.collections.shutdown()
