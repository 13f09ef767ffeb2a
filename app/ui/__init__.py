"""The desktop window: Qt widgets, the chat's engine thread and the other windows' threads.

The only package that imports Qt (import-linter enforces it); the models the
widgets show (app.chat.conversation, app.chat.live_gauges, app.config) live
below it, so the CLI and the tests use them without a display.

Grouped by window, so each window's parts change together: chat/ (the
transcript, composer, gauges and engine thread), history/ (the conversation
list), remote/ (servers to chat through), settings/, batch/, compare/ and
server/. What more than one window shows lives in widgets/; the QThread,
worker and ordered shutdown every window's thread uses, in threads.py.
window.py is the one place the parts are assembled.
"""
