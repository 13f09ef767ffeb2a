"""The window's local server: a switch, its panel, and the thread uvicorn runs on."""
