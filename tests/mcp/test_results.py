"""A CallToolResult turned into text for a text-only model (the SDK's own result types)."""

from __future__ import annotations

import mcp_types as types

from app.mcp.results import AUDIO_OMITTED, IMAGE_OMITTED, from_sdk


def test_text_parts_are_joined_and_what_cannot_be_read_is_named():
    r = types.CallToolResult(content=[
        types.TextContent(text="first"),
        types.EmbeddedResource(resource=types.TextResourceContents(uri="file:///a.txt",
                                                                   text="the file's text")),
        types.AudioContent(data="AAAA", mime_type="audio/wav"),
        types.ResourceLink(uri="https://example.com/doc", name="doc"),
        types.TextContent(text="last"),
    ])
    out = from_sdk(r, 16_000)
    assert out.text.split("\n") == ["first", "the file's text", f"[{AUDIO_OMITTED}]",
                                    "[resource: https://example.com/doc]", "last"]
    assert out.notes == (AUDIO_OMITTED,) and not out.is_error


def test_errors_structured_results_and_repeated_notes():
    err = from_sdk(types.CallToolResult(content=[types.TextContent(text="bad input")], is_error=True), 100)
    assert err.is_error and err.text == "bad input"
    structured = from_sdk(types.CallToolResult(content=[], structured_content={"temp": 21}), 100)
    assert structured.text == '{"temp": 21}'
    image = types.ImageContent(data="AA", mime_type="image/png")
    two = from_sdk(types.CallToolResult(content=[image, image]), 100)
    assert two.notes == (IMAGE_OMITTED,) and two.text.count(IMAGE_OMITTED) == 2
