"""What LlamaDesk accepts of OpenAI's request format, checked once for every way a request comes.

The online server, the Batch API and batch files run by `llamadesk batch` or
the Batch window all read a request body here, so a line of a batch is
honoured exactly as the same request sent online would be, or refused with
the same words: never answered as if a parameter had not been there. Below
the server and batch files, above the engine; no HTTP, no Qt.
"""
