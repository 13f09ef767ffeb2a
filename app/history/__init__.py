"""The conversation history: the SQLite store, its records, transcripts and exports.

A layer of its own below app.chat, which records turns into it: the store
knows nothing of engines or the window, so the CLI, the window and the
benchmarks read and write exactly the same rows. Never imports Qt.
"""
