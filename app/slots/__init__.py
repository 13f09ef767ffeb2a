"""Continuous batching: many sequences decoded together through one llama_batch. No Qt.

Built on app.engine (the loaded weights, the sampler, the token reader); knows
nothing of conversations, batch files or widgets.
"""
