"""The chat window's parts: the transcript, the composer, the gauges, and the engine thread behind them.

One reply at a time flows through here (flow.ChatFlow): the composer sends,
the engine thread answers, the view paints the text and the gauges the
figures. They are kept together because they change together; the window
only builds them and lays them out.
"""
