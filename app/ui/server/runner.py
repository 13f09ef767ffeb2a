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

from PySide6.QtCore import QObject, Signal

from app.batch.types import BatchRequest, RequestDone
from app.chat.budget import fit_history
from app.chat.session import Reply
from app.engine.events import Finished
from app.engine.loader import LoadedModel
from app.engine.stats import ReplyStats

log = logging.getLogger("llamadesk.ui.server")
DEFAULT_PORT = 8765


class ServerRunner(QObject):
    chat_event = Signal(object, object)  # chat job id, engine event
    chat_replied = Signal(object, object)  # chat Job, Reply
    chat_failed = Signal(object, str, bool)  # chat Job, message, is a context overflow
    state_changed = Signal(bool, str)  # serving, one line (the URL, or why it stopped or failed)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = None  # ServeEngine while serving
        self.url: str | None = None
        self._server = None
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
        try:
            host = ServeEngine(model, slots, slot_ctx)
        except (LlamaDeskError, ValueError) as e:
            return f"could not start the server's engine: {e}"
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
            except BaseException:  # noqa: BLE001 - logged; the panel sees serving stop
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
        box: dict = {}

        def build_prompt(slot_ctx: int, to_tokens) -> list[int]:
            box["fit"] = fit_history(job.system, job.history, job.user_text, job.settings.max_tokens,
                                     slot_ctx, to_tokens)
            return box["fit"].tokens

        def sink(ev) -> None:  # the server's engine thread
            if job.cancel.is_set() and "rid" in box:
                host.cancel(box["rid"])  # the chat's Stop button
            if isinstance(ev, Finished):
                box["replied"] = True
                fit = box.get("fit")
                if fit is not None:
                    ev.stats.dropped_messages, ev.stats.dropped_tokens = len(fit.dropped), fit.dropped_tokens
                self.chat_replied.emit(job, Reply(ev.text, ev.stats, fit.dropped if fit else []))
            elif isinstance(ev, RequestDone):
                st = ev.result.stats
                if box.get("replied"):
                    pass
                elif st.error is None:  # stopped before it had a slot: a stop, not a failure
                    self.chat_replied.emit(job, Reply("", ReplyStats(
                        ttft_s=None, prefill_tokens=0, cached_tokens=0, prefill_s=0.0, prefill_tok_s=None,
                        decode_tokens=0, decode_s=0.0, decode_tok_s=None, total_s=st.total_s or 0.0,
                        kv_used=None, n_ctx=None, stop_reason="cancelled")))
                else:
                    self.chat_failed.emit(job, st.error, st.error_kind == "context_overflow")
            else:
                self.chat_event.emit(job.id, ev)

        from app.serve.engine_host import Busy

        try:
            req = BatchRequest("", settings=job.settings, build_prompt=build_prompt)
            box["rid"] = host.submit_online(req, sink)
        except Busy:
            return False  # the chat's own engine answers instead
        return True
