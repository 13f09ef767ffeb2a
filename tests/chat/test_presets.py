"""Presets without Qt: the file's round trip, a damaged or hand-edited file (nothing lost,
each problem named in one line), names, and sampling values checked as a reply checks them."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import pytest

from app import atomic_file
from app.chat.presets import (
    FILE_NAME,
    SAMPLING,
    Preset,
    PresetError,
    PresetExists,
    PresetStore,
    make_preset,
    read_presets_text,
    sampling_of,
)
from app.chat.reply_format import ANY_JSON, SCHEMA, ReplyFormat, schema_format
from app.chat.tool_set import declared_tools, make_tool_set
from app.config import AppConfig
from app.engine.sampling import GenerationSettings

CITY = {"title": "City", "type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture
def store(tmp_path) -> PresetStore:
    return PresetStore(tmp_path / FILE_NAME)


def full_preset(name: str = "City extractor") -> Preset:
    tools = make_tool_set(["calculator"], declared_tools([WEATHER]), "required")
    return make_preset(name, "Answer with the city only.",
                       {"max_tokens": 64, "temperature": 0, "top_p": 0.9, "top_k": 12, "min_p": 0.1,
                        "repeat_penalty": 1.05, "seed": 7, "dry_multiplier": 0.5},
                       schema_format(json.dumps(CITY), "city.json"), tools)


def copies(store: PresetStore) -> list:
    return sorted(p for p in store.path.parent.iterdir() if ".unusable-" in p.name)


def test_presets_come_back_as_they_were_saved_and_in_their_order(store):
    first = full_preset()
    assert store.read().presets == [] and store.read().message() is None  # no file yet: none, said nothing
    assert store.save(first) is None
    assert store.save(make_preset("Plain", "", {"temperature": 1.5}, ReplyFormat(ANY_JSON))) is None
    got = PresetStore(store.path).read()
    assert got.problems == [] and not got.unusable
    assert [p.name for p in got.presets] == ["City extractor", "Plain"]
    back = got.presets[0]
    assert back == first
    assert back.reply_format.mode == SCHEMA and json.loads(back.reply_format.schema) == CITY
    assert back.tools.builtin == ("calculator",) and back.tools.choice == "required"
    assert back.tools.declared[0]["function"]["name"] == "get_weather"
    assert back.sampling["temperature"] == 0.0 and isinstance(back.sampling["temperature"], float)
    assert got.presets[1].sampling == {"temperature": 1.5}, "a preset holds only the settings it was given"
    doc = json.loads(store.path.read_text())
    assert doc["version"] == 1 and [p["name"] for p in doc["presets"]] == ["City extractor", "Plain"]
    assert store.find("  city   EXTRACTOR ") == first, "names are found without regard to case and spaces"
    assert copies(store) == [], "a good file is never copied aside"


def test_sampling_is_the_settings_the_window_keeps_and_goes_back_onto_them():
    assert set(SAMPLING) <= {f.name for f in fields(AppConfig)}
    assert set(SAMPLING) <= {f.name for f in fields(GenerationSettings)}
    cfg = AppConfig(temperature=0.3, top_k=17, seed=-5, dry_multiplier=0.8)
    got = sampling_of(cfg)
    assert set(got) == set(SAMPLING) and got["seed"] == -1, "any negative seed is a random one: -1"
    preset = make_preset("From settings", sampling=got)
    applied = replace(AppConfig(), **preset.sampling)
    assert (applied.temperature, applied.top_k, applied.seed, applied.dry_multiplier) == (0.3, 17, -1, 0.8)
    applied.validate()
    assert "seed random" in preset.sampling_text() and "temperature 0.3" in preset.sampling_text()


@pytest.mark.parametrize(("sampling", "named"), [
    ({"temperature": -1}, "temperature must be >= 0"),
    ({"top_p": 2}, "top_p must be in (0, 1]"),
    ({"max_tokens": 0}, "max_tokens must be at least 1"),
    ({"max_tokens": 12.5}, "max_tokens must be a whole number"),
    ({"top_k": True}, "top_k must be a whole number"),
    ({"seed": -2}, "seed must be at least -1"),
    ({"min_p": "low"}, "min_p must be a number"),
    ({"repeat_penalty": float("nan")}, "repeat_penalty must be a finite number"),
    ({"dry_multiplier": -0.5}, "dry_multiplier must be >= 0"),
    ({"temperature": 10**400}, "temperature must be a finite number"),
    ({"temprature": 0.5}, "'temprature' is not a sampling setting"),
])
def test_a_bad_sampling_value_is_refused_in_one_line_naming_the_setting(sampling, named):
    with pytest.raises(PresetError) as e:
        make_preset("Bad", sampling=sampling)
    assert named in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 160


@pytest.mark.parametrize(("name", "said"), [
    ("", "needs a name"), ("   ", "needs a name"), ("two\nlines", "one line"), ("tab\there", "one line"),
    ("x" * 61, "at most 60 characters"), (None, "no name"), (42, "name is text"),
])
def test_a_name_must_be_one_short_line(name, said):
    with pytest.raises(PresetError, match=said):
        make_preset(name)
    assert make_preset("  Python   reviewer ").name == "Python reviewer"


def test_a_taken_name_is_refused_unless_replaced_and_replacing_keeps_its_place(store):
    store.save(make_preset("Coder", "v1"))
    store.save(make_preset("Writer"))
    with pytest.raises(PresetExists) as e:
        store.save(make_preset(" coder ", "v2"))
    assert e.value.existing == "Coder" and "«Coder» already exists" in str(e.value)
    assert store.find("Coder").system_prompt == "v1", "a refused save changes nothing"
    store.save(make_preset("CODER", "v2", {"top_k": 5}), replace=True)
    got = store.presets()
    assert [p.name for p in got] == ["CODER", "Writer"] and got[0].system_prompt == "v2"
    assert store.save(make_preset("New one"), replace=True) is None, "replace with no such name adds it"
    assert [p.name for p in store.presets()] == ["CODER", "Writer", "New one"]


def test_a_damaged_file_opens_with_no_presets_and_is_kept_aside_before_a_save(store):
    garbage = b'{"presets": [{"name": "Coder", "system_prompt": "Write Py'  # cut mid-write by hand
    store.path.write_bytes(garbage)
    load = store.read()
    assert load.presets == [] and load.unusable
    line = load.message()
    assert "presets.json is not valid JSON" in line and "\n" not in line and "copied aside" in line
    assert store.path.read_bytes() == garbage, "reading never writes"
    kept = store.save(make_preset("Fresh"))
    assert kept is not None and kept.read_bytes() == garbage and copies(store) == [kept]
    assert [p.name for p in store.presets()] == ["Fresh"]
    assert store.save(make_preset("Second")) is None and copies(store) == [kept], "copied once, not each save"


def test_a_bad_preset_is_skipped_and_named_and_the_others_are_kept(store):
    text = json.dumps({"version": 1, "presets": [
        {"name": "Good", "system_prompt": "Be brief.", "sampling": {"temperature": 0.2}},
        {"name": "Hot", "sampling": {"temperature": -3}},
        {"name": "Broken schema", "reply_format": {"mode": "schema", "schema": "[1, 2"}},
        {"name": "Odd tools", "tools": {"builtin": ["shell"]}},
        {"name": "good", "system_prompt": "a second Good"},
        "not a preset",
        {"system_prompt": "no name"},
        {"name": "Later", "sampling": {"top_k": 3, "temprature": 1}, "colour": "blue"},
    ]}, indent=2)
    store.path.write_text(text)
    load = store.read()
    assert [p.name for p in load.presets] == ["Good", "Later"]
    assert load.presets[1].sampling == {"top_k": 3}, "an unknown key is ignored, the rest of it kept"
    problems = load.problems
    assert any(p.startswith("«Hot» skipped (temperature must be >= 0") for p in problems)
    assert any(p.startswith("«Broken schema» skipped (the schema is not JSON") for p in problems)
    assert any(p.startswith("«Odd tools» skipped (unknown built-in tools") for p in problems)
    assert "a second «good» skipped (the name is taken by «Good»)" in problems
    assert any(p.startswith("preset 6 skipped (it is a string") for p in problems)
    assert any(p.startswith("preset 7 skipped (it has no name") for p in problems)
    assert "«Later»: unknown sampling setting 'temprature' ignored" in problems
    assert "«Later»: unknown key 'colour' ignored" in problems
    line = load.message()
    assert line.startswith("Presets: «Hot» skipped") and "\n" not in line and "and 5 more" in line
    kept = store.save(make_preset("Added"))
    assert kept is not None and kept.read_text() == text, "the file as it was, hand edits and all"
    assert [p.name for p in store.presets()] == ["Good", "Later", "Added"]
    assert store.read().problems == []


def test_a_list_alone_is_read_as_the_presets_and_anything_else_is_said():
    load = read_presets_text(b'[{"name": "Bare"}]')
    assert [p.name for p in load.presets] == ["Bare"] and not load.unusable
    load = read_presets_text(b'{"presets": {"name": "not a list"}}')
    assert load.presets == [] and load.unusable and "does not hold a list of presets" in load.message()
    load = read_presets_text(b"\xff\xfe garbage")
    assert load.presets == [] and "not valid JSON" in load.message()


def test_a_file_that_cannot_be_read_is_left_alone(store):
    store.path.mkdir()  # reading it fails as an unreadable file does, and it cannot be saved over
    load = store.read()
    assert load.presets == [] and load.unreadable and "cannot be read" in load.message()
    with pytest.raises(PresetError, match="nothing was saved"):
        store.save(make_preset("Any"))
    assert store.path.is_dir() and copies(store) == []


def test_deleting_takes_one_preset_out_and_a_missing_one_writes_nothing(store):
    store.save(make_preset("One"))
    store.save(make_preset("Two"))
    gone, kept = store.delete("one")
    assert gone is not None and gone.name == "One" and kept is None
    assert [p.name for p in store.presets()] == ["Two"]
    before = store.path.stat().st_mtime_ns
    assert store.delete("nothing such") == (None, None) and store.path.stat().st_mtime_ns == before


def test_a_second_copy_in_the_same_second_does_not_overwrite_the_first(tmp_path):
    f = tmp_path / "settings.json"
    f.write_text("first")
    a = atomic_file.keep_aside(f)
    f.write_text("second")
    b = atomic_file.keep_aside(f)
    assert a != b and a.read_text() == "first" and b.read_text() == "second"
    assert atomic_file.keep_aside(tmp_path / "missing.json") is None


def test_the_presets_live_beside_the_settings():
    assert PresetStore.beside(None).path.name == FILE_NAME
    from app.config import default_path
    assert PresetStore.beside(None).path.parent == default_path().parent
    from pathlib import Path
    assert PresetStore.beside(Path("/x/y/settings.json")).path == Path("/x/y") / FILE_NAME
