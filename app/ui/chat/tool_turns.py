"""The tool turns of a chat: a reply's calls run or waited for, their results, the next reply.

A reply may be tool calls, drawn as cards; a built-in tool's call runs here at
once (the calculator and the clock take microseconds) and its result goes into
the conversation, the view and the store, and the model is asked again; a call
of a tool the user declared waits (`tool_waiting`) until the user gives its
result (`give_result`). The loop is app.chat.tool_loop's policy, taken one
reply at a time. ChatFlow (app.ui.chat.flow) is the one class that mixes this
in: it holds the reply, the view and the store these methods work through.

A call of an MCP server's tool (the window's McpRunner, given by `use_mcp`) is
put to the user in the approval box unless app.chat.mcp_calls says it need not
be; allowed, it runs on the hub, never on the GUI thread, and its result goes
in as a tool message naming the server; denied or cancelled (Esc), the model is
told so in words. The servers a conversation uses are started when its turn is
sent (`_tools_starting`), the message going once they answer; a server that
fails is one line and the turn goes on without it. A new question drops a call
still waiting, as it leaves a declared tool's call unanswered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from app.chat.conversation import LiveConversation, LiveMessage
from app.chat.mcp_calls import (
    ALLOW_ALWAYS,
    BAD_ARGUMENTS,
    CANCELLED,
    DENIED,
    DENY,
    allowed_without_asking,
    answer,
    arguments,
    timeout_of,
)
from app.chat.tool_cost import ToolCostError, crowding, definitions_tokens
from app.chat.tool_loop import run_builtin
from app.chat.tool_set import McpFunction, ToolSetError
from app.engine.message import ToolCall
from app.ui.chat.engine_thread import Job

if TYPE_CHECKING:
    from app.chat.recorder import Turn, TurnRecorder
    from app.ui.chat.approval_box import ApprovalBox
    from app.ui.chat.gauges import GaugesPanel
    from app.ui.chat.mcp_runner import McpRunner
    from app.ui.chat.view import ChatView
    from app.ui.widgets.message_bar import MessageBar


@dataclass
class _McpCalls:
    """A reply's MCP calls, answered one at a time (the first of `queue` is the one at hand)."""

    conv: LiveConversation
    queue: list[tuple[ToolCall, McpFunction]]
    asking: bool = False  # the first waits for the user's decision
    token: object | None = None  # the first runs on the hub under this token


@dataclass
class _Starting:
    conv: LiveConversation
    line: str  # what the bar says meanwhile, taken back once they have answered
    send: bool  # the message in the box goes once they have answered
    token: object = field(default_factory=object)


class ToolTurns:
    """ChatFlow's tool turns; the attributes below are ChatFlow's."""

    conversation: LiveConversation
    recorder: TurnRecorder | None
    view: ChatView
    bar: MessageBar
    panel: GaugesPanel
    tool_waiting: Any  # ChatFlow's Signal(object)
    conversation_changed: Any
    settings_source: Any
    model_ready: bool
    n_ctx: int
    _tool_line: str
    # MCP: set by use_mcp (None: this window calls no MCP servers)
    mcp_runner: McpRunner | None = None
    approval_box: ApprovalBox | None = None
    count_tokens: Callable[[str], int] | None  # the loaded model's tokenizer (None: a server's)
    _mcp: _McpCalls | None = None
    _starting: _Starting | None = None
    _started_once = False  # the servers were just started: the resend does not start them again
    _cost_key: tuple | None = None
    _cost: int | None = None

    @property
    def busy(self) -> bool:
        raise NotImplementedError

    @property
    def generating(self) -> bool:
        raise NotImplementedError

    def send(self) -> bool:
        raise NotImplementedError

    def _engine_taken(self, kept: str = "") -> bool:
        raise NotImplementedError

    def _commit_taken_back(self) -> None:
        raise NotImplementedError

    def _start(self, conv: LiveConversation, job: Job, turn: Turn | None) -> None:
        raise NotImplementedError

    def _calls(self, conv: LiveConversation, round_no: int):
        if round_no == 0:
            self._drop_mcp_calls(conv)  # a new question: a call still waiting is left unanswered
        if conv.tools.mcp and self.mcp_runner is not None:
            runner = self.mcp_runner
            if round_no == 0 and conv.tools.active:  # a regeneration in a conversation just opened
                self._start_servers(conv, send=False)
            conv.tools = conv.tools.with_mcp(runner.states(), runner.config)
        if round_no == 0:
            self._warn_tools_cost(conv)
        try:
            return conv.tools.calls(round_no)
        except ToolSetError as e:
            self.bar.show_message(f"{e}: this reply is text", "warning")
            return None

    def give_result(self, text: str) -> bool:
        """The user's result for the first waiting call of a declared tool; once every call has
        its result, the model is asked again."""
        conv = self.conversation
        waiting = self.declared_waiting(conv.waiting_calls())
        if self.busy or not waiting or not self.model_ready or self._engine_taken(" (the result is kept)"):
            return False
        self._commit_taken_back()
        self._add_result(conv, waiting[0], text)
        self._after_results(conv)
        return True

    def _add_result(self, conv: LiveConversation, call: ToolCall, result: str,
                    server: str | None = None) -> None:
        msg = LiveMessage("tool", result, tool_call_id=call.id, tool_name=call.name, tool_server=server)
        conv.messages.append(msg)
        if self.recorder is not None:
            msg.id = self.recorder.tool_result(conv.id, call, result, server=server)
        if conv is self.conversation:
            self.view.add_message(msg)

    def _after_calls(self, conv: LiveConversation, calls: tuple[ToolCall, ...]) -> None:
        """A reply made calls: run the built-in ones, put MCP ones to the user, then ask again
        or wait for the user."""
        ran = run_builtin(calls, conv.tools)
        for call, result in ran.done:
            self._add_result(conv, call, result)
        if ran.mcp and self.mcp_runner is not None:
            self._mcp = _McpCalls(conv, list(ran.mcp))
            self._next_mcp_call()
            return
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

    def declared_waiting(self, waiting: list[ToolCall]) -> list[ToolCall]:
        """The calls the user answers with a typed result: not an MCP server's, which the
        approval box handles (or, in a reopened conversation, which its server answered)."""
        tools = self.conversation.tools
        if not tools.mcp:
            return waiting
        declared = {d["function"]["name"] for d in tools.declared}
        return [c for c in waiting if c.name in declared and tools.mcp_target(c.name) is None]

    def _ask_for_results(self, waiting: list[ToolCall]) -> None:
        """The bar asks for the results while the conversation shown has calls waiting, and
        takes the line back once none does (answered, a new question, another conversation
        shown), unless the bar has said something else since."""
        waiting = self.declared_waiting(waiting)
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

    # -- MCP servers ----------------------------------------------------------
    def use_mcp(self, runner: McpRunner, box: ApprovalBox) -> None:
        """Call MCP servers through `runner`, asking in `box`."""
        self.mcp_runner, self.approval_box = runner, box
        runner.ensured.connect(self._on_ensured)
        runner.called.connect(self._on_called)
        box.decided.connect(self.decide)
        box.cancel_clicked.connect(self.cancel_mcp_call)
        self.conversation_changed.connect(lambda _c: self._show_mcp_call())
        self.conversation_changed.connect(lambda _c: self.refresh_tools_cost())

    def _tools_starting(self) -> bool:
        """True: the conversation's MCP servers are being started off the GUI thread, and the
        message in the box is sent once they have answered (ChatFlow.send asks this first)."""
        conv, runner = self.conversation, self.mcp_runner
        if runner is None or not conv.tools.active or not conv.tools.mcp or self._started_once:
            return False
        if self._starting is not None:
            self._starting.send = self._starting.conv is conv
            self.bar.show_message("The MCP servers are still starting: your message goes once they answer "
                                  "(it is kept).", "info")
            return True
        return self._start_servers(conv, send=True)

    def _start_servers(self, conv: LiveConversation, send: bool) -> bool:
        """Start the conversation's servers that have not started (False: none to start)."""
        runner, states = self.mcp_runner, self.mcp_runner.states()
        todo = [n for n in conv.tools.mcp if (cfg := runner.config.get(n)) is not None and cfg.enabled
                and (states.get(n) is None or states[n].status in ("stopped", "starting"))]
        if not todo or self._starting is not None:
            return False
        plural = "s" if len(todo) > 1 else ""
        line = f"Starting MCP server{plural} {', '.join(todo)}"
        line += "…" if send else ": this reply goes without their tools, the next has them"
        self._starting = _Starting(conv, line, send)
        self.bar.show_message(line, "info")
        runner.ensure(todo, self._starting.token)
        return True

    def _on_ensured(self, token: object, states: dict) -> None:
        starting = self._starting
        if starting is None or token is not starting.token:
            return
        self._starting = None
        runner, conv = self.mcp_runner, starting.conv
        lines = []
        for name in conv.tools.mcp:
            cfg, state = runner.config.get(name), states.get(name) or runner.states().get(name)
            if cfg is None:
                lines.append(f"MCP server {name} is not in mcp.json")
            elif not cfg.enabled:
                lines.append(f"MCP server {name} is turned off")
            elif state is None or state.status != "ready":
                why = state.error if state is not None and state.error else "it did not start"
                lines.append(f"MCP server {name}: {why}")
        conv.tools = conv.tools.with_mcp(runner.states(), runner.config)
        lines += [f"MCP tool {line}" for line in conv.tools.left_out]
        if lines:
            self.bar.show_message("; ".join(lines) + ": the conversation goes on without them", "warning")
        else:
            self.bar.withdraw(starting.line)
        self.refresh_tools_cost()
        if starting.send and conv is self.conversation and not self.busy:
            self._started_once = True
            try:
                self.send()
            finally:
                self._started_once = False

    def _next_mcp_call(self) -> None:
        """Put the next MCP call to the user (or run it: trusted, always allowed); with none
        left, the model is asked again."""
        m, runner = self._mcp, self.mcp_runner
        if m is None:
            return
        if not m.queue:
            self._mcp = None
            if self.approval_box is not None:
                self.approval_box.clear()
            self._after_results(m.conv)
            return
        call, fn = m.queue[0]
        if arguments(call) is None:
            self._answer_mcp(BAD_ARGUMENTS)
        elif allowed_without_asking(runner.config, runner.approvals, fn.server, fn.tool):
            self._run_mcp_call()
        else:
            m.asking = True
            self._show_mcp_call()

    def _show_mcp_call(self) -> None:
        """The approval box shows the conversation on screen's call at hand, or hides."""
        m, box = self._mcp, self.approval_box
        if box is None:
            return
        if m is None or m.conv is not self.conversation:
            box.clear()
            if m is not None and m.asking:
                call, fn = m.queue[0]
                self.bar.show_message(f"In «{m.conv.title or 'a new conversation'}» the model wants to call "
                                      f"{fn.server}/{fn.tool}: open it to allow or deny", "info")
            return
        call, fn = m.queue[0]
        if m.token is not None:
            box.show_running(call, fn)
        elif m.asking:
            box.show_asking(call, fn, len(m.queue) - 1)

    def decide(self, decision: str) -> bool:
        """The user's answer to the call shown: ALLOW_ONCE, ALLOW_ALWAYS or DENY."""
        m = self._mcp
        if m is None or not m.asking or m.conv is not self.conversation:
            return False
        if self.generating and decision != DENY and self._engine_taken(" (the call waits)"):
            return False
        m.asking = False
        fn = m.queue[0][1]
        if decision == DENY:
            self._answer_mcp(DENIED)
            return True
        if decision == ALLOW_ALWAYS:
            self.mcp_runner.approvals.allow_always(fn.server, fn.tool)
        self._run_mcp_call()
        return True

    def _run_mcp_call(self) -> None:
        m, runner = self._mcp, self.mcp_runner
        call, fn = m.queue[0]
        m.asking, m.token = False, object()
        self._show_mcp_call()
        runner.call(fn.server, fn.tool, arguments(call) or {}, timeout_of(runner.config, fn.server), m.token)

    def cancel_mcp_call(self) -> bool:
        """Esc: the call running for the conversation shown stops; the model is told."""
        m = self._mcp
        if m is None or m.token is None or m.conv is not self.conversation:
            return False
        return self.mcp_runner.cancel(m.token)

    def _on_called(self, token: object, result) -> None:
        m = self._mcp
        if m is None or token is not m.token:
            return
        self.mcp_runner.finished(token)
        if result is not None and result.notes:
            self.bar.show_message(f"{m.queue[0][1].server}: " + "; ".join(result.notes), "info")
        self._answer_mcp(CANCELLED if result is None else answer(result))

    def _answer_mcp(self, text: str) -> None:
        m = self._mcp
        call, fn = m.queue.pop(0)
        m.token, m.asking = None, False
        self._add_result(m.conv, call, text, fn.server)
        self._next_mcp_call()

    def _drop_mcp_calls(self, conv: LiveConversation) -> None:
        """A new question in `conv`: its calls still waiting are left unanswered, a running one
        is cancelled and its result not kept."""
        m = self._mcp
        if m is None or m.conv is not conv:
            return
        self._mcp = None
        if m.token is not None and self.mcp_runner is not None:
            self.mcp_runner.cancel(m.token)
            self.mcp_runner.finished(m.token)
        if self.approval_box is not None:
            self.approval_box.clear()

    # -- what the tools cost ----------------------------------------------------
    def refresh_tools_cost(self) -> int | None:
        """The gauges show what the conversation's tool definitions take of the context."""
        conv = self.conversation
        if conv.tools.mcp and self.mcp_runner is not None:
            conv.tools = conv.tools.with_mcp(self.mcp_runner.states(), self.mcp_runner.config)
        definitions = conv.tools.definitions() if conv.tools.active else []
        count = self.count_tokens
        key = (tuple(d["function"]["name"] for d in definitions), count, self.n_ctx)
        if key != self._cost_key:
            self._cost_key = key
            try:
                self._cost = definitions_tokens(count, definitions) if count and definitions else None
            except ToolCostError:
                self._cost = None
        pending = [n for n in conv.tools.mcp if conv.tools.active
                   and not any(f.server == n for f in conv.tools.resolved)]
        self.panel.show_tools_cost(self._cost if definitions else 0, self.n_ctx, len(definitions),
                                   counted=count is not None, pending=pending)
        return self._cost

    def _warn_tools_cost(self, conv: LiveConversation) -> None:
        if conv is not self.conversation:
            return
        cost = self.refresh_tools_cost()
        if not cost or not self.n_ctx:
            return
        last = next((m.stats for m in reversed(conv.messages) if m.role == "assistant" and m.stats), None)
        line = crowding(cost, self.n_ctx, self.settings_source().max_tokens,
                        last.kv_used if last is not None else 0)
        if line:
            self.bar.show_message(line, "warning")
