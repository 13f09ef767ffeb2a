"""The Models window's library lists what `llamadesk models` lists (the bundled model, a GGUF put in
the models folder by hand, pulled ones), and Esc or Ctrl+W closes the window."""

from __future__ import annotations

import json
import os

import pytest
from PySide6.QtCore import Qt

from app import paths
from app.cli import main
from app.engine.models import default_model_path
from app.ui.models.service import HubService
from app.ui.models.window import ModelsWindow


@pytest.fixture
def models_folder(model_path):
    """The bundled model where the window assembles it, and a second GGUF dropped beside it
    (hard links: the same bytes, each with a path of its own)."""
    folder = paths.user_models_dir()
    os.link(model_path, default_model_path())
    dropped = folder / "dropped-in.gguf"
    os.link(model_path, dropped)
    return default_model_path().resolve(), dropped.resolve()


@pytest.fixture
def models_window(qtbot, models_folder):
    service = HubService()
    w = ModelsWindow(service, lambda: (4096, 0), in_use=lambda: str(default_model_path()))
    qtbot.addWidget(w)
    with qtbot.waitSignal(service.listed, timeout=10_000):
        w.show()
    yield w
    assert service.shutdown(), "a Hub thread was still running"


def test_the_library_lists_what_llamadesk_models_lists(qtbot, models_window, models_folder, capsys):
    bundled, dropped = models_folder
    assert main(["models", "--json"]) == 0
    listed = {m["path"] for m in json.loads(capsys.readouterr().out)}
    assert listed == {str(bundled), str(dropped)}
    lib = models_window.library
    assert set(lib.downloaded_paths()) | set(lib.other_paths()) == listed
    assert lib.others.text(0) == "Other models in the models folders (2)" and not lib.others.isHidden()
    rows = {lib.others.child(i).text(0) for i in range(lib.others.childCount())}
    assert rows == {"gemma-3-270m-q4_k_m.gguf (bundled default)", "dropped-in.gguf"}
    assert not lib.use_buttons[str(bundled)].isEnabled() and lib.use_buttons[str(bundled)].text() == "In use"
    with qtbot.waitSignal(models_window.use_model, timeout=2_000) as used:
        lib.use_buttons[str(dropped)].click()
    assert used.args == [str(dropped)]
    assert str(bundled) not in lib.delete_buttons  # not a Hub pull: nothing to delete here


@pytest.mark.parametrize("keys", [(Qt.Key.Key_Escape, Qt.KeyboardModifier.NoModifier),
                                  (Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier)])
def test_esc_and_ctrl_w_close_the_models_window(qtbot, models_window, keys):
    w = models_window
    w.activateWindow()
    qtbot.waitUntil(lambda: w.isActiveWindow(), timeout=2_000)
    w.query.setFocus()  # typing in the search box, as a user would be
    qtbot.keyClick(w.query, *keys)
    assert not w.isVisible()
