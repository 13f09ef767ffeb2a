"""A local Hugging Face Hub: a real HTTP server on 127.0.0.1 speaking the part of the Hub's API
that huggingface_hub and LlamaDesk's downloader use, with faults on demand.

- GET /api/models?search=&filter=gguf&...: repositories whose id contains the text
- GET /api/models/ORG/NAME[/revision/REV][?blobs=true]: siblings, with size and lfs
  {sha256, size, pointerSize} when blobs are asked for; 401 RepoNotFound for an unknown
  repository (what the Hub answers without a token), 404 RevisionNotFound
- HEAD and GET /ORG/NAME/resolve/REV/FILE: a 302 to the "CDN" (a second server, another
  origin, as the Hub's CDN is), with X-Repo-Commit, X-Linked-Etag, X-Linked-Size and ETag;
  401/403 GatedRepo for a gated repository without (or with a wrong) token; 404 EntryNotFound
- HEAD and GET /cdn/SHA256 (on the CDN): the bytes, ETag = the sha256 in quotes,
  Accept-Ranges, Range -> 206 with Content-Range, 416 past the end

Evil answers, for the tests that a Hub's word is never trusted with the disk: a file's
`claimed_sha256` (what the API and the HEAD say its sha256 is, whatever its bytes), a
repository's `redirect` (its files' resolve URL answers 302 to that Location, "self" for its
own URL: a loop), any string as a file name or a commit, and `lenient` (a resolve request is
answered by the file its last part names, whatever revision or folders come before it, as a
server answers a URL the client normalized: "resolve/C/../../x.gguf" arrives as "/x.gguf").

Faults, set on the Mirror between requests: `gate_after` (after that many body bytes in
all, every response of this test waits on `gate` until the test sets it, however long that
takes; `held` is set once one is waiting there), `drop_after` (the next responses
close the connection after that many bytes, `drop_times` times), `corrupt_at` (one byte
flipped at that file offset, `corrupt_times` times), `no_ranges` (Range is ignored: 200).
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

CHUNK = 64 << 10
GOOD_TOKEN = "hf_llamadesk_test_token"


@dataclass
class RepoFile:
    name: str
    path: Path | None = None  # an LFS file, served from disk
    text: bytes | None = None  # a small file kept in git itself
    sha256: str = ""
    size: int = 0
    claimed_sha256: str | None = None  # the sha256 the API and the HEAD give, when not the real one

    @property
    def listed_sha256(self) -> str:
        return self.sha256 if self.claimed_sha256 is None else self.claimed_sha256

    def __post_init__(self):
        if self.path is not None:
            h = hashlib.sha256()
            with open(self.path, "rb") as f:
                while block := f.read(8 << 20):
                    h.update(block)
            self.sha256, self.size = h.hexdigest(), self.path.stat().st_size
        else:
            self.size = len(self.text or b"")


@dataclass
class Repo:
    id: str
    files: list[RepoFile]
    commit: str = ""
    gated: bool = False
    downloads: int = 0
    redirect: str | None = None  # the resolve URL's 302 Location instead of the CDN's ("self": a loop)

    def __post_init__(self):
        self.commit = self.commit or hashlib.sha1(self.id.encode()).hexdigest()

    def file(self, name: str) -> RepoFile | None:
        return next((f for f in self.files if f.name == name), None)

    def file_by_last_part(self, name: str) -> RepoFile | None:
        last = name.rsplit("/", 1)[-1]
        return next((f for f in self.files if f.name.replace("\\", "/").rsplit("/", 1)[-1] == last), None)


@dataclass
class Served:
    method: str
    path: str
    range: str | None
    authorization: bool
    status: int
    sent: int = 0
    start: int = 0


@dataclass
class Mirror:
    repos: dict[str, Repo] = field(default_factory=dict)
    log: list[Served] = field(default_factory=list)
    gate_after: int | None = None
    gate: threading.Event = field(default_factory=threading.Event)
    held: threading.Event = field(default_factory=threading.Event)  # a response waits at the gate
    drop_after: int | None = None
    drop_times: int = 0
    corrupt_at: int | None = None
    corrupt_times: int = 0
    no_ranges: bool = False
    lenient: bool = False
    body_bytes: int = 0
    pace: float | None = None  # bytes a second each response sends at most (None: as fast as it can)
    generation: int = 0  # one per test: a response left over from an earlier one is not counted
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, repo: Repo) -> Repo:
        self.repos[repo.id] = repo
        return repo

    def reset(self) -> None:
        with self.lock:
            self.gate.set()  # a response still waiting from the last test ends
            self.gate, self.held = threading.Event(), threading.Event()
            self.generation += 1
            self.pace = None
            self.log.clear()
            self.gate_after = self.drop_after = self.corrupt_at = None
            self.drop_times = self.corrupt_times = self.body_bytes = 0
            self.no_ranges = False

    def start(self) -> Mirror:
        self._servers = [ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, cdn)) for cdn in (False, True)]
        for s in self._servers:
            s.daemon_threads = True
            threading.Thread(target=s.serve_forever, daemon=True, name="hub-mirror").start()
        self.url = f"http://127.0.0.1:{self._servers[0].server_port}"
        self.cdn = f"http://127.0.0.1:{self._servers[1].server_port}"
        return self

    def stop(self) -> None:
        self.gate.set()
        for s in self._servers:
            s.shutdown()
            s.server_close()

    def served(self, path_part: str, method: str = "GET") -> list[Served]:
        with self.lock:
            return [s for s in self.log if s.method == method and path_part in s.path]

    def sent(self) -> int:
        with self.lock:
            return self.body_bytes


def _handler(mirror: Mirror, cdn: bool):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_HEAD(self):
            self._route(head=True)

        def do_GET(self):
            self._route(head=False)

        # --- routing -----------------------------------------------------------------------
        def _route(self, head: bool):
            url = urlsplit(self.path)
            path, query = unquote(url.path), parse_qs(url.query)
            self.served = Served(self.command, self.path, self.headers.get("Range"),
                                 "Authorization" in self.headers, 0)
            with mirror.lock:
                mirror.log.append(self.served)
            try:
                if cdn:
                    m = re.fullmatch(r"/cdn/([0-9a-f]{64})", path)
                    f = next((f for r in mirror.repos.values() for f in r.files
                              if m and f.sha256 == m[1]), None)
                    return self._file(f, head) if f else self._error(404, "EntryNotFound")
                if path == "/api/models":
                    return self._search(query)
                m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
                if m:
                    return self._info(m[1], m[2] or "main", "true" in query.get("blobs", []))
                m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
                if m and not mirror.lenient:
                    return self._resolve(m[1], m[2], m[3])
                if mirror.lenient:
                    return self._resolve_any(path)
                self._error(404, None)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _json(self, obj, status=200, headers=()):
            body = json.dumps(obj).encode()
            self.served.status = status
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status, code, message=""):
            headers = [("X-Error-Code", code)] if code else []
            if message:
                headers.append(("X-Error-Message", message))
            self._json({"error": message or code or "not found"}, status, headers)

        def _token_ok(self) -> bool | None:
            auth = self.headers.get("Authorization")
            return None if auth is None else auth == f"Bearer {GOOD_TOKEN}"

        def _repo(self, repo_id: str, revision: str) -> Repo | None:
            repo = mirror.repos.get(repo_id)
            if repo is None:
                self._error(401, "RepoNotFound", "Repository not found")
                return None
            if revision not in ("main", repo.commit):
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return None
            return repo

        # --- the API -----------------------------------------------------------------------
        def _search(self, query):
            text = (query.get("search") or [""])[0].lower()
            limit = int((query.get("limit") or ["50"])[0])
            hits = [r for r in mirror.repos.values() if text in r.id.lower()]
            hits.sort(key=lambda r: -r.downloads)
            self._json([{"_id": r.commit[:24], "id": r.id, "modelId": r.id, "downloads": r.downloads,
                         "likes": 1, "gated": "auto" if r.gated else False, "private": False,
                         "tags": ["gguf"]} for r in hits[:limit]])

        def _info(self, repo_id, revision, blobs):
            repo = self._repo(repo_id, revision)
            if repo is None:
                return
            siblings = []
            for f in repo.files:
                s = {"rfilename": f.name}
                if blobs:
                    s["size"] = f.size
                    s["blobId"] = hashlib.sha1(f.name.encode()).hexdigest()
                    if f.path is not None:
                        s["lfs"] = {"sha256": f.listed_sha256, "size": f.size, "pointerSize": 134}
                siblings.append(s)
            self._json({"_id": repo.commit[:24], "id": repo.id, "modelId": repo.id, "sha": repo.commit,
                        "private": False, "gated": "auto" if repo.gated else False, "disabled": False,
                        "downloads": repo.downloads, "likes": 1, "tags": ["gguf"], "siblings": siblings})

        def _resolve(self, repo_id, revision, name):
            repo = self._repo(repo_id, revision)
            if repo is None:
                return
            if repo.gated and not self._token_ok():
                status = 401 if self._token_ok() is None else 403
                return self._error(status, "GatedRepo", f"Access to model {repo.id} is restricted.")
            f = repo.file(name)
            if f is None:
                return self._error(404, "EntryNotFound", f"{name} does not exist on \"{revision}\"")
            self._resolved(repo, f)

        def _resolve_any(self, path):
            """The file a request's last part names, in any repository, at any revision."""
            found = next(((r, f) for r in mirror.repos.values() if (f := r.file_by_last_part(path))), None)
            if found is None:
                return self._error(404, "EntryNotFound", f"nothing here is named like {path}")
            self._resolved(*found)

        def _resolved(self, repo: Repo, f: RepoFile):
            if repo.redirect is not None:
                self.served.status = 302
                self.send_response(302)
                here = f"{mirror.url}{self.path}"
                self.send_header("Location", here if repo.redirect == "self" else repo.redirect)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            common = [("X-Repo-Commit", repo.commit)]
            if f.path is None:  # a git file: served here, its ETag the git blob id
                self.served.status = 200
                self.send_response(200)
                for k, v in [*common, ("ETag", f'"{hashlib.sha1(f.text).hexdigest()}"'),
                             ("Content-Length", str(f.size))]:
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(f.text)
                return
            self.served.status = 302
            self.send_response(302)
            listed = f.listed_sha256
            for k, v in [*common, ("Location", f"{mirror.cdn}/cdn/{f.sha256}"), ("ETag", f'"{listed}"'),
                         ("X-Linked-Etag", f'"{listed}"'), ("X-Linked-Size", str(f.size)),
                         ("Content-Length", "0")]:
                self.send_header(k, v)
            self.end_headers()

        # --- the bytes ---------------------------------------------------------------------
        def _file(self, f: RepoFile, head: bool):
            start, end, status = 0, f.size, 200
            rng = self.headers.get("Range")
            if rng and not mirror.no_ranges:
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                if not m or int(m[1]) >= f.size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{f.size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    self.served.status = 416
                    return
                start, end, status = int(m[1]), min(int(m[2]) + 1 if m[2] else f.size, f.size), 206
            self.served.status, self.served.start = status, start
            self.send_response(status)
            self.send_header("ETag", f'"{f.sha256}"')
            self.send_header("Accept-Ranges", "none" if mirror.no_ranges else "bytes")
            self.send_header("Content-Length", str(end - start))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{f.size}")
            self.end_headers()
            if not head:
                self._body(f, start, end)

        def _body(self, f: RepoFile, start: int, end: int):
            with mirror.lock:
                self.generation = mirror.generation
                drop = mirror.drop_after if mirror.drop_times > 0 else None
                if drop is not None:
                    mirror.drop_times -= 1
            pos = start
            with open(f.path, "rb") as fh:
                fh.seek(start)
                while pos < end:
                    n = min(CHUNK, end - pos)
                    if drop is not None:
                        n = min(n, start + drop - pos)
                        if n <= 0:
                            self.connection.shutdown(socket.SHUT_RDWR)  # mid-body: the peer sees it cut
                            self.close_connection = True
                            return
                    data = bytearray(fh.read(n))
                    self._maybe_corrupt(data, pos)
                    self._maybe_wait(len(data))
                    self.wfile.write(data)
                    pos += len(data)
                    self.served.sent += len(data)
                    if mirror.pace:
                        time.sleep(len(data) / mirror.pace)

        def _maybe_corrupt(self, data: bytearray, pos: int):
            with mirror.lock:
                at = mirror.corrupt_at
                if at is not None and mirror.corrupt_times > 0 and pos <= at < pos + len(data):
                    data[at - pos] ^= 0xFF
                    mirror.corrupt_times -= 1

        def _maybe_wait(self, n: int):
            with mirror.lock:
                if self.generation != mirror.generation:
                    return  # an earlier test's response, let go by its reset
                mirror.body_bytes += n
                wait = mirror.gate_after is not None and mirror.body_bytes > mirror.gate_after
                gate, held = mirror.gate, mirror.held
            if wait:
                held.set()
                gate.wait()  # no timeout: the test (or reset, or stop) opens it

    return Handler
