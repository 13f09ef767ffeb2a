"""Where a batch's requests decode: one engine for a single-model server, or the engine of the
model a batch names (app.serve.models_api), held while the batch runs. Apart from the runs so a
server with several models can host batches without the runs knowing how models are held."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from app.serve.engine_host import ServeEngine
from app.serve.side_engine import SideEngine


class Hosts(Protocol):
    """Where a batch's requests decode: the one engine, or (app.serve.models_api) the engine of
    the model its lines name, held loaded while the batch runs."""

    def batch_model(self, path: str | Path) -> str:
        """The model a batch file's lines are for (the name they give it)."""
        ...

    def check(self, path: str | Path) -> None:
        """ValueError, said as one line, when a batch of this file cannot run here."""
        ...

    def hold(self, model: str) -> ServeEngine:
        """The model's engine, loaded and kept so until release (LlamaDeskError if it cannot be)."""
        ...

    def side(self, model: str) -> SideEngine:
        """A held model's side thread, where its embeddings run."""
        ...

    def release(self, model: str) -> None: ...


@dataclass
class OneHost:
    """A single-model server's: every batch on its one engine."""

    host: ServeEngine
    model_id: str
    side_engine: SideEngine

    def batch_model(self, path: str | Path) -> str:
        return self.model_id

    def check(self, path: str | Path) -> None:
        return None  # a line for another model is that line's error, as before

    def hold(self, model: str) -> ServeEngine:
        return self.host

    def side(self, model: str) -> SideEngine:
        return self.side_engine

    def release(self, model: str) -> None:
        return None
