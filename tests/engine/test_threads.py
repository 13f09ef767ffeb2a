"""Thread counts: auto prefills on every core and, where the window asks, decodes on all but one."""

from __future__ import annotations

import os

import llama_cpp

from app.config import AppConfig
from app.engine.loader import LoadOptions, load_model


def test_auto_spares_a_core_for_decode_only_and_a_number_sets_both():
    cores = os.cpu_count() or 1
    assert (LoadOptions().threads(), LoadOptions().batch_threads()) == (cores, cores)
    spare = LoadOptions(spare_core=True)
    assert (spare.threads(), spare.batch_threads()) == (max(1, cores - 1), cores)
    assert (LoadOptions(n_threads=3, spare_core=True).threads(),
            LoadOptions(n_threads=3, spare_core=True).batch_threads()) == (3, 3)
    assert AppConfig().load_options().spare_core  # the window's auto
    assert AppConfig(n_threads=2).load_options().threads() == 2


def test_llama_cpp_gets_the_two_counts(model_path):
    cores = os.cpu_count() or 1
    m = load_model(model_path, LoadOptions(n_ctx=256, spare_core=True))
    try:
        ctx = m.llm.ctx
        assert llama_cpp.llama_n_threads(ctx) == max(1, cores - 1) == m.report.n_threads
        assert llama_cpp.llama_n_threads_batch(ctx) == cores == m.report.n_threads_batch
        if cores > 1:
            assert m.report.threads_text == f"threads {cores - 1} decode, {cores} prefill"
    finally:
        m.close()
