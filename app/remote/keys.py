"""API keys from an environment variable or the system keyring, never from plain files.

The keyring (Secret Service, macOS Keychain, Windows Credential Locker) is
what a desktop user already trusts with passwords; the `keyring` package is
the well-kept way to reach it from Python. A machine with no keyring backend
(a headless box, CI) says so in one line instead of storing the key anywhere
else.
"""

from __future__ import annotations

import os

from app.remote.errors import EndpointConfigError, Fix

SERVICE = "llamadesk"


def key_from_env(var: str) -> str:
    if not var or not var.replace("_", "").isalnum():
        raise EndpointConfigError(f"--api-key-env needs an environment variable name, got {var!r}")
    value = os.environ.get(var)
    if value is None:
        raise EndpointConfigError(f"the environment variable {var} is not set (it should hold the API key)")
    if not value.strip():
        raise EndpointConfigError(f"the environment variable {var} is empty (it should hold the API key)")
    return value.strip()


def _keyring():
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:  # pragma: no cover - a dependency; kept for a broken install
        raise EndpointConfigError("the keyring package is not installed",
                                  Fix("pass the key with", "api_key")) from None
    if isinstance(keyring.get_keyring(), fail.Keyring):
        raise EndpointConfigError("no system keyring is available here", Fix("pass the key with", "api_key"))
    return keyring


def key_from_keyring(base_url: str) -> str | None:
    """The key saved for this endpoint, or None when none was saved (or no keyring exists)."""
    try:
        kr = _keyring()
    except EndpointConfigError:
        return None
    try:
        return kr.get_password(SERVICE, base_url)
    except Exception:  # noqa: BLE001 - a locked or broken keyring is not a crash
        return None


def with_saved_key(ep):
    """`ep` with the keyring's key for it when it has none of its own. A keyring can block
    (a locked wallet, a slow D-Bus), so the window calls this on a worker thread."""
    if ep.api_key:
        return ep
    key = key_from_keyring(ep.base_url)
    return ep if key is None else type(ep).parse(ep.base_url, key, ep.stall_s)


def save_key(base_url: str, key: str) -> None:
    kr = _keyring()
    try:
        kr.set_password(SERVICE, base_url, key)
    except Exception as e:  # noqa: BLE001
        raise EndpointConfigError(f"the system keyring refused the key: {e}") from None


def forget_key(base_url: str) -> None:
    try:
        _keyring().delete_password(SERVICE, base_url)
    except Exception:  # noqa: BLE001 - nothing saved is already forgotten
        pass
