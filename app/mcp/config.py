"""Which MCP servers LlamaDesk may start: `mcp.json` in the config folder, in the form people have.

Claude Desktop, LM Studio and Cursor all keep `{"mcpServers": {name: {command, args, env} |
{url, headers}}}`, so a user can copy an entry from any of them, or import a whole file,
without learning a new shape. LlamaDesk's own keys sit beside theirs in each entry
("enabled", "trusted", "disabledTools", "timeout"); keys LlamaDesk does not know are kept
when it saves, so a hand-written file loses nothing. A file that cannot be read whole is
one line naming it and the fault, and is never written over: fixing it stays the user's.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from app import atomic_file, paths, regular_files
from app.errors import LlamaDeskError

FILE_NAME = "mcp.json"
DEFAULT_TIMEOUT_S = 60.0
_LIMIT = 4 << 20  # a config is kilobytes; this bounds a hostile one


class McpConfigError(LlamaDeskError):
    """An MCP config file that cannot be used: one line naming the file and what is wrong."""


@dataclass(frozen=True)
class ServerConfig:
    name: str
    command: str | None = None  # stdio
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None  # streamable HTTP (or SSE when the url ends in /sse)
    headers: tuple[tuple[str, str], ...] = ()
    enabled: bool = True
    trusted: bool = False  # calls run without asking
    disabled_tools: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def transport(self) -> str:
        if self.url is None:
            return "stdio"
        return "sse" if self.url.split("?", 1)[0].rstrip("/").endswith("/sse") else "http"

    @property
    def target(self) -> str:
        """What the server is, in one short line: its command or its URL."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args])

    def to_json(self) -> dict:
        """The entry as mcp.json keeps it (the LlamaDesk keys only when not their defaults)."""
        d: dict = {}
        if self.url is not None:
            d["url"] = self.url
            if self.headers:
                d["headers"] = dict(self.headers)
        else:
            d["command"] = self.command
            d["args"] = list(self.args)
            if self.env:
                d["env"] = dict(self.env)
        if not self.enabled:
            d["enabled"] = False
        if self.trusted:
            d["trusted"] = True
        if self.disabled_tools:
            d["disabledTools"] = list(self.disabled_tools)
        if self.timeout_s != DEFAULT_TIMEOUT_S:
            d["timeout"] = self.timeout_s
        return d


_OWN_KEYS = ("command", "args", "env", "url", "headers", "enabled", "trusted", "disabledTools", "timeout")


@dataclass(frozen=True)
class McpConfig:
    servers: tuple[ServerConfig, ...] = ()

    def get(self, name: str) -> ServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)

    def with_server(self, s: ServerConfig) -> McpConfig:
        """Add `s`, or replace the server of its name where it stands."""
        if self.get(s.name) is None:
            return McpConfig((*self.servers, s))
        return McpConfig(tuple(s if old.name == s.name else old for old in self.servers))

    def without(self, name: str) -> McpConfig:
        return McpConfig(tuple(s for s in self.servers if s.name != name))

    def enabled(self) -> tuple[ServerConfig, ...]:
        return tuple(s for s in self.servers if s.enabled)


def config_path() -> Path:
    return paths.config_dir() / FILE_NAME


def _strings(value, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(value)


def _pairs(value, what: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{what} must be an object of strings")
    return tuple((str(k), v) for k, v in value.items())


def _flag(entry: dict, key: str, default: bool) -> bool:
    value = entry.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f'"{key}" must be true or false')
    return value


def server_from_json(name: str, entry) -> ServerConfig:
    """One entry of "mcpServers"; ValueError saying what is wrong with it."""
    if not name.strip():
        raise ValueError("a server needs a name")
    if not isinstance(entry, dict):
        raise ValueError("its entry must be an object")
    command, url = entry.get("command"), entry.get("url", entry.get("serverUrl"))
    if (command is None) == (url is None):
        raise ValueError('give either "command" (a program to start) or "url" (a server to reach)')
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise ValueError('"command" must be a program name')
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise ValueError('"url" must start with http:// or https://')
    timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise ValueError('"timeout" must be a number of seconds above 0')
    enabled = _flag(entry, "enabled", True) and not _flag(entry, "disabled", False)  # Cursor's key
    return ServerConfig(
        name=name, command=command, args=_strings(entry.get("args", []), '"args"'),
        env=_pairs(entry.get("env", {}), '"env"'), url=url,
        headers=_pairs(entry.get("headers", {}), '"headers"'), enabled=enabled,
        trusted=_flag(entry, "trusted", False),
        disabled_tools=_strings(entry.get("disabledTools", []), '"disabledTools"'), timeout_s=float(timeout),
    )


def _read_document(path: Path) -> dict | None:
    """The file's JSON object, None when there is no file; McpConfigError for anything else."""
    try:
        raw = regular_files.read_bytes(path, _LIMIT)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise McpConfigError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise McpConfigError(f"{path}: is not UTF-8 text") from None
    except ValueError as e:
        raise McpConfigError(f"{path}: is not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise McpConfigError(f'{path}: must hold an object with "mcpServers"')
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise McpConfigError(f'{path}: "mcpServers" must be an object of servers by name')
    return data


def _parse(path: Path, data: dict) -> McpConfig:
    servers = []
    for name, entry in data.get("mcpServers", {}).items():
        try:
            servers.append(server_from_json(name, entry))
        except ValueError as e:
            raise McpConfigError(f"{path}: server {json.dumps(name)}: {e}") from None
    return McpConfig(tuple(servers))


def load_config(path: Path | None = None) -> McpConfig:
    """The servers in LlamaDesk's mcp.json; a missing file is no servers."""
    path = path or config_path()
    data = _read_document(path)
    return McpConfig() if data is None else _parse(path, data)


def save_config(cfg: McpConfig, path: Path | None = None) -> None:
    """Write atomically, keeping every key the file had that LlamaDesk does not own.

    A file that cannot be read is refused (McpConfigError), not replaced: the user's
    hand edit stays for them to mend.
    """
    path = path or config_path()
    data = _read_document(path) or {}
    _parse(path, data)  # a server entry the user must mend is not replaced either
    old = data.get("mcpServers", {})
    servers = {}
    for s in cfg.servers:
        kept = old.get(s.name) if isinstance(old.get(s.name), dict) else {}
        extra = {k: v for k, v in kept.items() if k not in (*_OWN_KEYS, "disabled", "serverUrl")}
        servers[s.name] = {**s.to_json(), **extra}
    data["mcpServers"] = servers
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_file.write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _claude_desktop() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if sys.platform == "win32":
        appdata = os.environ.get("APPDATA") or str(Path.home() / "AppData" / "Roaming")
        return Path(appdata) / "Claude" / "claude_desktop_config.json"
    xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".config") / "Claude" / "claude_desktop_config.json"


def foreign_places() -> list[tuple[str, Path]]:
    """Where other apps keep their MCP servers on this platform, found or not."""
    return [("Claude Desktop", _claude_desktop()), ("LM Studio", Path.home() / ".lmstudio" / "mcp.json")]


def importable() -> list[tuple[str, Path]]:
    """The other apps' MCP files that exist here, to offer importing."""
    return [(app, p) for app, p in foreign_places() if regular_files.is_regular(p)]


def read_foreign(path: Path) -> tuple[ServerConfig, ...]:
    """Another app's servers, read only (never written); LlamaDesk's trust is never imported."""
    data = _read_document(path)
    if data is None:
        raise McpConfigError(f"{path}: no such file")
    return tuple(replace(s, trusted=False) for s in _parse(path, data).servers)
