"""The tool turns of a chat: a reply's calls run or waited for, their results, the next reply.

A reply may be tool calls, drawn as cards; a built-in tool's call runs here at
once (the calculator and the clock take microseconds) and its result goes into
the conversation, the view and the store, and the model is asked again; a call
of a tool the user declared waits (`tool_waiting`) until the user gives its
result (`give_result`). The loop is app.chat.tool_loop's policy, taken one
reply at a time. ChatFlow (app.ui.chat.flow) is the one class that mixes this
in: it holds the reply, the view and the store these methods work through.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from app.chat.conversation import LiveConversation, LiveMessage
from app.chat.tool_loop import run_builtin
from app.chat.tool_set import ToolSetError
from app.engine.message import ToolCall
from app.ui.chat.engine_thread import Job

if TYPE_CHECKING:
    from app.chat.recorder import Turn, TurnRecorder
    from app.ui.chat.view import ChatView
    from app.ui.widgets.message_bar import MessageBar


class ToolTurns:
    """ChatFlow's tool turns; the attributes below are ChatFlow's."""

    conversation: LiveConversation
    recorder: TurnRecorder | None
    view: ChatView
    bar: MessageBar
    tool_waiting: Any  # ChatFlow's Signal(object)
    settings_source: Any
    model_ready: bool
    _tool_line: str

    @property
    def busy(self) -> bool:
        raise NotImplementedError

    def _engine_taken(self, kept: str = "") -> bool:
        raise NotImplementedError

    def _commit_taken_back(self) -> None:
        raise NotImplementedError

    def _start(self, conv: LiveConversation, job: Job, turn: Turn | None) -> None:
        raise NotImplementedError

    def _calls(self, conv: LiveConversation, round_no: int):
        try:
            return conv.tools.calls(round_no)
        except ToolSetError as e:
            self.bar.show_message(f"{e}: this reply is text", "warning")
            return None

    def give_result(self, text: str) -> bool:
        """The user's result for the first waiting call of a declared tool; once every call has
        its result, the model is asked again."""
        conv = self.conversation
        waiting = conv.waiting_calls()
        if self.busy or not waiting or not self.model_ready or self._engine_taken(" (the result is kept)"):
            return False
        self._commit_taken_back()
        self._add_result(conv, waiting[0], text)
        self._after_results(conv)
        return True

    def _add_result(self, conv: LiveConversation, call: ToolCall, result: str) -> None:
        msg = LiveMessage("tool", result, tool_call_id=call.id, tool_name=call.name)
        conv.messages.append(msg)
        if self.recorder is not None:
            msg.id = self.recorder.tool_result(conv.id, call, result)
        if conv is self.conversation:
            self.view.add_message(msg)

    def _after_calls(self, conv: LiveConversation, calls: tuple[ToolCall, ...]) -> None:
        """A reply made calls: run the built-in ones, then ask again or wait for the user."""
        ran = run_builtin(calls, conv.tools)
        for call, result in ran.done:
            self._add_result(conv, call, result)
        self._after_results(conv)

    def _after_results(self, conv: LiveConversation) -> None:
        waiting = conv.waiting_calls()
        shown = conv is self.conversation
        if shown:
            self.tool_waiting.emit(waiting)
        if waiting:
            names = ", ".join(dict.fromkeys(c.name for c in waiting))
            if not shown:  # the conversation shown says it through tool_waiting
                self.bar.show_message(f"In «{conv.title or 'a new conversation'}» the model called {names}: "
                                      "open it to give the result", "info")
            return
        conv.tool_rounds += 1
        self._continue(conv, conv.tool_rounds)

    def _ask_for_results(self, waiting: list[ToolCall]) -> None:
        """The bar asks for the results while the conversation shown has calls waiting, and
        takes the line back once none does (answered, a new question, another conversation
        shown), unless the bar has said something else since."""
        if waiting:
            names = ", ".join(dict.fromkeys(c.name for c in waiting))
            self._tool_line = f"The model called {names}: give the result below and send it"
            self.bar.show_message(self._tool_line, "info")
        elif self._tool_line:
            self.bar.withdraw(self._tool_line)
            self._tool_line = ""

    def _continue(self, conv: LiveConversation, round_no: int) -> None:
        """The model's next reply after the tool results (no question of its own)."""
        settings = self.settings_source()  # no reply format: the tool format holds this reply
        turn = None
        if self.recorder is not None and conv.id is not None:
            turn = self.recorder.begin_continuation(conv.id, [m.id for m in conv.messages])
        job = Job(conv.history(), None, replace(settings, constraint=None), conv.system(),
                  tools=self._calls(conv, round_no), round=round_no)
        self._start(conv, job, turn)
