"""The gauges' and the Server panel's plots, on pyqtgraph: labelled axes with ticks, themed.

pyqtgraph draws through QGraphicsView with ticks, units and ranges already
worked out, which the hand-painted plots never had; one frame costs about a
millisecond at these sizes, small beside the 10 Hz refresh. Mouse zoom and the
context menu are off: these are gauges, not an analysis tool. Until there is
something to draw, ChartOrNote shows a line saying what will be there, in the
chart's own room, instead of empty 0-1 axes.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import QLabel, QStackedWidget, QWidget

from app.chat.live_gauges import Turn
from app.ui.widgets.colors import CACHED, CEILING, GENERATED, NEW, SETUP, WAIT

pg.setConfigOptions(antialias=True)


class ThemedPlot(pg.PlotWidget):
    def __init__(self, left: str, bottom: str, parent=None):
        super().__init__(parent)
        self._labels = (left, bottom)
        self.setMenuEnabled(False)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        self.setMinimumSize(180, 110)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        pi = self.getPlotItem()
        pi.showGrid(x=False, y=True, alpha=0.25)
        small = QFont(self.font())
        small.setPointSizeF(max(6.0, small.pointSizeF() * 0.85))
        for name in ("left", "bottom"):
            pi.getAxis(name).setStyle(tickFont=small, tickLength=-4)
            pi.getAxis(name).enableAutoSIPrefix(False)  # "(x0.001)" beside a label in seconds misleads
        self.restyle()

    def sizeHint(self) -> QSize:
        return QSize(260, 140)

    def restyle(self) -> None:
        pal = self.palette()
        text = pal.color(QPalette.ColorRole.Text)
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        self.setBackground(pal.color(QPalette.ColorRole.Base))
        pi = self.getPlotItem()
        for name, label in zip(("left", "bottom"), self._labels):
            ax = pi.getAxis(name)
            ax.setPen(pg.mkPen(muted))
            ax.setTextPen(pg.mkPen(text))
            ax.setLabel(label, color=text.name())

    def changeEvent(self, ev) -> None:
        super().changeEvent(ev)
        # pyqtgraph changes the palette inside its own __init__, before ours has run.
        if ev.type() == ev.Type.PaletteChange and "_labels" in self.__dict__:
            self.restyle()


class LineChart(ThemedPlot):
    """A rate over time, with an optional ceiling drawn as a dashed line."""

    def __init__(self, left: str, bottom: str, min_span_s: float = 5.0, trailing_s: float | None = None,
                 parent=None):
        """`trailing_s`: the x axis is the last that many seconds, ending at 0 (now)."""
        super().__init__(left, bottom, parent)
        self.min_span_s = min_span_s
        self.trailing_s = trailing_s
        self.curve = self.plot([], [], pen=pg.mkPen(GENERATED, width=2))
        self.ceiling_line = pg.InfiniteLine(angle=0, movable=False,
                                            pen=pg.mkPen(CEILING, width=1.5, style=Qt.PenStyle.DashLine),
                                            label="ceiling {value:.0f}",
                                            labelOpts={"position": 0.95, "color": CEILING, "anchors":
                                                       [(1, 0), (1, 0)]})
        self.addItem(self.ceiling_line)
        self.ceiling_line.hide()
        self._shown: tuple | None = None

    def set_data(self, series: list[tuple[float, float]], ceiling: float | None = None) -> None:
        key = (len(series), series[-1] if series else None, series[0] if series else None, ceiling)
        if key == self._shown:
            return
        self._shown = key
        xs = [t for t, _ in series]
        ys = [v for _, v in series]
        self.curve.setData(xs, ys)
        top = max(ys, default=0.0)
        if ceiling:
            # Shown first: pyqtgraph's label ignores a value set while the line is hidden, and
            # kept its old text ("ceiling 0" beside a line at 97).
            self.ceiling_line.show()
            self.ceiling_line.setValue(ceiling)
            self.ceiling_line.label.valueChanged()
            top = max(top, ceiling)
        else:
            self.ceiling_line.hide()
        if self.trailing_s is not None:
            self.setXRange(-self.trailing_s, 0, padding=0.02)
        else:
            x0 = xs[0] if xs else 0.0
            self.setXRange(x0, max(xs[-1] if xs else 0.0, x0 + self.min_span_s), padding=0.02)
        self.setYRange(0, (top or 1.0) * 1.12, padding=0)


class TimelineChart(ThemedPlot):
    """Each recent turn from Send: waiting (and the format's setup within it), prefill and decode
    as segments on one time axis, with a mark where a cached prefix let the prompt skip work."""

    SHOWN = 6

    def __init__(self, parent=None):
        super().__init__("turn", "seconds after Send", parent)
        self.getPlotItem().showGrid(x=False, y=False)
        self.bars = {name: pg.BarGraphItem(x0=[], y=[], width=[], height=0.6, brush=color, pen=pg.mkPen(None))
                     for name, color in (("wait", WAIT), ("setup", SETUP), ("prefill", NEW),
                                         ("decode", GENERATED))}
        for item in self.bars.values():
            self.addItem(item)
        self.cached = pg.ScatterPlotItem(symbol="d", size=12, brush=CACHED)
        self.addItem(self.cached)
        self.now = pg.ScatterPlotItem(symbol="t2", size=9, brush=GENERATED)  # the live reply's front
        self.addItem(self.now)
        self.restyle()
        self._shown: list[Turn] | None = None

    def restyle(self) -> None:
        super().restyle()
        if "cached" in self.__dict__:  # the outline that sets the mark off the bars
            self.cached.setPen(pg.mkPen(self.palette().color(QPalette.ColorRole.Base), width=1.5))

    def set_turns(self, turns: list[Turn], first_number: int = 1) -> None:
        shown = turns[-self.SHOWN:]
        if shown == self._shown:
            return
        self._shown = list(shown)
        n = len(shown)
        ys = list(range(n - 1, -1, -1))  # read down, oldest first, as the transcript reads
        x0 = {"wait": [0.0] * n, "setup": [0.0] * n, "prefill": [t.wait_s for t in shown],
              "decode": [t.wait_s + t.prefill_s for t in shown]}
        widths = {"wait": [t.wait_s for t in shown], "setup": [t.setup_s for t in shown],
                  "prefill": [t.prefill_s for t in shown],
                  "decode": [t.decode_s for t in shown]}
        for name, item in self.bars.items():
            item.setOpts(x0=x0[name], y=ys, width=widths[name], height=0.6)
        live = [(t.wait_s + t.prefill_s + t.decode_s, y) for t, y in zip(shown, ys) if t.live]
        self.now.setData([x for x, _ in live], [y for _, y in live])  # where the reply has got
        marks = [(t.wait_s, y) for t, y in zip(shown, ys) if t.cached]
        self.cached.setData([x for x, _ in marks], [y for _, y in marks])
        first = first_number + len(turns) - n
        self.getAxis("left").setTicks([[(y, f"#{first + i}") for i, y in enumerate(ys)]])
        span = max(max((t.total_s for t in shown), default=0.0), 0.5)
        self.setXRange(-0.04 * span, span * 1.05, padding=0)  # room for a mark at 0
        self.setYRange(-0.6, max(n, 1) - 0.4, padding=0)


class ChartOrNote(QStackedWidget):
    """A chart, or in its place a muted line saying what it will show, the same size."""

    def __init__(self, chart: QWidget, note: str, parent=None):
        super().__init__(parent)
        self.chart = chart
        self.note = QLabel(note)
        self.note.setWordWrap(True)
        self.note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.note.setFrameShape(QLabel.Shape.StyledPanel)
        self.addWidget(self.note)
        self.addWidget(chart)

    def show_chart(self, on: bool) -> None:
        self.setCurrentWidget(self.chart if on else self.note)
