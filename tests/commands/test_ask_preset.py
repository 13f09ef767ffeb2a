"""`llamadesk ask --preset NAME`: a preset saved in the window sets up the question (its system
prompt, sampling and reply format), a flag given as well wins, and what cannot be used is one line."""

from __future__ import annotations

import json
from dataclasses import asdict

from app.chat.presets import PresetStore, make_preset
from app.chat.reply_format import ANY_JSON, ReplyFormat
from app.engine.grammar import Constraint
from app.history.store import Store
from tests.commands.test_cli_history import listed, llamadesk, one_line_error


def test_a_preset_sets_up_the_question_and_a_flag_given_wins(model_path):
    PresetStore().save(make_preset("Terse JSON", "Reply with a JSON object only.",
                                   {"temperature": 0.0, "top_k": 7, "max_tokens": 20, "seed": 5},
                                   ReplyFormat(ANY_JSON)))
    model = ["--model", str(model_path), "--ctx", "512"]
    r = llamadesk("ask", "Name a colour.", "--preset", "terse json", "--top-k", "9", "--json", *model)
    assert r.returncode == 0, r.stderr
    assert isinstance(json.loads(json.loads(r.stdout)["text"]), dict), "held to the preset's reply format"
    cid = json.loads(r.stdout)["conversation"]
    with Store.open() as s:
        conv = s.get_conversation(cid)
    assert conv.system_prompt == "Reply with a JSON object only."
    got = conv.settings
    assert (got["temperature"], got["max_tokens"], got["seed"]) == (0.0, 20, 5), "the preset's values"
    assert got["top_k"] == 9, "the flag given wins over the preset"
    assert got["top_p"] == 0.95, "a setting neither gives keeps its usual default"
    assert got["constraint"] == asdict(Constraint.any_json())


def test_a_missing_preset_or_one_with_continue_is_refused_in_one_line_before_the_model_loads():
    PresetStore().save(make_preset("Only one"))
    line = one_line_error(llamadesk("ask", "Hi.", "--preset", "Nope", "--model", "/nonexistent.gguf"))
    assert "--preset Nope: there is no such preset (saved: «Only one»)" in line
    line = one_line_error(llamadesk("ask", "Hi.", "--preset", "Only one", "--continue", "1"))
    assert "--preset sets up a new conversation" in line
    assert listed() == []
