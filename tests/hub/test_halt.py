"""The stop token a window pauses and cancels a pull with: the same Paused as Ctrl+C, the partial
kept at the journaled byte, a resume that fetches only what is missing, and a halt during the
sha256 check that keeps every byte."""

from __future__ import annotations

import threading

import pytest

from app.hub import library, pull
from app.hub.journal import Ranges
from app.hub.ranged import client
from tests.hub.conftest import TINY
from tests.hub.helpers import byte_ranges, journal_ranges, sha256


def test_a_halt_pauses_mid_file_and_the_next_run_fetches_only_the_gaps(hub):
    f = hub.repos[TINY].file("tiny-Q4_K_M.gguf")
    hub.gate_after = 6 << 20  # the transfer stalls once 6 MB have gone out
    halt = threading.Event()
    seen: list[int] = []
    with client() as http:
        plan = pull.plan(http, f"{TINY}:Q4_K_M")

        def progress(phase, done, total):
            seen.append(done)
            if done > 0 and hub.sent() > 6 << 20:
                halt.set()  # what the window's Pause button does, from another thread

        with pytest.raises(pull.Paused) as e:
            pull.run(http, plan, 4, progress, halt)
    hub.gate.set()
    held = journal_ranges(TINY, f.sha256)
    assert e.value.done == held.total() and 0 < held.total() < f.size
    assert e.value.size == f.size
    [part] = library.partials()
    assert part.sha256 == f.sha256 and part.done == held.total()
    assert plan.installed is None

    hub.reset()
    with client() as http:
        again = pull.plan(http, f"{TINY}:Q4_K_M")
        assert again.done == held.total()
        out = pull.run(http, again, 4, None, threading.Event())
    assert out.resumed_at == held.total() and out.fetched == f.size - held.total()
    assert sha256(out.path) == f.sha256 and not library.partials()
    cdn = hub.served("/cdn/")[1:]  # after the plan's header read
    assert Ranges(byte_ranges(cdn)).pairs() == Ranges(held.gaps(f.size)).pairs()


def test_a_halt_during_the_sha256_check_keeps_every_byte(hub):
    f = hub.repos[TINY].file("tiny-Q4_K_M.gguf")
    halt = threading.Event()

    def progress(phase, done, total):
        if phase == "verify":
            halt.set()

    with client() as http:
        plan = pull.plan(http, f"{TINY}:Q4_K_M")
        with pytest.raises(pull.Paused) as e:
            pull.run(http, plan, 2, progress, halt)
    assert e.value.done == e.value.size == f.size
    [part] = library.partials()
    assert part.done == f.size  # the journal holds every byte: only the check is left
    hub.reset()
    with client() as http:
        out = pull.run(http, pull.plan(http, f"{TINY}:Q4_K_M"), 2)
    assert out.fetched == 0 and out.resumed_at == f.size and sha256(out.path) == f.sha256
    assert not hub.served("/cdn/")[1:]  # nothing transferred again, only checked
