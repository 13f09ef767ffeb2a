"""`llamadesk bench` picks one benchmark per run; two mode flags are a usage error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.bench import engine as engine_bench
from app.cli import main


def test_two_modes_are_refused_by_argparse_with_one_error_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--gui", "--batch"])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and err.rstrip("\n").splitlines()[-1] == errors[0]
    assert "--gui" in errors[0] and "--batch" in errors[0] and "Traceback" not in err
    assert out == ""


def test_no_mode_runs_the_engine_bench(monkeypatch, capsys):
    calls = []

    def fake(model, opts, tokens, rounds):
        calls.append((tokens, rounds))
        return {"ran": "engine"}

    monkeypatch.setattr(engine_bench, "run_engine_bench", fake)
    assert main(["bench", "--tokens", "8", "--rounds", "1"]) == 0
    assert calls == [(8, 1)] and "engine" in capsys.readouterr().out


def test_markdown_picks_the_reply_of_the_gui_bench(monkeypatch, capsys):
    from app.bench import gui as gui_bench

    calls = []

    def fake(model, opts, tokens, markdown=False):
        calls.append((tokens, markdown))
        return {"ran": "gui"}

    monkeypatch.setattr(gui_bench, "run_gui_bench", fake)
    assert main(["bench", "--gui", "--markdown"]) == 0
    assert main(["bench", "--gui"]) == 0
    assert calls == [(1024, True), (1024, False)]


def test_markdown_without_gui_is_refused(capsys):
    assert main(["bench", "--markdown"]) == 2  # a usage error
    out, err = capsys.readouterr()
    assert "--gui" in err and "Traceback" not in err and out == ""


@pytest.mark.parametrize("flags", [["--store", "--messages", "-1"], ["--store", "--rounds", "0"],
                                   ["--tokens", "0"]])
def test_a_number_out_of_range_is_one_line_exit_2(flags):
    r = subprocess.run([sys.executable, "-m", "app", "bench", *flags], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "must be" in r.stderr
