"""Documents in a conversation: their text extracted, cut into passages by structure, indexed
in SQLite (BM25 always, vectors when an embedding model is chosen) and retrieved.

Below the chat: it knows nothing of conversations or windows, only files,
their text and which passages answer a query.
"""
