"""Chatting through a server: the Connect dialog and the saved servers the window connects to."""
