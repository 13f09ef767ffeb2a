"""The names a Hub answers with, held to the shape the Hub itself gives them before any of
them becomes part of a path on this disk.

Whatever answers at HF_ENDPOINT (a mirror, a proxy, someone in the middle) is trusted with
nothing: a file's `rfilename`, the commit, the LFS sha256 become folders and files under the
models folder (models--ORG--NAME/snapshots/COMMIT/NAME, blobs/SHA256.incomplete), and mkdir
and os.replace go wherever such a path points, over whatever is there, and out of sight of
`llamadesk models`. So a commit must be 40 hex digits and a sha256 64, a repository id
ORG/NAME, and a file name a relative path that stays in its folder. library.contained checks
every path built from them once more, where it is written.
"""

from __future__ import annotations

import re

REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
COMMIT = re.compile(r"[0-9a-f]{40}")  # huggingface_hub's REGEX_COMMIT_HASH
SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_PART = 255  # bytes in one file name, on every file system a models folder lives on


def is_repo_id(repo: object) -> bool:
    """ORG/NAME as the Hub spells it; "--" and ".." are refused too, since the cache folder
    is models--ORG--NAME and a name with them would read back as another repository."""
    return (isinstance(repo, str) and REPO.fullmatch(repo) is not None and "--" not in repo
            and ".." not in repo)


def path_problem(name: object) -> str | None:
    """Why `name` cannot be a relative path inside a folder (a repository's file, a branch
    under refs/), or None when it can. Control and invisible characters are refused too: they
    are no part of a real name and make one look like another in a listing."""
    if not isinstance(name, str) or not name:
        return "an empty name"
    odd = next((c for c in name if not c.isprintable()), None)
    if odd is not None:
        return f"a name with a control character ({odd!r})"
    if "\\" in name:
        return "a name with a backslash (a folder separator on Windows)"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "an absolute path"
    parts = name.split("/")
    if ".." in parts:
        return "a path with '..' in it, which climbs out of its folder"
    if "" in parts or "." in parts:
        return "a path with an empty or '.' part"
    if any(len(p.encode()) > MAX_PART for p in parts):
        return f"a name longer than {MAX_PART} bytes"
    return None


def commit_problem(commit: object) -> str | None:
    if isinstance(commit, str) and COMMIT.fullmatch(commit):
        return None
    return f"the commit {commit!r}, which is not 40 hex digits"


def sha256_problem(sha: object) -> str | None:
    if isinstance(sha, str) and SHA256.fullmatch(sha):
        return None
    return f"the sha256 {sha!r}, which is not 64 hex digits"


def check_revision(revision: str) -> str:
    """The --revision asked for: a branch, tag or commit, and a file under refs/ once pulled."""
    why = path_problem(revision)
    if why:
        raise ValueError(f"--revision {revision!r} is {why}: give a branch, tag or commit")
    return revision


def shown(text: str) -> str:
    """`text` as it may be printed: quoted with escapes when it holds characters a terminal
    would act on instead of showing."""
    return text if text.isprintable() else repr(text)
