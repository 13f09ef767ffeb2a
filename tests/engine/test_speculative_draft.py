"""A draft model guessing for its target: the bundled Q4_K_M model drafting for a Q8_0 copy of
itself (llama-quantize), the only same-vocabulary pair this machine has. It tests correctness and
the bookkeeping; a speedup needs a draft much cheaper than its target, which this pair is not."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.bench.fit import requantize
from app.engine.decoder import Decoder
from app.engine.loader import LoadOptions, load_model
from app.engine.sampling import GenerationSettings
from tests.engine.spec_replay import replay

pytestmark = [pytest.mark.model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Question: What do bees make?\nAnswer:"


@pytest.fixture(scope="module")
def q8(model_path, tmp_path_factory) -> Path:
    return requantize(model_path, tmp_path_factory.mktemp("q8") / "gemma-3-270m-Q8_0.gguf")


@pytest.fixture(scope="module")
def target(q8):
    m = load_model(q8, LoadOptions(n_ctx=1024))
    yield m
    m.close()


def test_a_draft_models_guesses_leave_the_targets_greedy_choice_in_every_row(target, model_path):
    dec = Decoder(target)
    dec.reset()
    dec.attach_draft(load_model(model_path, LoadOptions(n_ctx=1024)))
    try:
        prompt = dec.tokenize(PROMPT)
        s = GenerationSettings(max_tokens=40, temperature=0, repeat_penalty=1.0, ignore_eos=True,
                               speculative="draft")
        done = dec.generate(prompt, s)
        spec = dec.last_speculation
        st = done.stats
        assert st.spec_mode == "draft" and spec is not None and spec.checks
        # Two quantizations of one model mostly agree: most guesses are kept.
        assert st.draft_accepted > st.draft_tokens // 2
        assert dec.kv_used() == len(dec.tokens) == len(prompt) + 39
        pairs = replay(dec, prompt, list(done.tokens), spec.checks)
        assert [r for r, _ in pairs] == [m for _, m in pairs]
    finally:
        dec.close()


def _small_model(tmp: Path) -> Path:
    spec = importlib.util.spec_from_file_location("gpu_check_model",
                                                  ROOT / "packaging" / "gpu_check_model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp / "other-vocab.gguf"
    mod.write_model(out, "small")
    return out


def test_a_draft_with_another_vocabulary_is_refused_saying_why(target, tmp_path):
    dec = Decoder(target)
    try:
        with pytest.raises(ValueError, match=r"other-vocab.gguf cannot draft for this model: its "
                                             r"vocabulary has 32000 tokens, the model's 262144"):
            dec.attach_draft(load_model(_small_model(tmp_path), LoadOptions(n_ctx=256)))
        assert dec.draft is None
        with pytest.raises(Exception, match="needs one"):
            dec.generate(dec.tokenize(PROMPT), GenerationSettings(max_tokens=4, speculative="draft"))
    finally:
        dec.close()


def _ask(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "ask", "--no-save", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


@pytest.mark.subprocess
def test_ask_with_a_draft_model_says_what_speculating_was_worth(q8, model_path):
    r = _ask("--model", str(q8), "--draft-model", str(model_path), "--temperature", "0",
             "--max-tokens", "24", "--json", "What do bees make?")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)["stats"]
    assert st["spec_mode"] == "draft" and st["draft_tokens"] >= st["draft_accepted"] > 0
    r = _ask("--model", str(q8), "--speculative", "draft", "Hi")
    assert r.returncode == 2
    assert r.stderr.strip() == "llamadesk: error: --speculative draft needs --draft-model FILE"
