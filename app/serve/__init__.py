"""`llamadesk serve`: the loaded model as an OpenAI-compatible server, online and batch.

One continuous-batching engine serves both APIs: online requests take the
next free slot ahead of any batch work (latency first); Batch API requests
fill only the slots online traffic leaves free (cost first). The HTTP side is
FastAPI on uvicorn (what llama-cpp-python's and vLLM's servers use); the
engine runs on its own thread, and events cross to the event loop through
call_soon_threadsafe. No Qt here: the window hosts it on a thread of its own.

With several models (app.serve.models_api), each loaded model is such a
server of its own behind one front door that routes a request by its `model`
and loads and unloads models as they are asked for (app.serve.pool).
"""
