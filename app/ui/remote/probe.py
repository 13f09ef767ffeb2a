"""The Connect dialog's question to a server, on the llamadesk-list-models thread.

A slow or unreachable host must not freeze the window, so the probe runs as
every other worker does (app/ui/threads.py): asked through a queued signal,
answering through one, its thread ended when the dialog closes rather than
left behind to answer a dialog that is gone.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot

from app.errors import LlamaDeskError
from app.remote import keys
from app.remote.endpoint import Endpoint


class ProbeWorker(QObject):
    """Lives on the probe's thread; never touches a widget."""

    done = Signal(object, object)  # ServerInfo or None, error text or None

    @Slot(object)
    def probe(self, ep: Endpoint) -> None:
        from app.remote import transport as remote_http
        from app.remote.server import probe

        try:
            ep = keys.with_saved_key(ep)  # the keyring may be slow to answer too
            with remote_http.client(ep) as http:
                self.done.emit(probe(http, ep), None)
        except LlamaDeskError as e:
            self.done.emit(None, str(e))
        except Exception as e:  # noqa: BLE001 - a client bug must not take the window down
            self.done.emit(None, f"{type(e).__name__}: {e}")
