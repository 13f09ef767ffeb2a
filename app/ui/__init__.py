"""The desktop window: Qt widgets, the chat's engine thread and the Batch window's thread.

The only package that imports Qt (import-linter enforces it); the models the
widgets show (app.chat.conversation, app.chat.live_gauges, app.config) live
below it, so the CLI and the tests use them without a display.
"""
