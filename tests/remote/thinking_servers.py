"""llama-server as a thinking model's server, for the reasoning tests: the bundled model served with
a real thinking model's chat template and llama-server's own reasoning parser.

The bundled Gemma 3 270M is no thinking model, but llama-server does not know: it decides how to
split the thinking from the answer by analysing the chat template (common/chat.cpp), and streams
what it splits off as `reasoning_content`. So the template is a real one (Qwen3's, copied unchanged
into tests/data/templates/), given with `--chat-template-file`: the same template source
llama-server would read from a GGUF's `tokenizer.chat_template`, without writing a 250 MB copy of
the model per run. The small base model never writes `</think>` by itself: the tests hold its
output to the thinking shape with llama-server's `grammar` request field (which
/v1/chat/completions takes: tools/server/server-common.cpp).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.engine.sampling import GenerationSettings
from tests.remote.servers import start_llama_server

TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "templates"
QWEN3 = TEMPLATES / "Qwen-Qwen3-0.6B.jinja"

# Qwen3's shape, with the thinking and the answer free but short: the answer's opening words are
# fixed so a test can tell it from the thinking, and nothing else in it can look like a tag.
THINKING_GRAMMAR = r'''root ::= "<think>\n" thought "\n</think>\n\n" answer
thought ::= "First, " [a-z]{3,8} " " [a-z]{3,8} " " [a-z]{3,8} "."
answer ::= "The answer is " [a-z]{3,8} "."
'''
# The answer alone, for a template told not to think (its prompt closes the thinking itself).
ANSWER_GRAMMAR = r'''root ::= "The answer is " [a-z]{3,8} "."
'''


def start_thinking_server(model: Path, template: Path, *extra: str):
    """One slot: the tests measure one reply at a time, on two shared cores."""
    return start_llama_server(model, slots=1, ctx=2048, extra=(
        "--jinja", "--chat-template-file", str(template), "--reasoning-format", "deepseek", *extra))


def thinking(settings: GenerationSettings, think=None, budget=None) -> GenerationSettings:
    """Settings with the thinking switch and budget, set by name: the remote engine reads them so,
    whether GenerationSettings has them as fields yet or not."""
    out = replace(settings)
    setattr(out, "think", think)  # noqa: B010
    setattr(out, "think_budget", budget)  # noqa: B010
    return out
