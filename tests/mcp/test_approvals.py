"""Always-allow decisions: saved the moment they are made, revocable, and safe when the file is damaged."""

from __future__ import annotations

import json

from app.mcp.approvals import Approvals, approvals_path


def test_decisions_are_saved_at_once_and_revoked_at_once(isolated_dirs):
    a = Approvals.load()
    assert a.entries() == [] and not a.allowed("time", "get_current_time")
    a.allow_always("time", "get_current_time")
    a.allow_always("git", "git_status")
    assert approvals_path() == isolated_dirs / "xdg_config_home" / "llamadesk" / "mcp-approvals.json"
    b = Approvals.load()  # another reader sees them without any save call
    assert b.allowed("time", "get_current_time") and not b.allowed("time", "convert_time")
    assert b.entries() == [("git", "git_status"), ("time", "get_current_time")]
    b.revoke("time", "get_current_time")
    assert Approvals.load().entries() == [("git", "git_status")]


def test_a_damaged_file_asks_again_and_is_kept_aside(tmp_path):
    path = tmp_path / "mcp-approvals.json"
    path.write_text('{"always": {"time": ["get_current_time"]')
    a = Approvals.load(path)
    assert a.entries() == []  # the safe side: everything is asked about again
    a.allow_always("git", "git_status")
    assert json.loads(path.read_text()) == {"always": {"git": ["git_status"]}}
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("mcp-approvals.json.damaged-")]
    assert len(kept) == 1 and kept[0].read_text() == '{"always": {"time": ["get_current_time"]'
