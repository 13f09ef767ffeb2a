"""The tools a user said "Always allow" to, kept so they are not asked again, and revocable.

A file of its own (config_dir()/mcp-approvals.json), not a key in mcp.json: mcp.json is
the user's to hand-edit and to copy between apps, while these decisions are LlamaDesk's
record of what was clicked. Each decision is saved the moment it is made, so a crash
right after "Always allow" does not ask again, and a revoke takes effect at once.
A damaged file asks again for everything (the safe side) and is copied aside before
the next decision replaces it.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from app import atomic_file, paths, regular_files

FILE_NAME = "mcp-approvals.json"

log = logging.getLogger("llamadesk.mcp")


def approvals_path() -> Path:
    return paths.config_dir() / FILE_NAME


class Approvals:
    def __init__(self, path: Path, always: set[tuple[str, str]], damaged: bool = False):
        self.path = path
        self._always = always
        self._damaged = damaged  # the file on disk was unreadable: keep it aside before saving
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: Path | None = None) -> Approvals:
        path = path or approvals_path()
        if not path.exists():
            return cls(path, set())
        data = regular_files.read_json_object(path)
        always = data.get("always") if data is not None else None
        if not isinstance(always, dict):
            log.warning("%s is not an approvals file; every MCP tool will be asked about again", path)
            return cls(path, set(), damaged=True)
        pairs = {(server, tool) for server, tools in always.items() if isinstance(tools, list)
                 for tool in tools if isinstance(tool, str)}
        return cls(path, pairs)

    def allowed(self, server: str, tool: str) -> bool:
        with self._lock:
            return (server, tool) in self._always

    def allow_always(self, server: str, tool: str) -> None:
        with self._lock:
            self._always.add((server, tool))
            self._save()

    def revoke(self, server: str, tool: str) -> None:
        with self._lock:
            self._always.discard((server, tool))
            self._save()

    def entries(self) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(self._always)

    def _save(self) -> None:
        if self._damaged:
            atomic_file.keep_aside(self.path, "damaged")
            self._damaged = False
        always: dict[str, list[str]] = {}
        for server, tool in sorted(self._always):
            always.setdefault(server, []).append(tool)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_file.write_text(self.path, json.dumps({"always": always}, indent=2, ensure_ascii=False) + "\n")
