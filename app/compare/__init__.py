"""Compare models, quantizations, settings and engines on the same prompts, measured alike.

A small fast model that needs two passes can beat a large one that needs one
slow pass, or lose badly if it needs five: only measuring on the user's own
prompts tells. Each target runs alone (local ones never share the memory
bus with another), every reply through the same engine and stats record.
"""
