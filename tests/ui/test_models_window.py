"""The Models window against the local Hub (tests/hub): a search's rows with fit labels, a real
download of the bundled model that becomes a model in the list, the picker and the chat, Pause
then Resume to the Hub's sha256, Cancel leaving nothing, one line for each failure, Delete
saying what it freed."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.gguf import human_size
from app.hub import library
from app.ui.models.service import HubService
from app.ui.models.transfer import SCALE
from app.ui.models.window import ModelsWindow
from tests.hub import conftest as hub_fixtures
from tests.hub.conftest import GATED, GEMMA, TINY
from tests.hub.helpers import models_tree, sha256
from tests.ui.conftest import small_config

# The local Hub's fixtures, as tests/hub has them.
mirror, quantized_q8, hub = hub_fixtures.mirror, hub_fixtures.quantized_q8, hub_fixtures.hub

TINY_Q4 = f"{TINY}:tiny-Q4_K_M.gguf"


@pytest.fixture
def models(qtbot, hub):
    service = HubService()
    w = ModelsWindow(service, lambda: (4096, 0))
    qtbot.addWidget(w)
    with qtbot.waitSignal(service.listed, timeout=10_000):
        w.show()
    yield w
    hub.gate.set()
    assert service.shutdown(), "a Hub thread was still running"


def test_a_search_shows_each_file_with_its_quant_size_and_fit(qtbot, models, hub):
    with qtbot.waitSignal(models.service.found, timeout=60_000):
        models.query.setText("GGUF")
        models.search_button.click()
    rows = models.results.rows()
    gemma = [r for r in rows if r[0] == GEMMA]
    assert [(r[1], r[2]) for r in gemma] == [("gemma-3-270m-Q4_K_M.gguf", "Q4_K_M"),
                                             ("gemma-3-270m-Q8_0.gguf", "Q8_0")]
    for _repo, name, _quant, size, fit in gemma:
        assert size == human_size(hub.repos[GEMMA].file(name).size)
        assert fit.startswith("fits · needs ") and fit.endswith(" free"), fit
    assert not any("mmproj" in r[1] for r in rows)  # a projector is no model
    [gated] = [r for r in rows if r[0] == GATED]
    assert gated[4] == "?"  # its header cannot be read without access
    tops = [models.results.topLevelItem(i) for i in range(models.results.topLevelItemCount())]
    assert "gated: needs HF_TOKEN" in next(t for t in tops if t.text(0) == GATED).text(3)
    assert models.results.buttons[f"{GEMMA}:gemma-3-270m-Q4_K_M.gguf"].isEnabled()
    assert models.status.text() == "3 repositories, 5 files for 'GGUF'"


def test_a_download_becomes_a_model_in_the_list_and_the_picker_and_the_chat_uses_it(qtbot, hub, model_path):
    from app.ui.window import MainWindow

    win = MainWindow(model=str(model_path), config=small_config(), persist=False, history=False,
                     autoload=False)
    qtbot.addWidget(win)
    win.show()
    w = win.models.open()
    f = hub.repos[GEMMA].file("gemma-3-270m-Q4_K_M.gguf")
    seen: list[str] = []
    w.service.progress.connect(lambda _job, _phase, _done, _total: seen.append(w.transfer.detail.text()))
    hub.pace = 30e6  # a few seconds in all, so the rate has time to show however fast this machine is
    with qtbot.waitSignal(w.library_changed, timeout=180_000):
        w.download(f"{GEMMA}:{f.name}")
    path = library.snapshot_path(GEMMA, hub.repos[GEMMA].commit, f.name).resolve()
    assert sha256(path) == f.sha256
    assert any(f" of {human_size(f.size)} · " in t and "/s · " in t and " left" in t for t in seen), seen[-5:]
    assert any(t.startswith("checking the file against the Hub's sha256") for t in seen)
    assert w.transfer.bar.value() == SCALE and w.transfer.detail.text() == f"done, sha256 checked: {path}"
    qtbot.waitUntil(lambda: str(path) in w.library.downloaded_paths(), timeout=10_000)
    assert w.library.models.text(0) == "Downloaded models (1)"
    assert w.library.models.text(1) == human_size(f.size)
    assert str(path) in [p for _label, p in win.model_bar.entries()]  # the picker lists it
    with qtbot.waitSignal(win.model_loaded, timeout=60_000) as got:
        w.library.use_buttons[str(path)].click()
    assert Path(got.args[0].path).resolve() == path and win.model_path == str(path)
    assert win.model_bar.entries()[win.model_bar.combo.currentIndex()][1] == str(path)
    qtbot.waitUntil(lambda: w.library.use_buttons[str(path)].text() == "In use", timeout=10_000)
    assert not w.library.delete_buttons[str(path)].isEnabled()  # not deleted from under the chat
    win.close()


def test_pause_then_resume_finishes_with_the_hubs_sha256(qtbot, models, hub):
    f = hub.repos[TINY].file("tiny-Q4_K_M.gguf")
    s, t = models.service, models.transfer
    hub.gate_after = 6 << 20  # the transfer stalls once 6 MB have gone out
    with qtbot.waitSignal(s.planned, timeout=30_000):
        models.download(TINY_Q4)
    qtbot.waitUntil(lambda: hub.sent() > 6 << 20 and t.bar.value() > 0, timeout=30_000)
    assert t.pause_button.text() == "Pause" and t.cancel_button.isEnabled()
    with qtbot.waitSignal(s.paused, timeout=30_000) as got:
        t.pause_button.click()
    hub.gate.set()
    _job, kept, size = got.args
    assert 0 < kept < size == f.size
    assert t.pause_button.text() == "Resume" and t.detail.text().startswith(f"paused with {human_size(kept)}")
    [part] = library.partials()
    assert part.done == kept and not library.downloaded()
    qtbot.waitUntil(lambda: models.library.partial_names() == ["tiny-Q4_K_M.gguf"], timeout=10_000)
    hub.reset()
    with qtbot.waitSignal(s.done, timeout=60_000) as fin:
        t.pause_button.click()  # Resume
    assert models.job.resumed_at == kept  # from the byte it stopped at, not from 0
    assert sha256(Path(fin.args[1])) == f.sha256 and not library.partials()
    qtbot.waitUntil(lambda: models.library.partial_names() == [], timeout=10_000)


def _drained(qtbot, hub) -> None:
    while True:
        sent = hub.sent()
        qtbot.wait(300)
        if hub.sent() == sent:
            return


def test_cancel_leaves_nothing_visible_as_a_model(qtbot, models, hub):
    s, t = models.service, models.transfer
    hub.gate_after = 4 << 20
    with qtbot.waitSignal(s.planned, timeout=30_000):
        models.download(TINY_Q4)
    qtbot.waitUntil(lambda: hub.sent() > 4 << 20 and bool(library.partials()), timeout=30_000)
    with qtbot.waitSignal(s.cancelled, timeout=30_000) as got:
        t.cancel_button.click()  # while it runs
    hub.gate.set()
    assert got.args[1] > 0 and "its partial download is removed" in models.status.text()
    assert models_tree() == [] and not library.downloaded()
    _drained(qtbot, hub)  # the cut responses have stopped sending, so the next count is the next run's
    hub.reset()
    hub.gate_after = 4 << 20
    with qtbot.waitSignal(s.paused, timeout=30_000):
        models.download(TINY_Q4)
        qtbot.waitUntil(lambda: hub.sent() > 4 << 20, timeout=30_000)
        t.pause_button.click()
    hub.gate.set()
    assert library.partials()
    with qtbot.waitSignal(s.freed, timeout=10_000):
        t.cancel_button.click()  # while paused
    assert models_tree() == [] and t.detail.text() == f"Cancelled {TINY_Q4}: nothing of it is kept"
    qtbot.waitUntil(lambda: models.library.partial_names() == [] and models.library.partial.isHidden(),
                    timeout=10_000)
    assert t.pause_button.text() == "Pause" and not t.cancel_button.isEnabled()


def _failed_line(qtbot, models, spec: str) -> str:
    with qtbot.waitSignal(models.service.pull_failed, timeout=30_000) as got:
        models.download(spec)
    line = got.args[1]
    assert models.status.text() == line and models.status_level == "error" and "\n" not in line
    assert "Traceback" not in line and models.transfer.detail.text() == line
    return line


def test_each_failure_is_one_line(qtbot, models, hub, monkeypatch):
    line = _failed_line(qtbot, models, f"{GATED}:gated-Q4_K_M.gguf")
    assert line == (f"{GATED} is gated and no token given (set HF_TOKEN): accept the licence at "
                    f"{hub.url}/{GATED}")
    assert _failed_line(qtbot, models, f"{TINY}:nope.gguf") == \
        f"{TINY}: no file or quantization 'nope.gguf' here (it has: Q2_K, Q4_K_M)"
    assert _failed_line(qtbot, models, "nobody/missing-GGUF").startswith(
        f"nobody/missing-GGUF: no such repository on {hub.url}")
    import app.hub.download as download

    monkeypatch.setattr(download, "free_disk", lambda _folder: 1_000_000)
    assert _failed_line(qtbot, models, TINY_Q4).endswith("has 1.0 MB free; nothing was downloaded")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with qtbot.waitSignal(models.service.failed, timeout=30_000) as got:
        models.search("gemma")
    assert got.args[1] == "http://127.0.0.1:9: cannot connect (is the endpoint right, and the network up?)"
    assert models.status.text() == got.args[1] and models.search_button.isEnabled()
    assert models_tree() == []


def test_delete_frees_the_space_and_says_how_much(qtbot, models, hub):
    f = hub.repos[TINY].file("tiny-Q2_K.gguf")
    with qtbot.waitSignal(models.service.done, timeout=60_000) as fin:
        models.download(f"{TINY}:{f.name}")
    path = Path(fin.args[1])
    qtbot.waitUntil(lambda: str(path) in models.library.downloaded_paths(), timeout=10_000)
    [d] = library.downloaded()
    button = models.library.delete_buttons[str(path)]
    button.click()
    assert button.text() == "Delete? click again" and path.exists()  # one click deletes nothing
    with qtbot.waitSignal(models.service.freed, timeout=10_000) as got:
        button.click()
    assert got.args[0] == f"Deleted {f.name}: {human_size(d.size)} freed" and d.size >= f.size
    assert not path.exists() and models_tree() == []
    qtbot.waitUntil(lambda: models.library.downloaded_paths() == [], timeout=10_000)
    assert models.status.text() == got.args[0]
