"""The plain-transcript format a base model gets: preamble, speaker stops, and the way back."""

from __future__ import annotations

from app.engine.message import MessageBody
from app.engine.prompt import DEFAULT_FRAMING, EXAMPLES, ROLE_STOPS, TemplateFormat, TranscriptFormat

CHAT = [MessageBody("user", "Hi"), MessageBody("assistant", "Hello."),
        MessageBody("user", "Name a colour.")]


def test_the_preamble_frames_the_chat_and_shows_the_examples_before_it():
    text = TranscriptFormat().render(CHAT)
    assert text.startswith(DEFAULT_FRAMING + "\n\n")
    for q, a in EXAMPLES:
        assert f"User: {q}\nAssistant: {a}\n" in text
    assert text.endswith("User: Hi\nAssistant: Hello.\nUser: Name a colour.\nAssistant:")
    assert text.index(EXAMPLES[-1][1]) < text.index("User: Hi")


def test_a_system_prompt_replaces_the_framing_but_keeps_the_examples():
    text = TranscriptFormat().render([MessageBody("system", "You are a pirate."), *CHAT])
    assert text.startswith("You are a pirate.\n\n") and DEFAULT_FRAMING not in text
    assert EXAMPLES[0][0] in text and text.count("You are a pirate.") == 1
    assert TranscriptFormat.preamble_text("You are a pirate.") in text


def test_preamble_off_is_the_bare_transcript():
    fmt = TranscriptFormat()
    assert fmt.render(CHAT, preamble=False) == \
        "User: Hi\nAssistant: Hello.\nUser: Name a colour.\nAssistant:"
    assert fmt.render([MessageBody("system", "Be brief."), *CHAT],
                      preamble=False).startswith("Be brief.\n\nUser: Hi")


def test_every_speaker_line_stops_the_reply():
    assert {"\nUser:", "\nAssistant:", "\nStudent:", "\nQ:"} <= set(TranscriptFormat().stop)
    assert TranscriptFormat(("\nUser:",)).stop == ("\nUser:",)
    assert all(s.startswith("\n") and s.endswith(":") for s in ROLE_STOPS)


def test_a_chat_template_is_used_unchanged():
    fmt = TemplateFormat("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}", "<s>", "</s>")
    assert fmt.render(CHAT) == fmt.render(CHAT, preamble=False) == \
        "<user>Hi<assistant>Hello.<user>Name a colour."
