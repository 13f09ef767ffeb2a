"""`llamadesk serve` inside the window: uvicorn on a thread with its own event loop, never the
GUI thread, over a ServeEngine that builds its own llama context on the chat's loaded weights.

While it serves, the chat's turns are routed to it (it is one of the engine bridge's chat
routers): they take a slot like any online request, so the window and the server's clients
share one continuous batch instead of two contexts fighting over the CPU.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from app.chat.routed import RoutedTurn
from app.engine.loader import LoadedModel

if TYPE_CHECKING:
    import uvicorn

    from app.serve.engine_host import ServeEngine

log = logging.getLogger("llamadesk.ui.server")
DEFAULT_PORT = 8765


class ServerRunner(QObject):
    chat_event = Signal(object, object)  # chat job id, engine event
    chat_replied = Signal(object, object)  # chat Job, Reply
    chat_failed = Signal(object, str, bool)  # chat Job, message, is a context overflow
    state_changed = Signal(bool, str)  # serving, one line (the URL, or why it stopped or failed)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host: ServeEngine | None = None  # while serving
        self.url: str | None = None
        self.loaded: str = ""  # what the model served took to load, for the panel
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def serving(self) -> bool:
        return self.host is not None

    def start(self, model: LoadedModel, model_id: str, port: int = DEFAULT_PORT, slots: int = 4,
              slot_ctx: int = 4096, data_dir=None) -> str | None:
        """Serve on 127.0.0.1:`port`; returns None, or one line saying why it could not."""
        import uvicorn

        from app.errors import LlamaDeskError
        from app.serve.api import create_app
        from app.serve.engine_host import ServeEngine

        if self.serving:
            return None
        t0 = time.perf_counter()
        try:
            host = ServeEngine(model, slots, slot_ctx)
        except (LlamaDeskError, ValueError) as e:
            return f"could not start the server's engine: {e}"
        engine_s = time.perf_counter() - t0
        # Bound here, so a port in use is a message now, not uvicorn's sys.exit() on its thread.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's own bind does
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as e:
            sock.close()
            host.close()
            return f"could not listen on 127.0.0.1:{port} ({e.strerror or e}; is another server using it?)"
        app = create_app(host, model_id, data_dir=data_dir)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))

        def serve() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException:
                log.exception("the server's HTTP thread stopped")
            finally:
                sock.close()

        thread = threading.Thread(target=serve, name="llamadesk-serve-http", daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not server.started:
            server.should_exit = True
            thread.join(5)
            host.close()
            return f"the server on 127.0.0.1:{port} did not start (see the log)"
        self.host, self._server, self._thread = host, server, thread
        self.loaded = (f"{model_id}: weights loaded in {model.report.load_s:.2f} s (the chat's), the "
                       f"server's {slots + 1} slots ready in {engine_s:.2f} s")
        self.url = f"http://127.0.0.1:{port}/v1"
        self.state_changed.emit(True, self.url)
        return None

    def stop(self, why: str = "stopped") -> None:
        """Close the port, end the HTTP thread, free the server's context. Safe to call twice."""
        if not self.serving:
            return
        host, self.host = self.host, None
        self._server.should_exit = True
        self._thread.join(10)
        host.close()
        self._server = self._thread = None
        self.url = None
        self.state_changed.emit(False, why)

    # -- the chat's router ----------------------------------------------------
    def route(self, job) -> bool:
        """A chat turn as an online request of the server; False when not serving."""
        host = self.host
        if host is None:
            return False
        from app.serve.engine_host import Busy

        turn = RoutedTurn(job.history, job.user_text, job.settings, job.system, job.cancel,
                          lambda ev: self.chat_event.emit(job.id, ev),
                          lambda reply: self.chat_replied.emit(job, reply),
                          lambda msg, overflow: self.chat_failed.emit(job, msg, overflow))
        turn.stop = host.cancel  # the chat's Stop button
        try:
            # The host hands every event, RequestDone included, to the sink on its engine thread.
            turn.request_id = host.submit_online(turn.request(), turn.event)
        except Busy:
            return False  # the chat's own engine answers instead
        return True
