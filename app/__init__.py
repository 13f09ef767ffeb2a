"""LlamaDesk: a desktop chat application for local GGUF models (llama.cpp)."""

__version__ = "0.1.0"
