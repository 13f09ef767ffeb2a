"""The hub over streamable HTTP and SSE, against the SDK's own MCPServer run by uvicorn on a free port:
what comes back is text, with images and binary resources named and long results cut."""

from __future__ import annotations

import time

import pytest

from app.mcp.config import ServerConfig
from app.mcp.results import IMAGE_OMITTED


@pytest.fixture(params=["streamable-http", "sse"])
def url(request, http_tools_url, sse_tools_url):
    return http_tools_url if request.param == "streamable-http" else sse_tools_url


def test_tools_are_listed_and_called_over_http(make_hub, url):
    server = ServerConfig("web", url=url)
    assert server.transport == ("sse" if url.endswith("/sse") else "http")
    hub = make_hub(server)
    state = hub.ensure(["web"], timeout=20)["web"]
    assert state.status == "ready", state.error
    tools = {t.name: t for t in state.tools}
    assert set(tools) == {"echo", "picture", "big", "fail"}
    assert tools["echo"].description == "Say the text back."
    assert tools["echo"].input_schema["properties"]["text"]["type"] == "string"
    result = hub.call("web", "echo", {"text": "over the wire"}).result(20)
    assert (result.text, result.is_error, result.notes) == ("echo: over the wire", False, ())


def test_images_and_resources_are_named_not_dropped(make_hub, url):
    hub = make_hub(ServerConfig("web", url=url))
    result = hub.call("web", "picture", {}).result(20)  # a call starts its server when it must
    assert not result.is_error
    lines = result.text.split("\n")
    assert lines[0] == "a red dot"
    assert f"[{IMAGE_OMITTED}]" in lines and "[resource omitted: file:///tmp/red-dot.png]" in lines
    assert result.notes == (IMAGE_OMITTED, "resource omitted: file:///tmp/red-dot.png")
    assert "iVBOR" not in result.text  # no base64 reaches the model


def test_a_long_result_is_cut_with_its_size_said(make_hub, url):
    hub = make_hub(ServerConfig("web", url=url), max_result_chars=1_000)
    result = hub.call("web", "big", {"n": 400_000}).result(30)
    assert result.notes == ("cut from 400,000 to 1,000 characters",)
    body, said = result.text.rsplit("\n", 1)
    assert len(body) == 1_000 and body.startswith("0123456789")
    assert said == "[cut from 400,000 to 1,000 characters]"
    short = hub.call("web", "big", {"n": 1_000}).result(30)
    assert len(short.text) == 1_000 and short.notes == ()


def test_a_result_of_megabytes_comes_over_streamable_http(make_hub, http_tools_url):
    # The SDK bounds one streamed message at 1 MiB; a fetched page can be more, and is cut here.
    hub = make_hub(ServerConfig("web", url=http_tools_url))
    result = hub.call("web", "big", {"n": 3_000_000}).result(60)
    assert not result.is_error, result.text
    assert result.notes == ("cut from 3,000,000 to 16,000 characters",)


def test_tool_errors_come_back_as_errors_and_the_server_stays_ready(make_hub, url):
    hub = make_hub(ServerConfig("web", url=url))
    failed = hub.call("web", "fail", {}).result(20)
    assert failed.is_error and "fail" in failed.text
    unknown = hub.call("web", "no_such_tool", {}).result(20)
    assert unknown.is_error and "\n" not in unknown.text
    assert hub.states()["web"].status == "ready"
    assert hub.call("web", "echo", {"text": "still here"}).result(20).text == "echo: still here"


def test_a_server_that_goes_away_fails_the_call_in_one_line(make_hub):
    from tests.mcp.conftest import start_http_tools

    proc, url = start_http_tools("streamable-http")
    try:
        hub = make_hub(ServerConfig("web", url=url))
        assert hub.ensure(["web"], timeout=20)["web"].status == "ready"
    finally:
        proc.kill()
        proc.wait(10)
    t0 = time.monotonic()
    result = hub.call("web", "echo", {"text": "anyone?"}, timeout=10).result(30)
    assert result.is_error and "\n" not in result.text
    assert time.monotonic() - t0 < 12
