"""The desktop window: Qt widgets, the chat's engine thread and the other windows' threads.

The only package that imports Qt (import-linter enforces it); the models the
widgets show (app.chat.conversation, app.chat.live_gauges, app.config) live
below it, so the CLI and the tests use them without a display.

Grouped by window, so each window's parts change together: chat/ (the
transcript, composer, gauges and engine thread), history/ (the conversation
list), remote/ (servers to chat through), settings/, batch/, compare/,
server/ and models/ (the Hub: search, download, the first-launch panel).
What more than one window shows lives in widgets/ (the charts, colours,
message bar, and the filter that wraps long tooltips); the QThread,
worker and ordered shutdown every window's thread uses, in threads.py; the
Light / Dark / System choice every window follows, in theme.py; Qt's own
command-line options (-platform, -style), told apart from ours, in
qt_args.py. window.py is the one place the parts are assembled.

A figure of a reply (TTFT, prefill, decode, KV, total) is formatted by its
ReplyStats (app.engine.stats) wherever it shows: the gauges' tiles, the
footer, the timeline's line and the exports say the same number
(tests/ui/test_figures_agree.py).
"""
