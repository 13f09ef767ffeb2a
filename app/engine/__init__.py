"""llama.cpp decoding: load, stream, cancel, metrics. Never imports Qt.

The window, the CLI, the benchmarks and the tests all drive this same code,
so what the gauges show is what the command line measures.
"""
