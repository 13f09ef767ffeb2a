"""Keep Python's full garbage collections out of a streaming reply.

A generation-2 collection walks every tracked object, and the window holds
hundreds of thousands of them (Qt wrappers, pyqtgraph's items, the loaded
model's bindings); the collection stops every thread holding the GIL while it
runs, so when one falls inside a reply the GUI thread misses its frames (the
`bench --gui` stall figure). Most of those objects live as long as the window,
so once a model has loaded they are collected once and frozen (`gc.freeze`):
later collections walk only what was made since. Each load unfreezes first,
so cycles left by the previous model are still collected, at a moment when no
reply is streaming.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect everything now and leave what survives out of later full collections."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
