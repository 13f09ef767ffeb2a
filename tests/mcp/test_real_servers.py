"""The hub against MCP servers no one here wrote: mcp-server-time, -git and -fetch from PyPI, over stdio."""

from __future__ import annotations

import functools
import http.server
import json
import subprocess
import threading
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from app.mcp.config import ServerConfig
from tests.mcp.conftest import descendants, program


def test_time_server_lists_its_tools_and_tells_the_time_in_tokyo(make_hub):
    hub = make_hub(ServerConfig("time", program("mcp-server-time")))
    assert hub.states()["time"].status == "stopped"  # nothing starts before it is needed
    state = hub.ensure(["time"])["time"]
    assert state.status == "ready" and state.error is None
    tools = {t.name: t for t in state.tools}
    assert {"get_current_time", "convert_time"} <= set(tools)
    d = tools["get_current_time"].definition()
    assert d["type"] == "function" and d["function"]["name"] == "get_current_time"
    assert "timezone" in d["function"]["parameters"]["properties"]
    assert tools["get_current_time"].definition("time__get_current_time")["function"]["name"] == \
        "time__get_current_time"

    result = hub.call("time", "get_current_time", {"timezone": "Asia/Tokyo"}).result(30)
    assert not result.is_error, result.text
    answer = json.loads(result.text)
    assert answer["timezone"] == "Asia/Tokyo"
    when = datetime.fromisoformat(answer["datetime"])
    assert when.utcoffset() == datetime.now(ZoneInfo("Asia/Tokyo")).utcoffset()
    assert abs((when - datetime.now(ZoneInfo("UTC"))).total_seconds()) < 120


def test_git_server_reports_the_status_of_a_fresh_repository(make_hub, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "notes.txt").write_text("untracked\n")
    hub = make_hub(ServerConfig("git", program("mcp-server-git"), ("--repository", str(repo))))
    state = hub.ensure(["git"])["git"]
    assert state.status == "ready", state.error
    assert "git_status" in {t.name for t in state.tools}
    result = hub.call("git", "git_status", {"repo_path": str(repo)}).result(30)
    assert not result.is_error, result.text
    assert "notes.txt" in result.text and "Untracked" in result.text


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def local_site(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "page.html").write_text(
        "<html><head><title>Kettles</title></head><body><article><h1>Descaling a kettle</h1>"
        "<p>Fill the kettle with one part vinegar and two parts water, boil, and leave it for an hour."
        " The fur comes off the element without scrubbing.</p></article></body></html>")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_fetch_server_brings_back_a_local_page(make_hub, local_site):
    hub = make_hub(ServerConfig("fetch", program("mcp-server-fetch"),
                                ("--ignore-robots-txt", "--allow-private-ips")))
    state = hub.ensure(["fetch"])["fetch"]
    assert state.status == "ready", state.error
    result = hub.call("fetch", "fetch", {"url": f"{local_site}/page.html"}).result(60)
    assert not result.is_error, result.text
    assert "one part vinegar and two parts water" in result.text


def test_close_stops_every_real_server_and_its_processes(make_hub, tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    before = {p.pid for p in descendants()}
    hub = make_hub(ServerConfig("time", program("mcp-server-time")),
                   ServerConfig("git", program("mcp-server-git"), ("--repository", str(tmp_path))))
    states = hub.ensure(["time", "git"])
    assert {s.status for s in states.values()} == {"ready"}, states
    started = [p for p in descendants() if p.pid not in before]
    assert len(started) >= 2
    hub.close()
    assert not [p for p in descendants() if p.pid not in before]
    hub.close()  # a second close is nothing
    assert hub.call("time", "get_current_time", {"timezone": "UTC"}).result(1).is_error
