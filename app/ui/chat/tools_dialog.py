"""The tools a user declares for a conversation: OpenAI function definitions, pasted as JSON.

Checked on OK by the parser the server checks a request's tools with
(app.chat.tool_set.declared_tools), so a definition that cannot be used is
said in one line under the text and the dialog stays open with the text as
typed. An empty box on OK declares none.
"""

from __future__ import annotations

import json

from app.chat.tool_set import ToolSetError, declared_tools
from app.ui.chat.json_dialog import JsonTextDialog

EXAMPLE = json.dumps([{"type": "function", "function": {
    "name": "get_weather", "description": "Today's weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    indent=2)


class ToolsDialog(JsonTextDialog):
    def __init__(self, declared: tuple[dict, ...] = (), parent=None):
        super().__init__("Declared tools — LlamaDesk",
                         "Tools the model may call in this conversation, as OpenAI function definitions "
                         "(a JSON list). When it calls one, you give the result.",
                         json.dumps(list(declared), indent=2, ensure_ascii=False) if declared else "",
                         EXAMPLE, "Use tools", parent)
        self.declared: tuple[dict, ...] | None = None  # set on OK

    def accept(self) -> None:
        text = self.edit.toPlainText()
        try:
            self.declared = declared_tools(text) if text.strip() else ()
        except ToolSetError as e:
            self._show_error(str(e))
            return
        super().accept()
