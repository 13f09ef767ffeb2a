"""Conversations, prompt building and the context budget. Never imports Qt."""
