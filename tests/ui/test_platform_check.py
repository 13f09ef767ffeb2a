"""The pre-Qt check: real plugins, real ldd, real dlopen, the real `llamadesk` process.

Plugins that lack a library are built here with `cc`: a stub .so with the
wanted soname, a plugin linked against it, then the stub deleted, so the
plugin's DT_NEEDED names a library the loader cannot find.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.ui import platform_check as pc

REPO = Path(__file__).resolve().parents[2]
UNKNOWN = "libllamadesk-probe-missing.so.1"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the check is Linux-only")
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
needs_ldd = pytest.mark.skipif(shutil.which("ldd") is None, reason="needs ldd")


def build_plugin(folder: Path, needs: str | None) -> Path:
    """folder/libqxcb.so, needing `needs` (which then no longer exists), or nothing unusual."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "plug.c"
    cmd = ["cc", "-shared", "-fPIC", "-o", str(folder / pc.PLUGIN), str(src)]
    if needs:
        stub = folder / needs
        (folder / "stub.c").write_text("int probe_stub(void) { return 1; }\n")
        subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{needs}", "-o", str(stub),
                        str(folder / "stub.c")], check=True)
        src.write_text("extern int probe_stub(void);\nint probe(void) { return probe_stub(); }\n")
        cmd[1:1] = ["-Wl,--no-as-needed"]
        cmd.append(str(stub))
    else:
        src.write_text("int probe(void) { return 1; }\n")
    subprocess.run(cmd, check=True)
    if needs:
        (folder / needs).unlink()
    return folder / pc.PLUGIN


def ldd_not_found(path: Path) -> set[str]:
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True).stdout
    return {m.group(1) for m in re.finditer(r"^\s*(\S+) => not found", out, re.M)}


@needs_ldd
def test_real_pyside_plugin_agrees_with_ldd():
    plugin = pc.find_plugin({})
    assert plugin is not None and plugin.name == "libqxcb.so"
    assert "PySide6" in plugin.parts
    missing = pc.missing_libraries(plugin)
    assert set(missing) == ldd_not_found(plugin)
    assert len(missing) == len(set(missing))  # ldd repeats libQt6XcbQpa's; reported once
    problem = pc.check({"DISPLAY": ":99"})
    assert problem == (pc.missing_message(missing) if missing else None)


@needs_cc
@needs_ldd
def test_plugin_lacking_an_unknown_library(tmp_path):
    plugin = build_plugin(tmp_path / "platforms", UNKNOWN)
    assert ldd_not_found(plugin) == {UNKNOWN}
    assert pc.missing_libraries(plugin) == [UNKNOWN]
    assert pc.missing_by_dlopen(plugin) == [UNKNOWN]  # the fallback without ldd
    env = {"QT_QPA_PLATFORM_PLUGIN_PATH": str(plugin.parent), "DISPLAY": ":99"}
    assert pc.find_plugin(env) == plugin
    assert pc.check(env) == f"the window cannot start: Qt's xcb platform plugin needs {UNKNOWN}"


def test_package_table_words_the_install_commands():
    assert pc.missing_message(["libxcb-cursor.so.0", "libxcb-icccm.so.4"]) == (
        "the window cannot start: Qt's xcb platform plugin needs libxcb-cursor.so.0, libxcb-icccm.so.4 "
        "(install them: sudo apt-get install libxcb-cursor0 libxcb-icccm4 | sudo dnf install "
        "xcb-util-cursor xcb-util-wm | sudo pacman -S xcb-util-cursor xcb-util-wm)")
    # An unknown soname is named but left out of the commands; shared packages appear once.
    assert pc.install_hint(["libxcb-shape.so.0", UNKNOWN, "libxcb-randr.so.0"]) == (
        "sudo apt-get install libxcb-shape0 libxcb-randr0 | sudo dnf install libxcb | sudo pacman -S libxcb")
    assert pc.install_hint([UNKNOWN]) == ""


@needs_cc
def test_other_platforms_skip_the_check(tmp_path):
    broken = build_plugin(tmp_path / "platforms", UNKNOWN).parent
    for platform in ("offscreen", "wayland", "minimal"):
        assert pc.check({"QT_QPA_PLATFORM": platform, "QT_QPA_PLATFORM_PLUGIN_PATH": str(broken)}) is None
    wayland_session = {"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0",
                       "QT_QPA_PLATFORM_PLUGIN_PATH": str(broken)}
    assert pc.check(wayland_session) is None  # Qt picks wayland there
    assert pc.check({"QT_QPA_PLATFORM": "xcb", "QT_QPA_PLATFORM_PLUGIN_PATH": str(broken)}) is not None


@needs_cc
def test_no_display_is_one_line(tmp_path):
    good = build_plugin(tmp_path / "platforms", None).parent
    assert pc.missing_libraries(good / pc.PLUGIN) == []
    env = {"QT_QPA_PLATFORM_PLUGIN_PATH": str(good)}
    assert pc.check(env) == pc.NO_DISPLAY
    assert pc.check({**env, "DISPLAY": ":0"}) is None
    assert pc.check({**env, "WAYLAND_DISPLAY": "wayland-0"}) is None


@pytest.mark.subprocess
def test_without_pyside_the_check_lets_qt_try():
    # -S: no site-packages, so PySide6 (and its plugin) cannot be found.
    code = ("from app.ui.platform_check import check, find_plugin\n"
            "print(find_plugin({}), check({'DISPLAY': ':9'}))")
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=30, check=True)
    assert out.stdout.split() == ["None", "None"]


@pytest.mark.subprocess
def test_llamadesk_without_display_exits_2_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        env[var] = str(tmp_path / var.lower())
    out = subprocess.run([sys.executable, "-m", "app"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("llamadesk: error: the window cannot start: "), out.stderr
    assert "Traceback" not in out.stderr


def test_qt_options_are_told_from_ours_and_only_before_a_command():
    from app.ui.qt_args import platform_env, split_qt_args

    commands = {"ask", "batch"}
    assert split_qt_args(["-platform", "xcb", "--model", "m.gguf", "-reverse"], commands) == \
        (["-platform", "xcb", "-reverse"], ["--model", "m.gguf"])
    assert split_qt_args(["--style", "Fusion"], commands) == (["--style", "Fusion"], [])
    # After a command everything is the command's: "-style" may be a prompt.
    assert split_qt_args(["ask", "-style", "x"], commands) == ([], ["ask", "-style", "x"])
    assert split_qt_args(["--model", "-reverse"], commands) == ([], ["--model", "-reverse"])
    env = platform_env(["-platform", "offscreen"], {"QT_QPA_PLATFORM": "xcb"})
    assert env["QT_QPA_PLATFORM"] == "offscreen"


@pytest.mark.subprocess
def test_llamadesk_passes_qt_options_to_qt(tmp_path, model_path):
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        env[var] = str(tmp_path / var.lower())
    code = textwrap.dedent(f"""
        import sys
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication
        import app.ui.window as w
        shown = w.MainWindow.show
        def show(self):
            shown(self)
            app = QApplication.instance()
            def report():
                with open({str(tmp_path / "seen.txt")!r}, "w") as f:
                    f.write(f"{{app.platformName()}} {{app.style().name()}} {{app.isRightToLeft()}}")
                self.close()
            QTimer.singleShot(300, report)
        w.MainWindow.show = show
        from app.cli import main
        sys.exit(main(["-platform", "offscreen", "-style", "windows", "-reverse",
                       "--model", {str(model_path)!r}]))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "seen.txt").read_text().split() == ["offscreen", "windows", "True"], out.stderr
    refused = subprocess.run([sys.executable, "-m", "app", "-platform", "offscreen", "ask", "hi"], cwd=REPO,
                             env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "Qt's options are for the window" in refused.stderr
