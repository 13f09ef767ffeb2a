"""Widgets and wording that more than one window uses: the message bar, the charts, the colours.

Here rather than in one window's package, so no window imports another's
internals to get them (the Server panel once took its ceiling line from the
Batch window's results table).
"""
