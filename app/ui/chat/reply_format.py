"""The conversation's reply format beside its system prompt: Text, Any JSON or Schema….

It shows the format of the conversation on screen (a new chat's is text, an
opened one's what was saved with it) and hands a choice to the chat flow,
which saves it with the conversation at once and holds the next turns to it.
Schema… opens the schema dialog each time it is picked, with the schema in
use to edit; Cancel there leaves the format as it was.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from app.chat.conversation import LiveConversation
from app.chat.reply_format import ANY_JSON, SCHEMA, TEXT, ReplyFormat
from app.ui.chat.flow import ChatFlow
from app.ui.chat.schema_dialog import SchemaDialog
from app.ui.widgets.message_bar import MessageBar

ROWS = (TEXT, ANY_JSON, SCHEMA)
SCHEMA_ITEM = "Schema…"
MAX_WIDTH = 240
TIPS = {
    TEXT: "Replies are free text, drawn as Markdown.",
    ANY_JSON: "Every reply is a JSON object (any keys), kept to JSON while it is decoded.",
    SCHEMA: "Every reply is JSON valid against your schema, kept to it while it is decoded.",
}


class ReplyFormatChooser(QWidget):
    chosen = Signal(object)  # the ReplyFormat the user picked

    def __init__(self, parent=None):
        super().__init__(parent)
        self.format = ReplyFormat()
        self.combo = QComboBox()
        self.combo.addItems(["Text", "Any JSON", SCHEMA_ITEM])
        for i, mode in enumerate(ROWS):
            self.combo.setItemData(i, TIPS[mode], Qt.ItemDataRole.ToolTipRole)
        self.combo.setToolTip("The format of this conversation's replies (saved with it)")
        # As wide as a schema's name, up to a point (Qt cuts a longer one with an ellipsis).
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.combo.setMaximumWidth(MAX_WIDTH)
        self.combo.activated.connect(self._on_activated)
        self.dialog: SchemaDialog | None = None  # open while a schema is being chosen (tests)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Reply"))
        row.addWidget(self.combo)

    def show_format(self, fmt: ReplyFormat) -> None:
        """Show `fmt` (the conversation's) without announcing it as a choice."""
        self.format = fmt
        self.combo.setItemText(2, fmt.label() if fmt.mode == SCHEMA else SCHEMA_ITEM)
        self.combo.setCurrentIndex(ROWS.index(fmt.mode))
        tip = TIPS[fmt.mode]
        if fmt.mode == SCHEMA:
            tip += f"<pre>{html.escape(fmt.schema[:600])}</pre>"
        self.combo.setToolTip(tip)

    def choose(self, fmt: ReplyFormat) -> None:
        self.show_format(fmt)
        self.chosen.emit(fmt)

    def _on_activated(self, index: int) -> None:
        mode = ROWS[index]
        if mode == SCHEMA:
            self.combo.setCurrentIndex(ROWS.index(self.format.mode))  # until the dialog says
            self.edit_schema()
        elif mode != self.format.mode:
            self.choose(ReplyFormat(mode))

    def edit_schema(self) -> None:
        """The schema dialog, with the schema in use (if any) to edit; OK makes it the format."""
        self.dialog = SchemaDialog(self.format if self.format.mode == SCHEMA else None, self)
        self.dialog.finished.connect(self._on_dialog_done)
        self.dialog.open()

    def _on_dialog_done(self, _result: int) -> None:
        dlg, self.dialog = self.dialog, None
        if dlg is not None and dlg.result_format is not None:
            self.choose(dlg.result_format)
        if dlg is not None:
            dlg.deleteLater()


def follow_conversations(chooser: ReplyFormatChooser, flow: ChatFlow, bar: MessageBar) -> None:
    """Keep `chooser` on the flow's conversation: it shows each one's format as it is shown
    (saying once why a stored one could not be used), and a choice goes to the flow."""
    def shown(conv: LiveConversation) -> None:
        chooser.show_format(conv.reply_format)
        if conv.format_note:
            bar.show_message(conv.format_note, "warning")
            conv.format_note = None

    flow.conversation_changed.connect(shown)
    chooser.chosen.connect(flow.set_reply_format)
