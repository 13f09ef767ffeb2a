"""The journal's promise, on real files: after a power cut it claims no byte the disk lost, and a
token from the system keyring opens a gated repository."""

from __future__ import annotations

import json
import os

from app.hub.journal import Journal
from tests.hub.conftest import GATED, cli
from tests.hub.mirror import GOOD_TOKEN

K = 64 << 10


def test_after_a_power_cut_only_bytes_that_reached_the_disk_are_claimed(tmp_path):
    size = 5 * K
    data, jpath = tmp_path / "x.incomplete", tmp_path / "x.incomplete.journal"
    fd = os.open(data, os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, size)
        payload = os.urandom(size)
        j = Journal.create(jpath, {"sha256": "ab" * 32, "size": size})
        for i in range(5):
            os.pwrite(fd, payload[i * K:(i + 1) * K], i * K)
            j.record(i * K, payload[i * K:(i + 1) * K])
            if i == 1:
                j.checkpoint(fd)  # chunks 0 and 1 are synced before this mark
        j.close()
        # The power cut: chunk 3's bytes never reached the disk, and the last record was torn.
        os.pwrite(fd, b"\0" * K, 3 * K)
        with open(jpath, "r+b") as f:
            f.truncate(jpath.stat().st_size - 5)
        back = Journal.resume(jpath, fd, {"sha256": "ab" * 32, "size": size})
        assert back is not None and back.ranges.pairs() == [(0, 3 * K)]  # 3 lost, 4 torn
        assert back.gaps() == [(3 * K, 5 * K)]
        back.close()
        again = Journal.resume(jpath, fd, {"sha256": "ab" * 32, "size": size})  # compacted and marked
        assert again is not None and again.ranges.pairs() == [(0, 3 * K)]
        again.close()
        assert Journal.resume(jpath, fd, {"sha256": "cd" * 32, "size": size}) is None  # another file
    finally:
        os.close(fd)


def test_a_token_saved_in_the_keyring_opens_a_gated_repository(hub, tmp_path, monkeypatch):
    store = tmp_path / "keyring.json"
    store.write_text(json.dumps({f"llamadesk|{hub.url}": GOOD_TOKEN}))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "tests.hub.file_keyring.Keyring")
    monkeypatch.setenv("LLAMADESK_TEST_KEYRING", str(store))
    r = cli("pull", GATED)
    assert r.returncode == 0, r.stderr
    assert all(s.authorization for s in hub.served("/resolve/", "HEAD"))
