"""A Hub that lies: names, commits and hashes that would put files outside the models folder, and
file URLs that redirect in a loop or to nowhere. Through `llamadesk pull` and `llamadesk models
search`, against the local Hub over a real socket, which answers whatever the client asks for
(a normalized "../" URL too), so only LlamaDesk's own checks stand between it and the disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.hub import library
from app.paths import user_models_dir
from tests.hub.conftest import cli, pointed_at, tiny_gguf
from tests.hub.mirror import Mirror, Repo, RepoFile
from tests.remote.servers import free_port

COMMIT = "c" * 40


@pytest.fixture(scope="module")
def evil(tmp_path_factory):
    m = Mirror(lenient=True)
    m.tiny = tiny_gguf(tmp_path_factory.mktemp("evilfiles") / "tiny.gguf", 200, 7)
    m.start()
    yield m
    m.stop()


@pytest.fixture
def hub(evil, monkeypatch):
    return pointed_at(evil, monkeypatch)


def refused(r) -> str:
    """The pull's one line: a nonzero exit, no traceback, the error last."""
    assert r.returncode != 0, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("llamadesk: error: "), r.stderr
    assert not [ln for ln in lines[:-1] if "error" in ln], r.stderr
    assert r.stdout == ""
    return lines[-1].removeprefix("llamadesk: error: ")


def everything(top: Path) -> set[Path]:
    return set(top.rglob("*"))


def outside_models(before: set[Path], top: Path) -> list[str]:
    """What appeared under `top` since `before` outside the models folder, the log and the
    caches a command keeps."""
    kept = [user_models_dir(create=False).resolve(),
            *(Path(os.environ[v]).resolve() for v in ("XDG_STATE_HOME", "XDG_CACHE_HOME"))]
    return sorted(str(p) for p in everything(top) - before
                  if not any(p.resolve().is_relative_to(k) for k in kept))


def snapshot_dir(repo: str, commit: str = COMMIT) -> Path:
    return library.root() / f"models--{repo.replace('/', '--')}" / "snapshots" / commit


def climb(target: Path, start: Path) -> str:
    """`target` as a path relative to `start`, the "../../.." a Hub would send."""
    return os.path.relpath(target, start)


# Each case: (repository, what the Hub calls the file, its commit, its claimed sha256,
# where a pull that trusted it would write, the line's words after "REPO: ").
def _cases(tmp_path: Path) -> dict[str, tuple]:
    out = tmp_path / "outside"
    abs_target = out / "x" / "abs-Q4_K_M.gguf"
    dots = "evil/dots-GGUF"
    dots_target = out / "dots" / "dots-Q4_K_M.gguf"
    dots_name = climb(dots_target, snapshot_dir(dots))
    commit_repo = "evil/commit-GGUF"
    bad_commit = climb(out / "commit", snapshot_dir(commit_repo).parent)
    sha_repo = "evil/sha-GGUF"
    blobs = library.root() / f"models--{sha_repo.replace('/', '--')}" / "blobs"
    bad_sha = climb(out / "sha" / "blob", blobs)
    return {
        "absolute rfilename": ("evil/abs-GGUF", str(abs_target), COMMIT, None, abs_target,
                               f"the Hub names the file {str(abs_target)!r}, an absolute path"),
        "../ rfilename": (dots, dots_name, COMMIT, None, dots_target,
                          f"the Hub names the file {dots_name!r}, a path with '..' in it, which "
                          "climbs out of its folder"),
        "commit of ../": (commit_repo, "commit-Q4_K_M.gguf", bad_commit, None, out / "commit",
                          f"the Hub answered with the commit {bad_commit!r}, which is not 40 hex digits"),
        "sha256 of ../": (sha_repo, "sha-Q4_K_M.gguf", COMMIT, bad_sha, out / "sha",
                          f"the Hub gives 'sha-Q4_K_M.gguf' the sha256 {bad_sha!r}, which is not 64 "
                          "hex digits"),
        "backslashes": ("evil/backslash-GGUF", "..\\..\\..\\..\\back-Q4_K_M.gguf", COMMIT, None,
                        out / "back-Q4_K_M.gguf",
                        "the Hub names the file '..\\\\..\\\\..\\\\..\\\\back-Q4_K_M.gguf', a name with a "
                        "backslash (a folder separator on Windows)"),
        "NUL": ("evil/nul-GGUF", "nul\x00-Q4_K_M.gguf", COMMIT, None, out / "nul",
                "the Hub names the file 'nul\\x00-Q4_K_M.gguf', a name with a control character ('\\x00')"),
        "terminal escape": ("evil/esc-GGUF", "esc\x1b[2J-Q4_K_M.gguf", COMMIT, None, out / "esc",
                            "the Hub names the file 'esc\\x1b[2J-Q4_K_M.gguf', a name with a control "
                            "character ('\\x1b')"),
        "commit with a slash": ("evil/slash-GGUF", "slash-Q4_K_M.gguf", f"{COMMIT[:20]}/{COMMIT[:19]}", None,
                                out / "slash", f"the Hub answered with the commit '{COMMIT[:20]}/"
                                f"{COMMIT[:19]}', which is not 40 hex digits"),
    }


@pytest.mark.parametrize("case", list(_cases(Path("/x"))))
def test_a_name_that_would_leave_the_models_folder_is_refused(hub, tmp_path, case):
    repo, name, commit, claimed, target, why = _cases(tmp_path)[case]
    hub.add(Repo(repo, [RepoFile(name, path=hub.tiny, claimed_sha256=claimed)], commit=commit))
    before = everything(tmp_path)
    line = refused(cli("pull", repo))
    assert line == f"{repo}: {why}; refused, nothing was written"
    assert not target.exists() and not target.parent.exists() and not (tmp_path / "outside").exists()
    assert outside_models(before, tmp_path) == []
    assert not hub.served("/cdn/"), "not a byte of it was asked for"


def test_a_file_already_there_is_never_replaced(hub, tmp_path):
    """What an absolute name points at may be a file of the user's: os.replace would put the
    download in its place."""
    victim = tmp_path / "notes" / "victim-Q4_K_M.gguf"
    victim.parent.mkdir()
    victim.write_bytes(b"the user's own file")
    hub.add(Repo("evil/victim-GGUF", [RepoFile(str(victim), path=hub.tiny)], commit=COMMIT))
    before = everything(tmp_path)
    assert "an absolute path" in refused(cli("pull", "evil/victim-GGUF"))
    assert victim.read_bytes() == b"the user's own file"
    assert outside_models(before, tmp_path) == []


def test_a_good_file_beside_a_bad_one_is_pulled_inside(hub, tmp_path):
    """The refusal is the bad file's own: the repository's other files are pulled as ever."""
    bad = str(tmp_path / "outside" / "bad-Q8_0.gguf")
    hub.add(Repo("evil/mixed-GGUF", [RepoFile("good-Q4_K_M.gguf", path=hub.tiny),
                                     RepoFile(bad, path=hub.tiny)], commit=COMMIT))
    r = cli("pull", "evil/mixed-GGUF")
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == snapshot_dir("evil/mixed-GGUF") / "good-Q4_K_M.gguf"
    assert "an absolute path" in refused(cli("pull", "evil/mixed-GGUF:Q8_0"))
    assert not (tmp_path / "outside").exists()


def test_a_link_out_of_the_models_folder_is_not_followed(hub, tmp_path):
    """Defence in depth: every path is resolved before a write, so a folder inside that is a
    link to elsewhere (left there, or planted) takes nothing out of the models folder."""
    repo = "evil/link-GGUF"
    hub.add(Repo(repo, [RepoFile("link-Q4_K_M.gguf", path=hub.tiny)], commit=COMMIT))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    snapshots = snapshot_dir(repo).parent
    snapshots.parent.mkdir(parents=True)
    snapshots.symlink_to(elsewhere, target_is_directory=True)
    line = refused(cli("pull", repo))
    assert line == (f"{snapshots / COMMIT} leads to {elsewhere / COMMIT}, outside the models folder's "
                    f"{snapshots}; refused, nothing was written")
    assert list(elsewhere.iterdir()) == []


def test_a_revision_that_climbs_out_is_refused_before_asking(hub, tmp_path):
    """--revision becomes refs/REVISION once pulled: the user's word, checked as the Hub's is."""
    hub.add(Repo("evil/rev-GGUF", [RepoFile("rev-Q4_K_M.gguf", path=hub.tiny)], commit=COMMIT))
    before = everything(tmp_path)
    r = cli("pull", "evil/rev-GGUF", "--revision", "../../../../outside")
    assert r.returncode == 2
    assert refused(r) == ("--revision '../../../../outside' is a path with '..' in it, which climbs out of "
                          "its folder: give a branch, tag or commit")
    assert not [s for s in hub.log if "rev-GGUF" in s.path] and outside_models(before, tmp_path) == []


def test_search_lists_what_is_sound_and_says_what_was_left_out(hub, tmp_path):
    """A result whose id is no ORG/NAME is never asked for; a file whose name would climb out
    is left out of its repository's row, the sound files listed with their fit."""
    hub.add(Repo("acme/lies-odd-GGUF", [RepoFile("ok-Q4_K_M.gguf", path=hub.tiny),
                                        RepoFile("../../x/odd-Q8_0.gguf", path=hub.tiny)], commit=COMMIT,
                 downloads=3))
    hub.add(Repo("../../lies-GGUF", [RepoFile("lies-Q4_K_M.gguf", path=hub.tiny)], downloads=2))
    r = cli("models", "search", "lies", "--json")
    assert r.returncode == 0, r.stderr
    rows = {x["repo"]: x for x in json.loads(r.stdout)}
    assert rows["../../lies-GGUF"]["files"] == []
    assert rows["../../lies-GGUF"]["note"] == \
        "the Hub lists '../../lies-GGUF' as a repository, which is no ORG/NAME; left out"
    odd = rows["acme/lies-odd-GGUF"]
    assert [f["name"] for f in odd["files"]] == ["ok-Q4_K_M.gguf"] and odd["files"][0]["fit"] != "?"
    assert odd["note"] == ("the Hub names the file '../../x/odd-Q8_0.gguf', a path with '..' in it, which "
                           "climbs out of its folder: left out")
    asked = [s.path for s in hub.log]
    assert not [p for p in asked if "lies-GGUF" in p and "lies-odd-GGUF" not in p], asked


def test_search_survives_a_result_whose_file_redirects_in_a_loop(hub):
    """One repository whose file URL redirects to itself, one whose CDN is down, one sent to a
    scheme httpx does not speak: each costs its own fit and says why in one line; the sound
    one is listed with its fit as ever."""
    closed = f"http://127.0.0.1:{free_port()}/cdn/gone"
    hub.add(Repo("acme/loop-a-GGUF", [RepoFile("loop-Q4_K_M.gguf", path=hub.tiny)], redirect="self",
                 downloads=40))
    hub.add(Repo("acme/loop-b-GGUF", [RepoFile("down-Q4_K_M.gguf", path=hub.tiny)], redirect=closed,
                 downloads=30))
    hub.add(Repo("acme/loop-c-GGUF", [RepoFile("badurl-Q4_K_M.gguf", path=hub.tiny)],
                 redirect="ftp://127.0.0.1/x", downloads=20))
    hub.add(Repo("acme/loop-d-GGUF", [RepoFile("sound-Q4_K_M.gguf", path=hub.tiny)], downloads=10))
    r = cli("models", "search", "loop-")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    rows = r.stdout.split("\nacme/")
    assert [row.split()[0].removeprefix("acme/") for row in rows] == \
        ["loop-a-GGUF", "loop-b-GGUF", "loop-c-GGUF", "loop-d-GGUF"]
    loop, down, badurl, sound = (row.splitlines() for row in rows)
    assert loop[1] == ("  (no fit: acme/loop-a-GGUF/loop-Q4_K_M.gguf: too many redirects (the server sends "
                       "the request round in a loop))")
    assert loop[2].split()[0] == "Q4_K_M" and loop[2].split()[3] == "?"
    assert down[1].startswith("  (no fit: acme/loop-b-GGUF/down-Q4_K_M.gguf: cannot connect")
    assert badurl[1] == ("  (no fit: acme/loop-c-GGUF/badurl-Q4_K_M.gguf: the connection failed (Request URL "
                         "has an unsupported protocol 'ftp://'.))")
    assert len(sound) == 2 and sound[1].split()[3] == "fits"


def test_pull_of_a_file_that_redirects_in_a_loop_is_one_line(hub):
    hub.add(Repo("acme/pullcircle-GGUF", [RepoFile("loop-Q4_K_M.gguf", path=hub.tiny)], redirect="self"))
    line = refused(cli("pull", "acme/pullcircle-GGUF"))
    assert line == ("acme/pullcircle-GGUF/loop-Q4_K_M.gguf: too many redirects (the server sends the "
                    "request round in a loop)")
    assert not [p for p in library.root().rglob("*") if p.is_file()]
