"""How a message is drawn as Markdown and HTML, shared by the live chat view, `ask` and the exports.

Its own package below the history store and the window alike, so the chat view
draws a reply with the exporters' parser and highlighter without depending on
the export package, and an export reads as the window drew it.
"""
