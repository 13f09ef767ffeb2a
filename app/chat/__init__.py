"""Answering chat turns: the engines behind one Protocol (local and remote), the context
budget, recording turns into the history, and the gauges' model of a turn. Never imports Qt."""
