"""Remote engines: any OpenAI-compatible server (llama-server, vLLM, Ollama, OpenAI).

The layer beside app.slots: it speaks HTTP and produces the engine's own
events and ReplyStats, so the chat, the CLI and the gauges treat a remote
reply as they treat a local one. Figures a server does not report stay None.
"""
