"""Can Qt's platform plugin start here? Asked before the QApplication exists.

Why: since Qt 6.5 the xcb plugin needs libxcb-cursor0 and a few other xcb
libraries that a fresh desktop may lack. Without them (or without any display)
Qt prints "Could not load the Qt platform plugin "xcb"" and aborts with a core
dump, which no `except` can turn into a message. This module finds the plugin
Qt will load, asks `ldd` (or, without ldd, dlopen) which libraries it cannot
find, and words one line naming them and the packages that provide them.

It must not import Qt (it runs first, and Qt's own libraries may be what is
missing), must stay fast and must never raise: when in doubt it lets Qt try.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

PLUGIN = "libqxcb.so"

# soname -> (Debian/Ubuntu, Fedora, Arch) package; what the PySide6 xcb plugin links.
PACKAGES: dict[str, tuple[str, str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util", "xcb-util"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb", "libxcb"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon", "libxkbcommon"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb", "libx11"),
    "libX11.so.6": ("libx11-6", "libX11", "libx11"),
    "libGL.so.1": ("libgl1", "libglvnd-glx", "libglvnd"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl", "libglvnd"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig", "fontconfig"),
}

_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$")
_DLOPEN_MISSING = re.compile(r"^(\S+?): cannot open shared object file")


def uses_xcb(environ: Mapping[str, str]) -> bool:
    """Whether Qt would pick xcb: QT_QPA_PLATFORM unset, empty or xcb[...]."""
    platform = environ.get("QT_QPA_PLATFORM", "").strip()
    if platform:
        return platform.startswith("xcb")
    # Unset: Qt prefers wayland in a Wayland session and only then falls back to xcb.
    return not (environ.get("XDG_SESSION_TYPE") == "wayland" and environ.get("WAYLAND_DISPLAY"))


def find_plugin(environ: Mapping[str, str]) -> Path | None:
    """libqxcb.so where Qt looks: QT_QPA_PLATFORM_PLUGIN_PATH, QT_PLUGIN_PATH, then PySide6's."""
    dirs = [Path(d) for d in environ.get("QT_QPA_PLATFORM_PLUGIN_PATH", "").split(os.pathsep) if d]
    dirs += [Path(d) / "platforms" for d in environ.get("QT_PLUGIN_PATH", "").split(os.pathsep) if d]
    spec = importlib.util.find_spec("PySide6")  # finds, does not import
    for root in (spec.submodule_search_locations or []) if spec else []:
        dirs.append(Path(root) / "Qt" / "plugins" / "platforms")
    return next((d / PLUGIN for d in dirs if (d / PLUGIN).is_file()), None)


def missing_libraries(plugin: Path) -> list[str]:
    """Sonames the dynamic loader cannot find for `plugin`: every one (ldd), else the first (dlopen)."""
    ldd = shutil.which("ldd")
    if ldd:
        try:
            out = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            out = None
        if out is not None and out.returncode == 0:
            found = [m.group(1) for m in map(_NOT_FOUND.match, out.stdout.splitlines()) if m]
            return list(dict.fromkeys(found))
    return missing_by_dlopen(plugin)


def missing_by_dlopen(plugin: Path) -> list[str]:
    """The first missing soname dlopen names ([] if it loads or fails for another reason)."""
    try:
        ctypes.CDLL(str(plugin))
    except OSError as e:
        m = _DLOPEN_MISSING.match(str(e))
        if m and m.group(1) != str(plugin):
            return [m.group(1)]
    return []


def install_hint(sonames: Iterable[str]) -> str:
    """`sudo apt-get install ... | sudo dnf install ... | sudo pacman -S ...` for the known sonames."""
    known = [PACKAGES[s] for s in sonames if s in PACKAGES]
    if not known:
        return ""
    apt, dnf, pacman = (" ".join(dict.fromkeys(col)) for col in zip(*known))
    return f"sudo apt-get install {apt} | sudo dnf install {dnf} | sudo pacman -S {pacman}"


def missing_message(sonames: list[str]) -> str:
    text = f"the window cannot start: Qt's xcb platform plugin needs {', '.join(sonames)}"
    hint = install_hint(sonames)
    if hint:
        text += f" (install {'it' if len(sonames) == 1 else 'them'}: {hint})"
    return text


NO_DISPLAY = (
    "the window cannot start: there is no display (DISPLAY and WAYLAND_DISPLAY are unset); "
    "run it in a desktop session, set DISPLAY, or use `xvfb-run llamadesk`"
)


def check(environ: Mapping[str, str] | None = None) -> str | None:
    """The reason the window cannot start (no "llamadesk: error:" prefix), or None to let Qt try."""
    try:
        env = os.environ if environ is None else environ
        if not sys.platform.startswith("linux") or not uses_xcb(env):
            return None
        plugin = find_plugin(env)
        missing = missing_libraries(plugin) if plugin else []
        if missing:
            return missing_message(missing)
        if not env.get("QT_QPA_PLATFORM") and not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
            return NO_DISPLAY
        return None
    except Exception:
        logging.getLogger("llamadesk.ui").exception("the platform check failed; starting Qt anyway")
        return None
