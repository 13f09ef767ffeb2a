"""The main window: assembles the parts and owns the settings, the store and the threads.

Collaborators are made here and handed to the parts through their
constructors: the history store and its TurnRecorder to the chat flow, the
batch runner to the engine bridge (as its chat router) and to the Batch window,
and to Connections, the Serve switch and the history actions the objects and
callbacks each uses, never the window itself.

Construction never blocks: the model loads on the engine thread, so the window
is on screen (and the user can type) while llama.cpp maps the file.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QStatusBar,
    QVBoxLayout,
    QWidget,
)

from app.chat.engines import EngineTarget
from app.chat.presets import PresetStore
from app.chat.recorder import TurnRecorder
from app.config import AppConfig, SavedEndpoint, read_config, save_config
from app.ui import gc_pauses, theme
from app.ui.batch.panel import BatchPanel
from app.ui.batch.worker import BatchRunner, BatchTarget
from app.ui.chat.actions_row import ActionsRow
from app.ui.chat.approval_box import ApprovalBox
from app.ui.chat.composer import Composer
from app.ui.chat.engine_thread import EngineBridge, Loaded
from app.ui.chat.flow import ChatFlow
from app.ui.chat.gauges import GaugesPanel, MachineFeed
from app.ui.chat.mcp_runner import McpRunner
from app.ui.chat.presets_menu import PresetsMenu
from app.ui.chat.reply_format import ReplyFormatChooser, follow_conversations
from app.ui.chat.setup_row import SetupRow
from app.ui.chat.thinking_chooser import ThinkingChooser, follow_thinking
from app.ui.chat.tool_result_box import ToolResultBox
from app.ui.chat.tools_chooser import ToolsChooser, follow_tools
from app.ui.chat.view import ChatView
from app.ui.chat.welcome import ChatArea
from app.ui.compare.window import CompareWindow, compare_choices
from app.ui.docs.chooser import DocsChooser, follow_docs
from app.ui.docs.hookup import DocsHookup
from app.ui.help_menu import HelpMenu
from app.ui.history.actions import HistoryActions, open_store
from app.ui.history.branches import BranchActions
from app.ui.history.panel import HistoryPanel
from app.ui.load_notes import LoadNotes
from app.ui.model_bar import ModelBar
from app.ui.models.hookup import ModelsHookup
from app.ui.remote.connections import Connections
from app.ui.server.panel import ServerPanel
from app.ui.server.runner import ServerRunner
from app.ui.server.switch import ServeSwitch
from app.ui.settings.dialog import SettingsDialog
from app.ui.settings.mcp_page import loaded_counter
from app.ui.widgets import tooltips
from app.ui.widgets.message_bar import MessageBar

log = logging.getLogger("llamadesk.ui")


class MainWindow(QMainWindow):
    model_loaded = Signal(object)  # Loaded
    model_failed = Signal(str)
    closed = Signal()

    def __init__(self, model: str | None = None, config: AppConfig | None = None,
                 config_path: Path | None = None, persist: bool = True, autoload: bool = True,
                 history: bool = True):
        super().__init__()
        self.setWindowTitle("LlamaDesk")
        self.config_path = config_path
        self.persist = persist
        self._startup_notes: list[str] = []  # shown together once the message bar exists
        if config is None:
            got = read_config(config_path)
            config = got.config
            if got.message():
                self._startup_notes.append(got.message())
        self.config = config
        theme.apply(config.theme)
        tooltips.install()  # long explanations wrap instead of running 1,300 px wide
        self.model_path: str | None = model if model is not None else self.config.model_path
        self._closing = False
        self.loaded: Loaded | None = None  # the loaded model: report, identity, weights handle
        self.batch_runner = BatchRunner(self)
        self.bridge = EngineBridge(router=self.batch_runner, parent=self)
        self.server_runner = ServerRunner(self)
        self.bridge.add_router(self.server_runner)
        self.serve = ServeSwitch(self.server_runner, lambda: self.config, self._save, self._ready_model,
                                 lambda: self.remote is not None, parent=self)
        self.model_bar = ModelBar()
        self.connections = Connections(lambda: self.config, self._save, self.bridge, self.model_bar,
                                       load_model=self.load_model, refresh_models=self._refresh_models,
                                       load_failed=self._on_load_failed, parent=self)
        self.connections.remote = None if model is not None else self.connections.active()
        self.bar = MessageBar()
        self.models = ModelsHookup(self, config=lambda: self.config, save=self._save,
                                   load_model=self.load_model, refresh_models=self._refresh_models,
                                   bar=self.bar, open_file=self.model_bar.open_button.click,
                                   current_model=lambda: None if self.remote else self.model_path,
                                   connect_server=self.connections.open_dialog)
        self.load_notes = LoadNotes(self.bar, *self.models.notice_memory())
        self.view = ChatView()
        self.composer = Composer()
        self.gauges = GaugesPanel()
        self.machine = MachineFeed(self.gauges, self)
        self.system_prompt = QLineEdit()
        self.system_prompt.setPlaceholderText("System prompt for this conversation (optional)")
        self.system_prompt.textChanged.connect(self._on_system_prompt)
        self.reply_format = ReplyFormatChooser()
        self.tools = ToolsChooser()
        self.thinking = ThinkingChooser()
        self.docs = DocsChooser()
        self.tool_result = ToolResultBox()
        self.approval = ApprovalBox()  # an MCP call put to the user, where a declared tool's result is asked
        self.actions_row = ActionsRow()
        a = self.actions_row
        self.new_button, self.regen_button, self.edit_button = a.new_button, a.regen_button, a.edit_button
        self.batch_button, self.compare_button, self.serve_button = (a.batch_button, a.compare_button,
                                                                     a.serve_button)
        self.compare_window: CompareWindow | None = None
        self.batch_panel: BatchPanel | None = None  # created on first use
        self.store = open_store(self._startup_notes) if history else None
        self.recorder = None
        if self.store is not None:
            self.recorder = TurnRecorder(self.store, on_error=lambda m: self.bar.show_message(m, "warning"))
        self.flow = ChatFlow(self.bridge, self.view, self.composer, self.gauges, self.bar,
                             settings=lambda: self.config.generation(),
                             streaming=lambda: self.config.streaming, recorder=self.recorder, parent=self)
        self.presets = PresetsMenu(PresetStore.beside(config_path), self.flow, self.system_prompt,
                                   self.reply_format, self.tools, self.bar, config=lambda: self.config,
                                   apply_settings=self.apply_settings, new_chat=self.new_chat, parent=self)
        self.history_panel = HistoryPanel(self.store)
        self._build_layout()
        self._wire()
        self.history = HistoryActions(lambda: self.store, self.history_panel, self.flow, self.view, self.bar,
                                      new_chat=self.new_chat, parent=self,
                                      status=lambda text, ms: self.statusBar().showMessage(text, ms))
        self.history.opened.connect(self._on_conversation_opened)
        self.branches = BranchActions(lambda: self.store, self.flow, self.history, self.bar, self,
                                      parent=self)
        self.documents = DocsHookup(self, self.flow, self.composer, self.view, self.docs, self.bar)
        follow_docs(self.docs, self.flow)
        self.composer.add_tool(self.docs)  # by the paperclip: the row above has no room at 900 px
        self.model_loaded.connect(self.documents.use_model)
        self.mcp = McpRunner(self)  # the window's MCP servers, started by the conversations that use them
        if self.mcp.problem:
            self._startup_notes.append(self.mcp.problem)
        self.flow.use_mcp(self.mcp, self.approval)
        self.tools.set_mcp(self.mcp)  # the Tools menu's servers show their status
        self.model_loaded.connect(lambda _info: self.flow.refresh_tools_cost())  # after the tokenizer's set
        self.tools.chosen.connect(lambda _tools: self.flow.refresh_tools_cost())
        self.help_menu = HelpMenu(self, lambda: self.loaded)  # the last menu: Help goes at the end
        if self._startup_notes:
            self.bar.show_message("  ·  ".join(self._startup_notes), "warning")
        self.model_bar.streaming.setChecked(self.config.streaming)
        self._update_actions()
        self.resize(1200, 800)  # as `llamadesk` opens it (app/ui/main.py)
        self.setMinimumSize(900, 600)
        if autoload:
            self.models.offer_first_launch(self.chat_column, self.model_path is None and not self.remote)
            self._refresh_models()
            self.load_model(self.remote or self.model_path)

    def _build_layout(self) -> None:
        self.setup_row = SetupRow(self.system_prompt, [self.reply_format, self.tools, self.thinking,
                                                       self.presets])
        chat = QWidget()
        col = QVBoxLayout(chat)
        col.setContentsMargins(0, 0, 0, 0)
        col.addWidget(self.setup_row)
        self.chat_column = col  # the first-launch panel goes on top of it
        self.chat_area = ChatArea(self.view)  # the welcome while the conversation is empty
        col.addWidget(self.chat_area, 1)
        col.addWidget(self.actions_row)
        col.addWidget(self.tool_result)
        col.addWidget(self.approval)
        col.addWidget(self.composer)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.history_panel)
        split.addWidget(chat)
        split.addWidget(self.gauges)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setStretchFactor(2, 0)
        split.setCollapsible(1, False)
        split.setSizes([210, 600, 290])
        central = QWidget()
        root = QVBoxLayout(central)
        root.setContentsMargins(8, 8, 8, 0)  # the status bar below is the bottom margin
        root.addWidget(self.model_bar)
        root.addWidget(self.bar)
        root.addWidget(split, 1)
        self.setCentralWidget(central)
        # Made now rather than by the first message shown in it: made then, it took its height
        # from everything above it, and a button moved from under the pointer.
        self.setStatusBar(QStatusBar())

    def _wire(self) -> None:
        self.bridge.loaded.connect(self._on_loaded)
        self.bridge.load_failed.connect(self._on_load_failed)
        self.bridge.load_progress.connect(self.model_bar.set_assembly_progress)
        self.model_bar.model_chosen.connect(self.load_model)
        self.model_bar.settings_clicked.connect(self.open_settings)
        self.model_bar.connect_clicked.connect(self.connections.open_dialog)
        self.model_bar.streaming.toggled.connect(self.set_streaming)
        self.new_button.clicked.connect(self.new_chat)
        self.regen_button.clicked.connect(self.flow.regenerate)
        self.edit_button.clicked.connect(self.flow.edit_last)
        self.batch_button.clicked.connect(self.open_batch)
        self.serve_button.clicked.connect(self.open_server)
        self.compare_button.clicked.connect(self.open_compare)
        follow_conversations(self.reply_format, self.flow, self.bar)
        follow_tools(self.tools, self.flow)
        follow_thinking(self.thinking, self.flow)
        self.flow.tool_waiting.connect(  # an MCP server's call is the approval box's, not a typed result
            lambda calls: self.tool_result.show_waiting(self.flow.declared_waiting(calls)))
        self.tool_result.submitted.connect(self.flow.give_result)
        self.flow.busy_changed.connect(lambda _b: self._update_actions())
        self.flow.reply_finished.connect(lambda _m: self._update_actions())
        self.bar.action_triggered.connect(self._on_bar_action)
        self.view.copied.connect(lambda _c: self.statusBar().showMessage("Code copied", 2000))
        self.chat_area.welcome.example_chosen.connect(self.ask_example)
        for keys, what, slot in (("Ctrl+N", "Start a new conversation", self.new_chat),
                                 ("Esc", "Stop the reply", self._escape),
                                 ("Ctrl+Shift+S", "Streaming on or off", self.toggle_streaming),
                                 ("Ctrl+L", "Go to the message box", self.focus_composer),
                                 ("Ctrl+,", "Settings", self.open_settings),
                                 ("Ctrl+B", "Batch", self.open_batch),
                                 ("Ctrl+Shift+C", "Compare", self.open_compare)):
            sc = QShortcut(QKeySequence(keys), self)
            sc.setContext(Qt.ShortcutContext.WindowShortcut)
            sc.setWhatsThis(what)  # its name in Help > Keyboard shortcuts
            sc.activated.connect(slot)

    # -- model ----------------------------------------------------------------
    @property
    def remote(self) -> SavedEndpoint | None:
        """The saved server the chat goes through (Connections keeps it); None: a local model."""
        return self.connections.remote

    def _refresh_models(self) -> None:
        self.model_bar.refresh(self.remote or self.model_path, endpoints=self.connections.saved())

    def load_model(self, target: str | SavedEndpoint | None) -> None:
        """A GGUF path (None: the bundled default) or a saved server to chat through."""
        if self.flow.busy:
            self.flow.stop()
        if self.batch_panel is not None:
            self.batch_panel.shutdown()  # its context lives on the weights about to be freed
        self.server_runner.stop("the model was changed: start serving again for the new one")
        self.flow.model_ready = False
        self.loaded = None  # its weights are about to be freed
        if isinstance(target, SavedEndpoint):
            self.connections.connect(target)
            return
        self.connections.remote = None
        self.model_path = target
        self.model_bar.set_loading(Path(target).name if target else "the default model")
        self.bridge.load(EngineTarget(target, self.config.load_options(),
                                      draft_model=self.config.loaded_draft))

    @property
    def load_report(self):
        """The loaded model's LoadReport, for the settings' Hardware section (a server's hardware
        is not this machine's: None)."""
        return self.loaded.report if self.loaded is not None and self.loaded.model is not None else None

    def _on_loaded(self, info: Loaded) -> None:
        self.loaded = info
        gc_pauses.settle()  # nothing streams now: the collection a reply would have paid for
        self.flow.use_model(info.n_ctx, info.limits)
        self.thinking.use_model(info.thinking)
        if self.recorder is not None:
            self.recorder.model = info.identity
        self.model_bar.set_loaded(info.report)
        if self.remote is not None:
            self.config.active_endpoint = self.remote.base_url
        else:
            self.config.model_path, self.config.active_endpoint = self.model_path, None
        self._save()
        self.load_notes.loaded(info)
        self.model_loaded.emit(info)

    def _on_load_failed(self, message: str) -> None:
        self.flow.model_ready = False
        self.loaded = None
        self.model_bar.set_failed()
        what = "Could not connect to the server" if self.remote is not None else "Could not load the model"
        self.bar.show_message(f"{what}: {message}", "error", action="Use default model", key="default")
        self.model_failed.emit(message)

    # -- settings -------------------------------------------------------------
    def _save(self) -> None:
        if self.persist:
            try:
                save_config(self.config, self.config_path)
            except OSError as e:
                self.bar.show_message(f"Could not save settings: {e}", "warning")

    def set_streaming(self, on: bool) -> None:
        if self.config.streaming != on:
            self.config.streaming = on
            self._save()
        if self.model_bar.streaming.isChecked() != on:
            self.model_bar.streaming.setChecked(on)

    def toggle_streaming(self) -> None:
        self.set_streaming(not self.config.streaming)

    def open_settings(self) -> None:
        dlg = SettingsDialog(self.config, self, report=self.load_report, mcp=self.mcp,
                             count_tokens=loaded_counter(self.loaded))
        if dlg.exec() and dlg.result_config is not None:
            self.apply_settings(dlg.result_config)

    def apply_settings(self, cfg: AppConfig) -> list[str]:
        """Sampling changes apply to the next reply; load-time ones ask for a reload."""
        reload = self.config.needs_reload(cfg)
        self.config = cfg
        self._save()
        theme.apply(cfg.theme)  # the transcript redraws itself on the palette change
        if reload:
            names = {"n_ctx": "context length", "n_gpu_layers": "GPU layers", "n_threads": "threads",
                     "loaded_draft": "draft model"}
            what = ", ".join(names[f] for f in reload)
            self.bar.show_message(f"Changed {what}: this takes effect when the model is reloaded.",
                                  "info", action="Reload now", key="reload")
        return reload

    def _on_bar_action(self, key: str) -> None:
        if key == "reload":
            self.load_model(self.remote or self.model_path)
        elif key == "default":
            self.model_bar.select(None)
            self.load_model(None)

    # -- conversation ---------------------------------------------------------
    def new_chat(self) -> None:
        self.flow.new_chat()
        self.system_prompt.setText(self.flow.conversation.system_prompt)
        self._update_actions()
        self.focus_composer()

    def _on_system_prompt(self, text: str) -> None:
        self.flow.conversation.system_prompt = text

    def ask_example(self, text: str) -> None:
        """One of the welcome's example prompts, sent as if typed."""
        self.composer.set_text(text)
        self.flow.send()

    def _escape(self) -> None:
        """Esc: an MCP call running for the conversation shown stops; else its reply does."""
        if not self.flow.cancel_mcp_call():
            self.flow.stop()

    def focus_composer(self) -> None:
        self.composer.edit.setFocus()

    def _on_conversation_opened(self, conv) -> None:
        self.system_prompt.setText(conv.system_prompt)
        self._update_actions()

    def _update_actions(self) -> None:
        busy = self.flow.busy
        conv = self.flow.conversation
        self.regen_button.setEnabled(not busy and conv.can_regenerate())
        self.edit_button.setEnabled(not busy and conv.last_user_index() is not None)

    def _ready_model(self) -> Loaded | None:
        """The loaded model (or server), once the chat may use it."""
        return self.loaded if self.flow.model_ready else None

    def _batch_model(self) -> BatchTarget | None:
        """What a batch runs on: the weights it builds its own context on, or the server."""
        if self._ready_model() is None:
            return None
        if self.loaded.model is None:
            return self.connections.batch_target()
        return BatchTarget(self.loaded.model, self.loaded.identity["name"] or self.loaded.identity["file"])

    def open_batch(self) -> BatchPanel:
        if self.batch_panel is None:
            self.batch_panel = BatchPanel(self.batch_runner, self._batch_model,
                                          lambda: self.config.generation(), parent=self)
        self.batch_panel.show()
        self.batch_panel.raise_()
        return self.batch_panel

    @property
    def server_panel(self) -> ServerPanel | None:
        return self.serve.panel

    def open_server(self) -> ServerPanel:
        return self.serve.open_panel()

    def set_serving(self, on: bool) -> str | None:
        """Start or stop the window's server; returns why it could not start, if it could not."""
        return self.serve.set_serving(on)

    def open_compare(self) -> CompareWindow:
        if self.compare_window is None:
            choices = lambda: compare_choices(self.model_bar, self.connections.endpoint_for)
            self.compare_window = CompareWindow(choices, lambda: self.config.generation(), parent=self)
        self.compare_window.refresh_choices()
        self.compare_window.show()
        self.compare_window.raise_()
        return self.compare_window

    # -- closing --------------------------------------------------------------
    def shutdown(self) -> bool:
        """Stop any reply, end the engine thread, free the model (idempotent)."""
        if self._closing:
            return True
        self._closing = True
        self.flow.shutdown()
        self.mcp.close()  # every MCP server's process with it
        if self.batch_panel is not None:
            self.batch_panel.shutdown()  # before the bridge frees the weights it decodes on
        self.server_runner.stop()
        self.machine.close()
        if self.compare_window is not None:
            self.compare_window.shutdown()
        self.models.shutdown()  # a download pauses, its partial kept for the next launch
        self.documents.shutdown()  # an index being built stops between two files; what it did stays
        ok = self.bridge.shutdown(2.0)
        self._save()
        self.history.shutdown()  # an export or import in flight ends before the store closes
        if self.store is not None:
            self.flow.recorder = None
            self.store.close()
            self.store = None
        return ok

    def confirm_quit(self) -> bool:
        """Whether to close while a reply is being written: its text so far would be kept, cut."""
        running = self.flow.generating_conversation
        if self._closing or running is None:
            return True
        title = running.title or "a new conversation"
        box = QMessageBox(QMessageBox.Icon.Question, "Quit LlamaDesk?",
                          f"A reply is still being written in «{title}».", parent=self)
        box.setInformativeText("Quit anyway, and what it has written so far is kept, marked "
                               "interrupted; or cancel and let it finish.")
        quit_anyway = box.addButton("Quit anyway", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(box.addButton(QMessageBox.StandardButton.Cancel))
        box.exec()
        return box.clickedButton() is quit_anyway

    def closeEvent(self, ev) -> None:
        # Only the user's own close asks (the title bar, Alt+F4); one the program makes (Ctrl+C
        # in the terminal, a test) means it.
        if ev.spontaneous() and not self.confirm_quit():
            ev.ignore()
            return
        self.shutdown()
        super().closeEvent(ev)
        self.closed.emit()
