"""The settings dialog's read-only "Hardware" section.

Users whose GPU sits idle need to see why without reading logs: either the
llama.cpp build has no GPU backend at all (a pip install compiles a CPU-only
build unless told otherwise), or the build has one but the model's layers were
not offloaded, or a GPU load failed and fell back. Each of those is a row here.
So is whether llama.cpp runs its AMX kernels, and, once a reply has decoded, the
model's two roofs (memory and compute) and that decode's share of each: read
from what was measured already (app.chat.live_gauges.last_decode), since the
probes take seconds and this runs on the GUI thread.
The rows come from `hardware_rows`, which has no widgets, so it is tested on
CPU builds without pretending to have a GPU.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFormLayout, QGroupBox

from app.chat.live_gauges import MeasuredDecode, last_decode
from app.engine import backend
from app.engine.loader import LoadReport
from app.ui.widgets.levels import LevelLabel

NO_OFFLOAD = "none (CPU-only llama.cpp build)"


def _gib(n: int | None) -> str:
    return f"{n / 2**30:.1f} GiB" if n else "?"


def describe_device(d: dict) -> str:
    """One device as llama.cpp reports it; memory only where it reports some."""
    name = d.get("description") or d.get("name") or "?"
    kind = d.get("kind") or "?"
    if d.get("name") and d.get("description") and d["name"] not in (d["description"], kind):
        name = f"{d['description']} ({d['name']})"  # e.g. "NVIDIA H200 (CUDA0)"
    total, free = d.get("memory_total"), d.get("memory_free")
    mem = f", {_gib(free)} free of {_gib(total)}" if total else ""
    return f"{kind}: {name}{mem}"


NOT_YET = "not measured yet (after the first reply)"


def roof_rows(decode: MeasuredDecode | None) -> list[tuple[str, str]]:
    """The memory and compute roofs at the last decode's position and its share of each."""
    if decode is None:
        return [("Memory roof", NOT_YET), ("Compute roof", NOT_YET)]
    lim = decode.limits
    r = lim.roofs(decode.position, decode.tok_s)
    mem = (f"{r.memory_tok_s:.0f} tok/s ({lim.peak / 1e9:.1f} GB/s over {r.bytes_per_token / 1e6:.0f} MB "
           f"a token) · the last decode {100 * (r.memory_util or 0):.0f}% of it")
    if r.compute_tok_s is None:
        comp = "not measured yet (llamadesk bench measures it)"
    else:
        comp = (f"{r.compute_tok_s:.0f} tok/s ({(lim.mac_peak or 0) / 1e9:.1f} GMAC/s over "
                f"{r.macs_per_token / 1e9:.2f} GMAC a token; {lim.mac_source}) · the last decode "
                f"{100 * (r.compute_util or 0):.0f}% of it")
    binds = (f"{r.binds} binds: ceiling {r.ceiling_tok_s:.0f} tok/s; the last decode "
             f"{decode.tok_s:.0f} tok/s at position {decode.position}")
    return [("Memory roof", mem), ("Compute roof", comp), ("Roofline", binds)]


def _same_model(decode: MeasuredDecode | None, report: LoadReport) -> MeasuredDecode | None:
    if decode is None or str(decode.limits.header.path) != str(report.model_path):
        return None
    return decode


def hardware_rows(report: LoadReport | None, build_backend: str | None = None,
                  offload_supported: bool | None = None,
                  devices: Iterable[dict] | None = None,
                  decode: MeasuredDecode | bool | None = True) -> list[tuple[str, str]]:
    """(label, text) rows. The build facts default to what this process's llama.cpp says;
    `decode` True: the roofs at this process's last local decode of the loaded model."""
    if build_backend is None:
        build_backend = report.backend if report else backend.compiled_backend()
    if offload_supported is None:
        offload_supported = report.gpu_offload_supported if report else backend.gpu_offload_supported()
    if devices is None:
        devices = report.devices if report and report.devices else [
            vars(d) for d in backend.devices()]
    if offload_supported:
        offload = build_backend
    elif build_backend not in ("CPU", "GPU"):
        offload = f"none: {build_backend} is compiled in, but no usable GPU was found"
    else:
        offload = NO_OFFLOAD
    rows = [("GPU offload", offload), ("AMX", backend.amx().line())]
    devs = list(devices)
    rows += [("Device", describe_device(d)) for d in devs] or [("Device", "llama.cpp reported none")]
    if report is None:
        rows.append(("Layers on GPU", "no model loaded"))
        return rows
    total = report.layers_total
    if report.layers_offloaded:
        layers = f"{report.layers_offloaded} of {total}" if total else str(report.layers_offloaded)
    elif not offload_supported:
        why = "CPU build" if build_backend in ("CPU", "GPU") else "no usable GPU"
        layers = f"0 of {total} ({why})" if total else f"0 ({why})"
    elif report.n_gpu_layers_requested == 0:
        layers = "0 (GPU layers set to 0 in these settings)"
    else:
        layers = f"0 of {total}" if total else "0"
    rows.append(("Layers on GPU", layers))
    rows.append(("Model runs on", report.runs_on))
    if report.fallback:
        rows.append(("Fallback", report.fallback))
    if decode is True:
        decode = _same_model(last_decode(), report)
    rows += roof_rows(decode or None)
    return rows


class HardwarePanel(QGroupBox):
    """Read-only; it shows the report of the model as loaded, not the edited settings."""

    def __init__(self, report: LoadReport | None = None, parent=None):
        super().__init__("Hardware", parent)
        self.rows = hardware_rows(report)
        self.setMinimumWidth(420)  # device names and memory stay on one line each
        form = QFormLayout(self)
        for label, text in self.rows:
            value = LevelLabel(text)
            value.setWordWrap(True)
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            if label == "Fallback":  # a warning's colour for the theme showing, again on a switch
                value.set_level("warning")
            form.addRow(label, value)
