"""A keyring backend kept in a JSON file (LLAMADESK_TEST_KEYRING), chosen with PYTHON_KEYRING_BACKEND:
the keyring package's own plugin interface, so the token lookup runs the real keyring code
on a machine without a Secret Service."""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend


class Keyring(KeyringBackend):
    priority = 1

    def _load(self) -> dict:
        p = Path(os.environ["LLAMADESK_TEST_KEYRING"])
        return json.loads(p.read_text()) if p.exists() else {}

    def get_password(self, service, username):
        return self._load().get(f"{service}|{username}")

    def set_password(self, service, username, password):
        data = self._load()
        data[f"{service}|{username}"] = password
        Path(os.environ["LLAMADESK_TEST_KEYRING"]).write_text(json.dumps(data))

    def delete_password(self, service, username):
        data = self._load()
        data.pop(f"{service}|{username}", None)
        Path(os.environ["LLAMADESK_TEST_KEYRING"]).write_text(json.dumps(data))
