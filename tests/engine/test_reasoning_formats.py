"""Which thinking format a real chat template speaks, and how its switches leave the prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.message import MessageBody
from app.engine.prompt import TemplateFormat
from app.engine.reasoning_formats import CLOSED, FREE, OPEN, TemplateThinking, detect, tail_state

TEMPLATES = Path(__file__).parent.parent / "data" / "templates"


def read(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text()


@pytest.mark.parametrize(("name", "fmt"), [
    ("Qwen-Qwen3-0.6B", "think-tags"),
    ("Qwen3.5-4B", "think-tags"),
    ("Qwen-QwQ-32B", "think-tags"),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "think-tags"),
    ("HuggingFaceTB-SmolLM3-3B", "think-tags"),
    ("mistralai-Ministral-3-14B-Reasoning-2512", "think-brackets"),
    ("openai-gpt-oss-120b", "harmony"),
    ("google-gemma-4-31B-it", "gemma4"),
])
def test_a_thinking_template_names_its_format(name, fmt):
    assert detect(read(name)).name == fmt


@pytest.mark.parametrize("name", ["google-gemma-2-2b-it", "meta-llama-Llama-3.2-3B-Instruct"])
def test_a_template_without_markers_has_no_format(name):
    assert detect(read(name)) is None
    assert TemplateThinking.read(read(name)) is None


def test_half_a_format_is_not_guessed():
    assert detect("{{ '<think>' }}{{ messages[0].content }}") is None  # no closing marker
    assert detect("") is None and detect(None) is None


@pytest.mark.parametrize(("name", "switch", "efforts", "default", "on", "off"), [
    # Qwen3 leaves <think> to the model; off closes an empty block in the prompt.
    ("Qwen-Qwen3-0.6B", True, (), FREE, FREE, CLOSED),
    # Qwen3.5 opens <think> itself: the reply starts inside its reasoning.
    ("Qwen3.5-4B", True, (), OPEN, OPEN, CLOSED),
    # This R1 distill's template thinks only when asked (its default closes the block).
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", True, (), CLOSED, OPEN, CLOSED),
    ("HuggingFaceTB-SmolLM3-3B", True, (), FREE, FREE, CLOSED),
    # Gemma 4 does not think unless enable_thinking is set.
    ("google-gemma-4-31B-it", True, (), CLOSED, FREE, CLOSED),
    # No switch: the model writes [THINK] when it wants to.
    ("mistralai-Ministral-3-14B-Reasoning-2512", False, (), FREE, FREE, FREE),
    # gpt-oss always thinks, at an effort level.
    ("openai-gpt-oss-120b", False, ("low", "medium", "high"), FREE, FREE, FREE),
])
def test_switches_and_where_the_generation_prompt_leaves_the_reply(name, switch, efforts, default, on, off):
    t = TemplateThinking.read(read(name), "<s>", "</s>")
    assert (t.switch, t.efforts) == (switch, efforts)
    assert t.state({}) == default
    assert t.state(t.kwargs(True)) == on
    assert t.state(t.kwargs(False)) == off
    assert t.default_on() == (default != CLOSED)


def test_think_settings_become_the_templates_own_kwargs():
    qwen = TemplateThinking.read(read("Qwen-Qwen3-0.6B"))
    assert qwen.kwargs(None) == {}
    assert qwen.kwargs(False) == {"enable_thinking": False}
    assert qwen.kwargs("high") == {"enable_thinking": True}  # a level without levels means on
    oss = TemplateThinking.read(read("openai-gpt-oss-120b"))
    assert oss.kwargs("low") == {"reasoning_effort": "low"}
    assert oss.kwargs(False) == {}  # no switch is invented: it thinks as it always does
    prompt = oss._fmt(messages=[{"role": "user", "content": "hi"}], **oss.kwargs("high")).prompt
    assert "Reasoning: high" in prompt


def test_tail_state_reads_the_last_block():
    fmt = detect(read("Qwen-Qwen3-0.6B"))
    assert tail_state("<|im_start|>assistant\n", fmt) == FREE
    assert tail_state("<|im_start|>assistant\n<think>\n", fmt) == OPEN
    assert tail_state("<|im_start|>assistant\n<think>\n\n</think>\n\n", fmt) == CLOSED


@pytest.mark.parametrize("name", ["Qwen-Qwen3-0.6B", "Qwen3.5-4B", "openai-gpt-oss-120b",
                                  "google-gemma-4-31B-it", "mistralai-Ministral-3-14B-Reasoning-2512"])
def test_an_earlier_turns_reasoning_stays_out_of_the_next_prompt(name):
    fmt = TemplateFormat(read(name), "<s>", "</s>")
    chat = [MessageBody("user", "Hi"), MessageBody("assistant", "Hello.", reasoning="SECRET PLAN"),
            MessageBody("user", "Again")]
    prompt = fmt.render(chat)
    assert "Hello." in prompt and "SECRET PLAN" not in prompt


def test_reasoning_after_the_last_user_turn_is_kept_where_the_template_keeps_it():
    # Qwen3 shows the reasoning of the turns since the user's last message (a tool loop's).
    fmt = TemplateFormat(read("Qwen-Qwen3-0.6B"), "<s>", "</s>")
    chat = [MessageBody("user", "Hi"), MessageBody("assistant", "Calling.", reasoning="SECRET PLAN"),
            MessageBody("tool", "42", tool_call_id="1", tool_name="calc")]
    assert "<think>\nSECRET PLAN\n</think>" in fmt.render(chat)
