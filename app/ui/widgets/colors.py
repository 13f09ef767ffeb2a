"""The gauges' colours: one meaning per colour across the KV bar, the timeline and the charts.

Shared with the Server panel's and the Compare window's charts, so green
means decode and purple the ceiling wherever they appear.

Mid-tone hues that read on both a light and a dark Base; everything neutral
(text, axes, grid) comes from the palette instead.
"""

from PySide6.QtGui import QColor

CACHED = QColor("#5d8aa8")  # prompt tokens reused from the cache
NEW = QColor("#e39b3b")  # prompt tokens prefilled now
GENERATED = QColor("#4caf50")  # generated tokens, decode
TTFT = QColor("#c0504d")
WAIT = QColor("#9e9e9e")  # before the prompt's evaluation began
SETUP = QColor("#8d6e63")  # of the wait, setting up the reply's format (grammar, vocabulary index)
CEILING = QColor("#8e6bbf")  # the fastest decode this machine's memory allows
