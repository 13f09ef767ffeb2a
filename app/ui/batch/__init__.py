"""The Batch window: a batch file decoded beside the chat, on its own thread and context."""
