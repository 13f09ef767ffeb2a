"""A conversation's tools: LlamaDesk's own it may call, the ones the user declared, its MCP servers, and how.

Like the reply format (app.chat.reply_format) it belongs to the conversation
and is stored with it (app.history: `tools`), so reopening a chat, or `ask
--continue`, keeps its tools. Declared tools are OpenAI function definitions,
as a user writes them for OpenAI's playground; they are checked when given, by
the same parser the server checks a request's `tools` with
(app.openai_compat.tools), so a definition that would fail a turn is refused
then, in one line. A turn gets its ToolCalls from here: the first reply of a
turn honours the choice ("required" forces a call), the replies after tool
results may answer in text, and the last one the loop allows must (no tools),
so a model that keeps calling still ends in an answer. One call a reply: a
small model allowed several repeats its first call until max_tokens cuts the
reply, where one at a time, each with its result, it goes on to answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.chat import builtin_tools
from app.errors import LlamaDeskError
from app.openai_compat.refusal import RequestError
from app.openai_compat.tools import ToolCalls, parse_tools

if TYPE_CHECKING:  # the MCP SDK loads only where a conversation uses a server
    from app.mcp.config import McpConfig
    from app.mcp.hub import ServerState

CHOICES = ("auto", "required", "none")  # or one tool's name
MAX_ROUNDS = 4  # replies in one turn: the first, and up to three after tool results
TOOLS_FILE_MAX = 1 << 20
_FUNCTION_NAME = re.compile(r"[^A-Za-z0-9_-]")


class ToolSetError(LlamaDeskError):
    """Tools that cannot be used, said in one line; the tools in use stay as they were."""


@dataclass(frozen=True)
class McpFunction:
    """One MCP tool as a turn offers it: the name the model calls, and where the call goes."""

    function: str
    server: str
    tool: str
    definition: dict  # {"type": "function", "function": {"name": function, ...}}


@dataclass(frozen=True)
class ToolSet:
    builtin: tuple[str, ...] = ()  # builtin_tools.NAMES enabled
    declared: tuple[dict, ...] = ()  # {"type": "function", "function": {...}} the user gave
    choice: str = "auto"
    mcp: tuple[str, ...] = ()  # the MCP servers (mcp.json names) this conversation uses
    # Their tools for the turn under way (with_mcp); not saved, not part of equality.
    resolved: tuple[McpFunction, ...] = field(default=(), compare=False)
    left_out: tuple[str, ...] = field(default=(), compare=False)  # "server/tool: why", one line each

    @property
    def active(self) -> bool:
        return bool(self.builtin or self.declared or self.mcp) and self.choice != "none"

    def definitions(self) -> list[dict]:
        return [*(builtin_tools.DEFINITIONS[n] for n in self.builtin), *self.declared,
                *(f.definition for f in self.resolved)]

    def is_builtin(self, name: str) -> bool:
        return name in self.builtin

    def mcp_target(self, name: str) -> McpFunction | None:
        """The MCP tool a call of `name` goes to (None: not an MCP tool of this turn)."""
        return next((f for f in self.resolved if f.function == name), None)

    def with_mcp(self, states: Mapping[str, ServerState], config: McpConfig) -> ToolSet:
        """These tools with the MCP servers' tools resolved for a turn: each enabled tool of each
        chosen server that is enabled and ready (a failed or missing one adds nothing)."""
        resolved, left_out = resolve_mcp(self, states, config)
        return replace(self, resolved=resolved, left_out=left_out)

    def calls(self, round_no: int = 0, max_rounds: int = MAX_ROUNDS) -> ToolCalls | None:
        """What reply `round_no` (0: the turn's first) may call; None: it answers in plain text.
        The last reply of a loop calls nothing but is still held to the format, or a model that
        has seen calls in its history writes one more as text."""
        if not self.active or not self.definitions():
            return None
        choice = self.choice if round_no == 0 else "auto"
        if choice not in CHOICES:
            choice = {"type": "function", "function": {"name": choice}}  # type: ignore[assignment]
        try:
            tools = parse_tools({"tools": self.definitions(), "tool_choice": choice,
                                 "parallel_tool_calls": False})
        except RequestError as e:  # checked when given: only a hand-edited store gets here
            raise ToolSetError(f"the conversation's tools cannot be used: {e.message}") from None
        if tools is not None and round_no >= max_rounds - 1:
            return replace(tools, choice="answer")
        return tools

    def label(self) -> str:
        names = [*self.builtin, *(d["function"]["name"] for d in self.declared)]
        if not names and not self.mcp:
            return "No tools"
        parts = [", ".join(names) if len(names) <= 2 else f"{len(names)} tools"] if names else []
        for server in self.mcp:
            n = sum(f.server == server for f in self.resolved)
            parts.append(f"{server} ({n} tool{'s' if n != 1 else ''})" if n else server)
        return ", ".join(parts) + ("" if self.choice == "auto" else f" ({self.choice})")

    def to_json(self) -> dict | None:
        if not (self.builtin or self.declared or self.mcp):
            return None
        d = {"builtin": list(self.builtin), "declared": list(self.declared), "choice": self.choice}
        return {**d, "mcp": list(self.mcp)} if self.mcp else d

    @classmethod
    def from_json(cls, d: dict | None) -> ToolSet:
        """The stored tools; None (a conversation from before tools) is none. Checked again."""
        if d is None:
            return cls()
        builtin = d.get("builtin") or []
        if not isinstance(builtin, list) or not all(n in builtin_tools.NAMES for n in builtin):
            raise ToolSetError(f"unknown built-in tools {builtin!r} "
                               f"(there are {', '.join(builtin_tools.NAMES)})")
        mcp = d.get("mcp") or []
        if not isinstance(mcp, list) or not all(isinstance(n, str) and n for n in mcp):
            raise ToolSetError(f"MCP servers must be a list of names, got {mcp!r}")
        declared = d.get("declared") or []
        return make_tool_set(builtin, declared_tools(declared) if declared else (), d.get("choice", "auto"),
                             mcp=mcp)


def resolve_mcp(tools: ToolSet, states: Mapping[str, ServerState], config: McpConfig
                ) -> tuple[tuple[McpFunction, ...], tuple[str, ...]]:
    """The chosen servers' enabled tools, named for the model: a tool's own name unless another
    tool of the turn (a built-in, a declared one, another server's) has it, then server__tool.
    A tool whose definition the tool format cannot take is left out, and said (one line each),
    so one odd schema does not cost the turn every tool."""
    found = []
    for server in tools.mcp:
        cfg, state = config.get(server), states.get(server)
        if cfg is None or not cfg.enabled or state is None or state.status != "ready":
            continue
        found += [t for t in state.tools if t.name not in cfg.disabled_tools]
    taken = [*tools.builtin, *(d["function"]["name"] for d in tools.declared)]
    names = [t.name for t in found]
    out, left_out = [], []
    for t in found:
        name = t.name if names.count(t.name) == 1 and t.name not in taken else f"{t.server}__{t.name}"
        name = _FUNCTION_NAME.sub("_", name)[:64]
        definition = t.definition(name)
        try:
            parse_tools({"tools": [definition]})
        except RequestError as e:
            left_out.append(f"{t.server}/{t.name}: {e.message}")
            continue
        out.append(McpFunction(name, t.server, t.name, definition))
    return tuple(out), tuple(left_out)


def make_tool_set(builtin, declared, choice: str = "auto", mcp=()) -> ToolSet:
    """A checked ToolSet: names unique across built-in and declared tools, a choice that is one
    of CHOICES or a tool's name; `mcp` the names of the MCP servers the conversation uses (in
    mcp.json; what they offer is resolved per turn). The Tools chooser calls this, or
    dataclasses.replace(tools, mcp=...) to change the servers alone."""
    out = ToolSet(tuple(dict.fromkeys(builtin)), tuple(declared), choice, tuple(dict.fromkeys(mcp)))
    names = [*out.builtin, *(t["function"]["name"] for t in out.declared)]
    if len(set(names)) != len(names):
        clash = next(n for n in names if names.count(n) > 1)
        raise ToolSetError(f"two tools are named {clash!r}: a declared tool cannot take a built-in's name")
    if choice not in CHOICES and choice not in names and not out.mcp:  # an MCP tool's: known per turn
        raise ToolSetError(f"tool choice {choice!r} is none of {', '.join(CHOICES)} and no tool's name")
    return out


def declared_tools(raw) -> tuple[dict, ...]:
    """OpenAI function definitions, checked: a list of {"type": "function", "function": {...}}, or
    one; a bare {"name", "parameters"} is taken as the function it describes. Parsed JSON, or text."""
    if isinstance(raw, str):
        raw = _parse(raw)
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise ToolSetError('tools are a JSON list of {"type": "function", "function": {"name": ...}}')
    tools = [t if isinstance(t, dict) and "function" in t else {"type": "function", "function": t}
             for t in raw]
    try:
        parsed = parse_tools({"tools": tools})
    except RequestError as e:
        raise ToolSetError(e.message) from None
    assert parsed is not None
    return tuple({"type": "function", "function": {"name": t.name, "description": t.description,
                                                   "parameters": t.parameters}} for t in parsed.tools)


def _parse(text: str):
    if not text.strip():
        raise ToolSetError("the tools are empty: paste a JSON list of function definitions")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ToolSetError(f"the tools are not JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except (ValueError, RecursionError):
        raise ToolSetError("the tools are not JSON that can be read") from None


def read_tools_text(spec: str) -> str:
    """--tools' value: the JSON itself, or a file holding it (ToolSetError naming the file)."""
    if spec.lstrip().startswith(("[", "{")):
        return spec
    p = Path(spec)
    try:
        if p.stat().st_size > TOOLS_FILE_MAX:
            raise ToolSetError(f"{spec}: too large for tool definitions (over {TOOLS_FILE_MAX >> 10} KiB)")
        return p.read_bytes().decode("utf-8-sig")
    except OSError as e:
        raise ToolSetError(f"{spec}: cannot read it ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise ToolSetError(f"{spec}: not UTF-8 text, so not tool definitions") from None
