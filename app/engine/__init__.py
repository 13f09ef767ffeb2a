"""llama.cpp decoding: load, stream, cancel, metrics. Never imports Qt.

The window, the CLI, the benchmarks and the tests all drive this same code,
so what the gauges show is what the command line measures.

Threads (the one rule; app.engine and app.slots refer to it):

- A loaded model (weights and vocabulary) is read-only once loaded and is
  shared: tokenizing, and creating another context on it, may happen on any
  thread.
- Each llama context (the chat Decoder's, a BatchEngine's BatchContext) is
  created, used and freed by exactly one thread: the window's chat engine
  thread, the window's batch thread, or the CLI's worker thread. Where another
  thread creates or frees it (the CLI's main thread; the GUI thread freeing
  the chat model at quit), it does so before the driving thread starts or
  after it has ended, so no two threads ever touch a context at once.
- The model is freed only after every context on it has been freed (the
  window stops a batch before it reloads or closes the model).
- Safe from any thread: CancelToken.cancel; BatchEngine.submit_many,
  submit_online, pause, resume, cancel and cancel_request (they only take the
  engine's scheduler lock, app.slots.scheduler).
"""

# Before any module here imports llama_cpp: the llama.cpp build with LlamaDesk's fixes, where
# this CPU needs them and packaging/build-llama-tools.sh has built them.
from app.engine.library_choice import choose as _choose_library

_choose_library()
