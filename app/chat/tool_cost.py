"""What tool definitions cost a turn: the prompt tokens they add, as the local model is given them.

Every enabled tool is written into the system text of every turn (app.openai_compat
.params.with_tools, as app.chat.tool_messages.local_turn gives it to the model), so a
server with many tools takes context before the user has said a word. The cost is
measured, not guessed from the JSON's length: the system text is rendered with and
without the tools, the caller's tokenizer counts both, and the difference is what the
definitions take. `llamadesk mcp list` and the window's gauges show it.
"""

from __future__ import annotations

from collections.abc import Callable

from app.engine.message import MessageBody
from app.errors import LlamaDeskError
from app.openai_compat.params import with_tools
from app.openai_compat.refusal import RequestError
from app.openai_compat.tools import parse_tools

# A system prompt stands in for the user's: the tools are written ahead of it, joined by a blank line.
_SYSTEM = "You are a helpful assistant."


class ToolCostError(LlamaDeskError):
    """Definitions that are not OpenAI function definitions, said in one line."""


def system_text(definitions: list[dict], system: str = _SYSTEM) -> str:
    """The system text a turn with these tools starts with (choice "auto", the usual one)."""
    if not definitions:
        return system
    try:
        tools = parse_tools({"tools": definitions, "tool_choice": "auto", "parallel_tool_calls": False})
    except RequestError as e:
        raise ToolCostError(f"tool definitions cannot be measured: {e.message}") from None
    if tools is None:
        return system
    return with_tools([MessageBody("system", system)], tools)[0].content


def definitions_tokens(count: Callable[[str], int], definitions: list[dict]) -> int:
    """Prompt tokens the definitions add to every turn; 0 for none. `count` is the model's
    tokenizer (text -> number of tokens)."""
    if not definitions:
        return 0
    return max(0, count(system_text(definitions)) - count(_SYSTEM))


def crowding(cost: int, n_ctx: int, max_tokens: int, history_tokens: int) -> str | None:
    """A warning before tool definitions push the conversation out of the context, or None.
    `history_tokens`: what the conversation took at its last reply (0: none yet)."""
    room = n_ctx - min(max_tokens, n_ctx // 2)  # what the prompt may take beside the reply's budget
    if room <= 0 or cost <= 0:
        return None
    share = 100 * cost / n_ctx
    if cost >= room:
        return (f"The tools' definitions take {cost:,} tokens, more than the {room:,} the prompt has "
                f"of the {n_ctx:,}-token context: turn some tools or servers off")
    if history_tokens + cost > room:
        return (f"The tools' definitions take {cost:,} tokens ({share:.0f}% of the context): older messages "
                "are being left out of the prompt to make room for them")
    if 2 * cost > room:
        return (f"The tools' definitions take {cost:,} tokens, {share:.0f}% of the context: older messages "
                "will be left out sooner")
    return None
