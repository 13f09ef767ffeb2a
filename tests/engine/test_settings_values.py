"""Sampling values llama.cpp cannot take are refused in one line naming them, wherever they come from."""

from __future__ import annotations

import json
import math

import pytest

from app.cli import main
from app.config import load_config
from app.engine.sampling import INT32_MAX, SEED_MAX, GenerationSettings

FLOATS = ("temperature", "top_p", "min_p", "repeat_penalty")


def one_line_naming(err: Exception, name: str) -> str:
    msg = str(err)
    assert name in msg and "\n" not in msg and len(msg) < 150, msg
    return msg


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 10**400])
def test_non_finite_floats_are_refused(name, value):
    with pytest.raises(ValueError) as e:
        GenerationSettings(**{name: value}).validate()
    assert "finite" in one_line_naming(e.value, name)


@pytest.mark.parametrize(("name", "value"), [
    ("max_tokens", 0), ("max_tokens", INT32_MAX + 1), ("max_tokens", 10**30), ("max_tokens", 5.0),
    ("max_tokens", True), ("max_tokens", math.inf), ("top_k", -1), ("top_k", INT32_MAX + 1),
    ("top_k", True), ("seed", -2), ("seed", SEED_MAX + 1), ("seed", 2**64), ("seed", 1.5),
    ("temperature", "0.5"), ("temperature", True), ("temperature", -0.1), ("top_p", 0.0),
    ("min_p", 1.5), ("repeat_penalty", 0.0),
])
def test_out_of_range_or_wrong_type_is_refused(name, value):
    with pytest.raises(ValueError) as e:
        GenerationSettings(**{name: value}).validate()
    one_line_naming(e.value, name)


@pytest.mark.parametrize("kw", [
    {"max_tokens": 1}, {"max_tokens": INT32_MAX}, {"top_k": 0}, {"top_k": INT32_MAX}, {"seed": -1},
    {"seed": 0}, {"seed": SEED_MAX}, {"temperature": 0}, {"temperature": 2}, {"top_p": 1},
    {"min_p": 0}, {"repeat_penalty": 1e6},
])
def test_edge_values_that_work_are_kept(kw):
    GenerationSettings(**kw).validate()


def run_cli(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("llamadesk: error: ") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("flag", "value"), [
    ("--temperature", "nan"), ("--temperature", "inf"), ("--top-p", "nan"), ("--min-p", "NaN"),
    ("--repeat-penalty", "infinity"), ("--max-tokens", str(2**40)), ("--seed", str(2**40)),
    ("--seed", "-7"), ("--top-k", str(10**12)), ("--ctx", str(2**32 + 512)), ("--threads", "100000"),
    ("--gpu-layers", str(2**40)),
])
@pytest.mark.parametrize("command", ["ask", "batch"])
def test_cli_refuses_before_anything_loads(capsys, tmp_path, command, flag, value):
    """--model names a file that does not exist: reaching the load would fail on it instead."""
    model = str(tmp_path / "missing.gguf")
    inp, out = tmp_path / "in.txt", tmp_path / "out.jsonl"
    inp.write_text("Say hi.\n")
    argv = ["ask", "hi", "--no-save"] if command == "ask" else ["batch", str(inp), "-o", str(out)]
    err = run_cli(capsys, *argv, "--model", model, f"{flag}={value}")
    name = flag.lstrip("-").replace("-", "_")
    assert flag in err or name in err, err
    assert "missing.gguf" not in err and not out.exists()


@pytest.mark.parametrize(("args", "said"), [
    (["--parallel", "1000"], "--parallel must be between 1 and 255, got 1000"),
    (["--parallel", "256"], "got 256"),
    (["--parallel", "0"], "got 0"),
    (["--ctx", "32"], "--ctx must be between 64"),
    (["--ctx", "1000000000", "--parallel", "32"], "needs 33000000000 tokens"),
])
def test_batch_slots_are_checked_as_typed_before_loading(capsys, tmp_path, args, said):
    inp, out = tmp_path / "in.txt", tmp_path / "out.jsonl"
    inp.write_text("Say hi.\n")
    err = run_cli(capsys, "batch", str(inp), "-o", str(out), "--model", str(tmp_path / "no.gguf"), *args)
    assert said in err and not out.exists()


def test_batch_ctx_beyond_the_models_training_is_refused_before_loading(capsys, tmp_path, model_path):
    """Its cache could be more memory than the machine has: the kernel would kill the run unannounced."""
    inp, out = tmp_path / "in.txt", tmp_path / "out.jsonl"
    inp.write_text("Say hi.\n")
    err = run_cli(capsys, "batch", str(inp), "-o", str(out), "--model", str(model_path),
                  "--ctx", "60000000", "--parallel", "1")
    assert "--ctx 60000000 is longer than the model's training context" in err and not out.exists()


def test_imported_settings_with_nan_fall_back_to_defaults(tmp_path):
    f = tmp_path / "settings.json"
    f.write_text('{"temperature": NaN, "top_p": Infinity, "max_tokens": 128}')
    cfg = load_config(f)
    assert cfg.temperature == GenerationSettings.temperature and cfg.top_p == GenerationSettings.top_p
    f.write_text(json.dumps({"seed": 2**40}))
    assert load_config(f).seed == -1
