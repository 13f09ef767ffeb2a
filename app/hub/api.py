"""The Hub as huggingface_hub sees it: the endpoint, the token, repository metadata, and its
errors turned into one line each.

huggingface_hub is the Hub's own client: it knows the API's routes and pagination, parses
siblings with their LFS sha256, builds the auth and user-agent headers, and sorts a 401
into gated, private and missing. What it reads once at import (HF_ENDPOINT) is read here
at each call instead, so a test or a window that changes it is obeyed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

from app.hub import names
from app.hub.errors import HubError, HubRequestError, Unreachable, UnsafeAnswer
from app.hub.quant import quant_of
from app.remote.keys import key_from_keyring

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_S = 30.0


def endpoint() -> str:
    """HF_ENDPOINT (a mirror, or the tests' local Hub) or huggingface.co, without a trailing /."""
    return (os.environ.get("HF_ENDPOINT", "").strip() or DEFAULT_ENDPOINT).rstrip("/")


def token() -> str | None:
    """HF_TOKEN or the token `hf auth login` saved (huggingface_hub.get_token reads both), else the
    one saved in the system keyring for this endpoint (service "llamadesk", user = the endpoint
    URL, as app.remote.keys keeps API keys)."""
    from huggingface_hub import get_token

    return get_token() or key_from_keyring(endpoint())


def hf_api():
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint(), token=token() or False, library_name="llamadesk")


def auth_headers() -> dict[str, str]:
    """The headers huggingface_hub itself sends (Authorization when a token exists, its user agent)."""
    from huggingface_hub.utils import build_hf_headers

    return build_hf_headers(token=token() or False, library_name="llamadesk")


@dataclass(frozen=True)
class RemoteFile:
    """One GGUF in a repository at one commit, with what a download must check it against."""

    repo: str
    name: str  # path inside the repository
    size: int
    sha256: str | None  # the LFS object id; None for a file kept in git itself
    commit: str
    refused: str | None = None  # why its name or sha256 cannot become a path here

    @property
    def quant(self) -> str:
        return quant_of(self.name)

    def url(self) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo, self.name, revision=self.commit, endpoint=endpoint())


def gguf_files(repo: str, revision: str = "main") -> tuple[list[RemoteFile], object]:
    """The repository's .gguf files with sizes and sha256 (one `model_info(..., files_metadata)`
    call), and the ModelInfo itself."""
    with hub_errors(repo, revision=revision):
        info = hf_api().model_info(repo, revision=revision, files_metadata=True, timeout=TIMEOUT_S)
    commit = info.sha
    if commit is None:
        raise UnsafeAnswer(f"{repo}: the Hub's answer for {revision!r} names no commit; nothing was written")
    why = names.commit_problem(commit)
    if why:  # every file's path holds the commit: the whole repository is refused
        raise UnsafeAnswer(f"{repo}: the Hub answered with {why}; refused, nothing was written")
    files = []
    for s in info.siblings or ():
        name = s.rfilename
        if not isinstance(name, str) or not name.lower().endswith(".gguf"):
            continue
        sha = s.lfs.sha256 if s.lfs else None
        size = s.lfs.size if s.lfs else s.size
        files.append(RemoteFile(repo, name, _size(size), sha, commit, _refused(name, sha, size)))
    return files, info


def _size(size) -> int:
    return size if isinstance(size, int) and size >= 0 else 0


def _refused(name: str, sha, size) -> str | None:
    """Why a sibling cannot be pulled as the Hub describes it, as the line will say it."""
    why = names.path_problem(name)
    if why:
        return f"the Hub names the file {name!r}, {why}"
    if sha is not None and (why := names.sha256_problem(sha)):
        return f"the Hub gives {name!r} {why}"
    if size is not None and not (isinstance(size, int) and size >= 0):
        return f"the Hub gives {name!r} the size {size!r}"
    return None


def licence_url(repo: str) -> str:
    return f"{endpoint()}/{repo}"


@contextlib.contextmanager
def hub_errors(repo: str | None = None, filename: str | None = None,
               revision: str | None = None) -> Iterator[None]:
    """huggingface_hub's and the network's exceptions as one HubError line naming what failed."""
    from huggingface_hub import errors as hf

    where = repo or endpoint()
    try:
        yield
    except hf.GatedRepoError:
        raise HubRequestError(gated_line(repo or "")) from None
    except hf.RepositoryNotFoundError:
        hint = "" if token() else " (if it is private, set HF_TOKEN)"
        raise HubRequestError(f"{repo}: no such repository on {endpoint()}{hint}") from None
    except hf.RevisionNotFoundError:
        raise HubRequestError(f"{repo}: no revision {revision!r}") from None
    except hf.EntryNotFoundError:
        raise HubRequestError(f"{repo}: no file {filename!r} at {revision or 'main'}") from None
    except hf.HfHubHTTPError as e:
        raise status_error(where, e.response.status_code if e.response is not None else None,
                           repo) from None
    except Exception as e:
        line = transport_line(e)
        if line is None:
            raise
        kind = Unreachable if "Connect" in type(e).__name__ or "Timeout" in type(e).__name__ else HubError
        raise kind(f"{f'{repo}/{filename}' if repo and filename else endpoint()}: {line}") from None


def gated_line(repo: str) -> str:
    who = "your token has no access to it" if token() else "no token given (set HF_TOKEN)"
    return f"{repo} is gated and {who}: accept the licence at {licence_url(repo)}"


def status_error(where: str, status: int | None, repo: str | None = None) -> HubError:
    """One line for an HTTP status the Hub answered with."""
    if status in (401, 403) and repo:
        return HubRequestError(gated_line(repo) if status == 403 or token() is None else
                               f"{repo}: the token was refused (HTTP 401): check HF_TOKEN")
    if status == 404:
        return HubRequestError(f"{where}: not found (HTTP 404)")
    if status == 416:
        return HubError(f"{where}: the server refused the byte range asked for (HTTP 416)")
    return HubError(f"{where}: the Hub answered HTTP {status}")


def transport_line(e: BaseException) -> str | None:
    """What a transport exception of httpx or httpx2 means, or None for anything else."""
    name = type(e).__name__
    module = type(e).__module__.split(".")[0]
    if module not in ("httpx", "httpx2", "httpcore", "httpcore2"):
        return None
    if "Connect" in name:
        return "cannot connect (is the endpoint right, and the network up?)"
    if "Timeout" in name:
        return "timed out waiting for the server"
    if name == "TooManyRedirects":
        return "too many redirects (the server sends the request round in a loop)"
    return f"the connection failed ({str(e) or name})"
