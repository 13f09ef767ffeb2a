"""`llamadesk serve --speculative ngram` through the official `openai` package: a request decoding
alone has its guesses checked and its reply is the model's own choice in every row, its timings
and /metrics count the guesses, and a request whose steps are all shared checks none."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading

import pytest

from tests.engine.test_speculative import EDIT
from tests.remote.servers import free_port
from tests.serve.conftest import MODEL_ID, openai_client, start_serve
from tests.serve.harness import serve_args, serve_env
from tests.serve.test_metrics_scrape import scrape

# The chat decoder's editing prompt, as a raw completion: the bundled model is a base model, and a
# chat transcript's reply seldom repeats the text it is given.
# Greedy, no repeat penalty: each token is its row's argmax, which the logprobs' top shows.
GREEDY = {"temperature": 0, "logprobs": 2, "extra_body": {"repeat_penalty": 1.0, "ignore_eos": True}}


@pytest.fixture(scope="module")
def spec_serve(model_path):
    srv = start_serve(model_path, tempfile.mkdtemp(prefix="llamadesk-spec-"), "--parallel", "2",
                      "--speculative", "ngram")
    yield srv
    srv.stop()


@pytest.fixture
def spec_client(spec_serve):
    with openai_client(spec_serve) as c:
        yield c


def _complete(client, max_tokens: int, **kw):
    return client.completions.create(model=MODEL_ID, prompt=EDIT, max_tokens=max_tokens, **GREEDY, **kw)


def _tokens(reply) -> list[tuple[str, float, dict[str, float]]]:
    lp = reply.choices[0].logprobs
    return list(zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True))


def test_an_editing_reply_alone_is_checked_counted_and_the_models_own(spec_serve, spec_client, client):
    before = scrape(spec_serve.base)
    r = _complete(spec_client, 64)
    after = scrape(spec_serve.base)
    t = r.model_extra["timings"]
    assert r.usage.completion_tokens == t["predicted_n"] == 64
    assert 0 < t["draft_n_accepted"] <= t["draft_n"], t
    toks = _tokens(r)
    assert all(tok == max(top, key=top.get) for tok, _, top in toks)  # each row's greedy choice

    def grew(name: str, labels=frozenset()) -> float:
        return after.get((name, labels), 0.0) - before.get((name, labels), 0.0)

    mn = frozenset({("model_name", MODEL_ID)})
    assert grew("llamacpp:spec_decode_num_draft_tokens_total") == grew(
        "vllm:spec_decode_num_draft_tokens_total", mn) == t["draft_n"]
    assert grew("llamacpp:spec_decode_num_accepted_tokens_total") == grew(
        "vllm:spec_decode_num_accepted_tokens_total", mn) == t["draft_n_accepted"]
    per_pos = [grew("llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
                    frozenset({("position", str(i))})) for i in range(8)]
    assert sum(per_pos) == t["draft_n_accepted"]
    checks = grew("llamacpp:spec_decode_num_drafts_total")
    assert checks == grew("vllm:spec_decode_num_drafts_total", mn) and 0 < checks <= t["draft_n"]

    # The same request to the plain server: the same text, or parted only where the plain reply's
    # two likeliest tokens were nearly tied (a check's batch shape rounds its logits differently).
    plain = _complete(client, 64)
    assert "draft_n" not in plain.model_extra["timings"]
    ours = _tokens(plain)
    at = next((i for i, (a, b) in enumerate(zip(toks, ours, strict=True)) if a[0] != b[0]), None)
    if at is not None:
        theirs = ours[at][2]
        assert toks[at][0] in theirs and ours[at][1] - theirs[toks[at][0]] < 0.05, (at, toks[at], ours[at])


def test_a_request_whose_steps_are_all_shared_checks_no_guess(spec_serve, spec_client):
    started = threading.Event()
    long_reply: dict = {}

    def long_request():
        stream = _complete(spec_client, 96, stream=True, stream_options={"include_usage": True})
        for ch in stream:
            started.set()
            if ch.usage:
                long_reply["timings"] = ch.model_extra["timings"]

    th = threading.Thread(target=long_request)
    th.start()
    try:
        assert started.wait(60)
        # Arrives while the long reply decodes and ends long before it: every step it has is shared.
        short = _complete(spec_client, 6)
    finally:
        th.join(120)
    t = short.model_extra["timings"]
    assert t["predicted_n"] == 6 and t["draft_n"] == t["draft_n_accepted"] == 0
    assert long_reply["timings"]["predicted_n"] == 96  # and it decoded alone before and after


@pytest.mark.parametrize("args, says", [
    (("--speculative", "draft"), "--speculative draft needs --draft-model FILE"),
    (("--speculative", "ngram", "--draft-model", "x.gguf"), "--draft-model guesses with --speculative draft"),
])
def test_speculative_flags_that_cannot_work_are_one_line_before_the_model_loads(model_path, args, says):
    r = subprocess.run([sys.executable, "-m", "app", "serve", "--model", str(model_path), *args],
                       capture_output=True, text=True, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("llamadesk: error: ") and says in lines[0]


def test_a_draft_model_of_another_vocabulary_is_refused_in_one_line(model_path, tmp_path):
    from tests.engine.test_speculative_draft import _small_model

    args = serve_args(model_path, free_port(), "--draft-model", str(_small_model(tmp_path)))
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, env=serve_env(tmp_path))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0] == ("llamadesk: error: other-vocab.gguf cannot draft for this model: its vocabulary has "
                        "32000 tokens, the model's 262144")


def test_timings_carry_llama_servers_draft_fields_only_from_a_speculating_server():
    from app.serve.protocol import timings
    from app.slots.types import SlotStats

    t = timings(SlotStats(completion_tokens=9, spec_mode="ngram", draft_tokens=7, draft_accepted=5))
    assert (t["draft_n"], t["draft_n_accepted"]) == (7, 5)
    assert "draft_n" not in timings(SlotStats(completion_tokens=9))


def test_a_draft_model_guesses_for_a_request_alone(model_path):
    """The bundled model drafting for itself: the wiring of --draft-model, whose guesses are kept."""
    srv = start_serve(model_path, tempfile.mkdtemp(prefix="llamadesk-draft-"), "--parallel", "1",
                      "--draft-model", str(model_path))
    try:
        with openai_client(srv) as c:
            r = _complete(c, 24)
    finally:
        srv.stop()
    t = r.model_extra["timings"]
    assert t["predicted_n"] == 24 and 0 < t["draft_n_accepted"] <= t["draft_n"], t
    assert all(tok == max(top, key=top.get) for tok, _, top in _tokens(r))
