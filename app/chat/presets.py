"""Presets: a conversation's setup saved under a name, to start the next chat from.

A preset holds what makes a chat what it is, apart from its messages: the
system prompt, the sampling settings the window keeps (SAMPLING: the fields of
GenerationSettings that app.config's AppConfig stores), the reply format
(app.chat.reply_format) and the tools (app.chat.tool_set). The window saves
one from the conversation on screen and its settings, and applies one to a
new conversation (app/ui/chat/presets_menu.py); `llamadesk ask --preset`
applies one to a question.

They live in one JSON file, `presets.json` in the config folder beside the
settings, written whole or not at all (app.atomic_file). The file is read
afresh for every use, so a hand edit counts at once and two windows do not
undo each other's presets. A damaged or hand-edited file never stops the
window and is never lost, as with the settings (app.config): a preset that
cannot be used (a bad value, a schema the grammar cannot enforce, a name
already taken higher up) is skipped and named in one line, the others are
kept, and the file as it was is copied aside (`presets.json.unusable-*`)
before anything saves over it. An unknown key (a later LlamaDesk's, a typo)
is named and ignored, and the copy keeps it too. A file that cannot even be
read is left alone: nothing saves over it.

Names are what the menu shows: one line, not empty, at most NAME_MAX
characters, unique without regard to case. Saving under a name already taken
raises PresetExists unless the caller says it replaces that preset. No Qt.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app import atomic_file, paths
from app.chat.reply_format import ReplyFormat, ReplyFormatError
from app.chat.tool_set import ToolSet, ToolSetError
from app.engine.sampling import GenerationSettings
from app.errors import LlamaDeskError

log = logging.getLogger("llamadesk.presets")

FILE_NAME = "presets.json"
VERSION = 1
# The sampling settings a preset holds: the GenerationSettings fields AppConfig keeps (its seed is
# -1 for a fresh one each reply, which GenerationSettings takes too).
SAMPLING = ("max_tokens", "temperature", "top_p", "top_k", "min_p", "repeat_penalty", "seed",
            "dry_multiplier")
FLOATS = frozenset({"temperature", "top_p", "min_p", "repeat_penalty", "dry_multiplier"})
KEYS = ("name", "system_prompt", "sampling", "reply_format", "tools")
NAME_MAX = 60
SHOWN_PROBLEMS = 3  # named in the one-line message; the rest are counted


class PresetError(LlamaDeskError):
    """A preset, its name or the presets file that cannot be used, said in one line."""


class PresetExists(PresetError):
    """The name is taken (without regard to case); save again with replace=True to replace it."""

    def __init__(self, existing: str):
        self.existing = existing
        super().__init__(f"a preset named «{existing}» already exists: replace it, or choose another name")


def name_key(name: str) -> str:
    """What two names are compared by: case and surrounding spaces do not count."""
    return " ".join(name.split()).casefold()


def check_name(name) -> str:
    """The name as it will be kept (spaces trimmed and runs of them made one), or PresetError."""
    if name is None:
        raise PresetError("it has no name")
    if not isinstance(name, str):
        raise PresetError(f"a preset's name is text, not {_kind(name)}")
    if any(ch in name for ch in "\r\n\t") or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise PresetError("a preset's name is one line, without tabs or control characters")
    clean = " ".join(name.split())
    if not clean:
        raise PresetError("a preset needs a name")
    if len(clean) > NAME_MAX:
        raise PresetError(f"a preset's name is at most {NAME_MAX} characters, this one has {len(clean)}")
    return clean


def check_sampling(values: Mapping) -> dict:
    """The sampling settings among SAMPLING that `values` gives, checked as a reply would check
    them (GenerationSettings.validate: the error names the setting), whole numbers given for a
    fraction taken as one. Keys outside SAMPLING are the caller's to refuse or ignore."""
    got = {}
    for k in SAMPLING:
        if k not in values:
            continue
        v = values[k]
        if k in FLOATS and isinstance(v, int) and not isinstance(v, bool):
            try:
                v = float(v)
            except OverflowError:  # a whole number too large for a float: validate names it
                pass
        got[k] = v
    try:
        GenerationSettings(**got).validate()
    except (ValueError, OverflowError) as e:
        raise PresetError(str(e)) from None
    return got


def sampling_of(source) -> dict:
    """The SAMPLING values of anything that has them as attributes (the window's AppConfig); a
    negative seed (a fresh one each reply) is kept as -1, the one GenerationSettings takes."""
    got = {k: getattr(source, k) for k in SAMPLING}
    if isinstance(got["seed"], int) and got["seed"] < 0:
        got["seed"] = -1
    return got


@dataclass(frozen=True)
class Preset:
    name: str
    system_prompt: str = ""
    # Some or all of SAMPLING; a setting it does not hold (a hand-written preset) stays as it is.
    sampling: Mapping[str, Any] = field(default_factory=dict)
    reply_format: ReplyFormat = field(default_factory=ReplyFormat)
    tools: ToolSet = field(default_factory=ToolSet)

    def to_json(self) -> dict:
        return {"name": self.name, "system_prompt": self.system_prompt,
                "sampling": {k: self.sampling[k] for k in SAMPLING if k in self.sampling},
                "reply_format": self.reply_format.to_json(), "tools": self.tools.to_json()}

    def sampling_text(self) -> str:
        """Its sampling settings, as the Settings dialog names them; "" when it holds none."""
        return ", ".join(f"{k.replace('_', ' ')} {_show(k, self.sampling[k])}"
                         for k in SAMPLING if k in self.sampling)

    def summary(self) -> list[str]:
        """What it sets, one line a part, for a tooltip or a dialog."""
        prompt = " ".join(self.system_prompt.split())
        shown = (prompt[:77] + "…") if len(prompt) > 78 else prompt
        return [f"System prompt: {shown}" if shown else "System prompt: none",
                f"Reply format: {self.reply_format.label()}", f"Tools: {self.tools.label()}",
                f"Sampling: {self.sampling_text() or 'left as it is'}"]


def _show(key: str, value) -> str:
    if key == "seed" and value < 0:
        return "random"
    return f"{value:g}" if isinstance(value, float) else str(value)


def make_preset(name, system_prompt: str = "", sampling: Mapping | None = None,
                reply_format: ReplyFormat | None = None, tools: ToolSet | None = None) -> Preset:
    """A checked Preset (PresetError saying what is wrong): the name as check_name keeps it, the
    sampling settings as check_sampling does; anything outside SAMPLING is refused."""
    sampling = dict(sampling or {})
    unknown = [k for k in sampling if k not in SAMPLING]
    if unknown:
        raise PresetError(f"{unknown[0]!r} is not a sampling setting a preset keeps "
                          f"({', '.join(SAMPLING)})")
    if not isinstance(system_prompt, str):
        raise PresetError("the system prompt is text")
    return Preset(check_name(name), system_prompt, check_sampling(sampling),
                  reply_format or ReplyFormat(), tools or ToolSet())


def preset_from_json(d) -> tuple[Preset, list[str]]:
    """A preset as the file holds it, and the unknown keys it ignored (each named); PresetError
    saying why when it cannot be used."""
    if not isinstance(d, dict):
        raise PresetError(f"it is {_kind(d)}, not a preset object")
    return _preset_body(check_name(d.get("name")), d)


def _preset_body(name: str, d: dict) -> tuple[Preset, list[str]]:
    ignored = [f"«{name}»: unknown key {k!r} ignored" for k in d if k not in KEYS]
    prompt = d.get("system_prompt", "")
    if prompt is None:
        prompt = ""
    sampling = d.get("sampling") or {}
    if not isinstance(sampling, dict):
        raise PresetError(f"sampling is {_kind(sampling)}, not an object of settings")
    ignored += [f"«{name}»: unknown sampling setting {k!r} ignored" for k in sampling if k not in SAMPLING]
    fmt, tools = d.get("reply_format"), d.get("tools")
    if fmt is not None and not isinstance(fmt, dict):
        raise PresetError(f"reply_format is {_kind(fmt)}, not an object")
    if tools is not None and not isinstance(tools, dict):
        raise PresetError(f"tools is {_kind(tools)}, not an object")
    try:
        reply_format, tool_set = ReplyFormat.from_json(fmt), ToolSet.from_json(tools)
    except (ReplyFormatError, ToolSetError) as e:
        raise PresetError(str(e)) from None
    known = {k: v for k, v in sampling.items() if k in SAMPLING}
    return make_preset(name, prompt, known, reply_format, tool_set), ignored


def _kind(v) -> str:
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, bool):
        return "true or false"
    if isinstance(v, str):
        return "a string"
    return "null" if v is None else "a number"


def default_path() -> Path:
    return paths.config_dir() / FILE_NAME


@dataclass
class PresetsLoad:
    """The presets as read, and what in the file could not be used."""

    presets: list[Preset] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one phrase per preset skipped or key ignored
    # The file holds something a save would drop (a skipped preset, an ignored key, text that is
    # not JSON): it is copied aside before anything saves over it.
    unusable: bool = False
    unreadable: bool = False  # it could not be read at all: nothing may save over it

    def find(self, name: str) -> Preset | None:
        key = name_key(name)
        return next((p for p in self.presets if name_key(p.name) == key), None)

    def message(self) -> str | None:
        """One line for the window's message bar; None when the file was fine."""
        if not self.problems:
            return None
        shown = self.problems[:SHOWN_PROBLEMS]
        more = len(self.problems) - len(shown)
        tail = f"; and {more} more (see the log)" if more else ""
        kept = "; the file is copied aside before a preset is next saved" if self.unusable else ""
        return f"Presets: {'; '.join(shown)}{tail}{kept}."


def read_presets_text(raw: bytes, where: str = FILE_NAME) -> PresetsLoad:
    """The presets in a file's bytes: every usable one, each other one named."""
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return PresetsLoad([], [f"{where} is not valid JSON ({_short(e)}); no preset could be read"],
                           unusable=True)
    if isinstance(data, dict) and isinstance(data.get("presets"), list):
        entries, extra = data["presets"], [k for k in data if k not in ("version", "presets")]
    elif isinstance(data, list):  # a hand-written file: the list alone
        entries, extra = data, []
    else:
        return PresetsLoad([], [f"{where} does not hold a list of presets; no preset could be read"],
                           unusable=True)
    load = PresetsLoad(problems=[f"unknown key {k!r} in {where} ignored" for k in extra])
    for i, entry in enumerate(entries, 1):
        name = entry.get("name") if isinstance(entry, dict) else None
        shown = " ".join(name.split())[:NAME_MAX] if isinstance(name, str) else ""
        who = f"«{shown}»" if shown else f"preset {i}"
        try:
            preset, ignored = preset_from_json(entry)
        except PresetError as e:
            load.problems.append(f"{who} skipped ({e})")
            continue
        taken = load.find(preset.name)
        if taken is not None:
            load.problems.append(f"a second «{preset.name}» skipped (the name is taken by «{taken.name}»)")
            continue
        load.problems += ignored
        load.presets.append(preset)
    load.unusable = bool(load.problems)
    return load


def _short(e: Exception) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text if len(text) <= 80 else text[:77] + "..."


class PresetStore:
    """The presets file: read afresh for every use, saved whole (path-injectable for tests)."""

    def __init__(self, path: Path | None = None):
        self._path = path
        self._logged: set[str] = set()  # problems already in the log: read again, not said again

    @classmethod
    def beside(cls, settings_path: Path | None) -> PresetStore:
        """The presets beside a settings file given by path (a test's, the GUI benchmark's); None:
        the config folder's, found when it is used (tests move XDG_CONFIG_HOME)."""
        return cls(settings_path.with_name(FILE_NAME) if settings_path is not None else None)

    @property
    def path(self) -> Path:
        return self._path or default_path()

    def read(self) -> PresetsLoad:
        path = self.path
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return PresetsLoad()
        except OSError as e:  # unreadable is not damaged: the file is left alone, and said so
            return PresetsLoad([], [f"{path} cannot be read ({e.strerror or e}); it is left as it is"],
                               unreadable=True)
        load = read_presets_text(raw, path.name)
        for problem in load.problems:
            if problem not in self._logged:
                self._logged.add(problem)
                log.warning("presets file %s: %s", path, problem)
        return load

    def presets(self) -> list[Preset]:
        return self.read().presets

    def find(self, name: str) -> Preset | None:
        return self.read().find(name)

    def save(self, preset: Preset, replace: bool = False) -> Path | None:
        """Add `preset`, or put it in the place of the one of its name when `replace`; PresetExists
        if the name is taken and not `replace`. Returns where the file as it was is kept, when
        it held something unusable (None: nothing needed keeping)."""
        load = self._writable()
        taken = load.find(preset.name)
        if taken is not None and not replace:
            raise PresetExists(taken.name)
        if taken is None:
            presets = [*load.presets, preset]
        else:
            presets = [preset if p is taken else p for p in load.presets]
        return self._write(load, presets)

    def delete(self, name: str) -> tuple[Preset | None, Path | None]:
        """Remove the preset of that name; returns it (None: there was none, and nothing is
        written) and where the file as it was is kept, as `save` does."""
        load = self._writable()
        gone = load.find(name)
        if gone is None:
            return None, None
        return gone, self._write(load, [p for p in load.presets if p is not gone])

    def _writable(self) -> PresetsLoad:
        load = self.read()
        if load.unreadable:
            raise PresetError(f"{load.problems[0]}: nothing was saved")
        return load

    def _write(self, load: PresetsLoad, presets: Iterable[Preset]) -> Path | None:
        path = self.path
        kept = None
        if load.unusable and path.exists():
            kept = atomic_file.keep_aside(path)
            if kept is None:
                raise PresetError(f"could not keep a copy of {path} (it holds presets that could not "
                                  "be read), so nothing was saved over it")
        doc = {"version": VERSION, "presets": [p.to_json() for p in presets]}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_file.write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        except OSError as e:
            raise PresetError(f"could not save {path}: {e.strerror or e}") from None
        return kept

