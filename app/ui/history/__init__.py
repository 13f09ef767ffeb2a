"""The conversation list and what it does to the chat: open, rename, delete and undo, import, export.

Apart from the chat so the history features live in one place; the chat flow
does not know the list exists.
"""
