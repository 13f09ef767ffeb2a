"""Which quantization a GGUF is, from its file name alone, and which one to pull by default.

A search lists dozens of files; reading each header to learn its type would cost a
request per file, while the Hub's GGUF repositories all name the type in the file name
(llama.cpp's convention: "model-Q4_K_M.gguf", "model.IQ3_XXS.gguf"). Q4_K_M is the
default because llama.cpp's own guidance and the Hub's publishers make it the usual best
trade of size against quality; the fallbacks are the nearest in that trade.
"""

from __future__ import annotations

import re

DEFAULT_QUANT = "Q4_K_M"
# Closest to Q4_K_M first, when a repository has no Q4_K_M.
PREFERENCE = ("Q4_K_M", "Q4_K_S", "Q5_K_M", "Q4_0", "IQ4_XS", "IQ4_NL", "Q5_K_S", "Q5_0", "Q6_K",
              "Q3_K_L", "Q3_K_M", "Q8_0", "Q3_K_S", "Q2_K", "BF16", "F16", "F32")

_QUANT = re.compile(
    r"(?<![A-Za-z0-9])(I?Q\d_[A-Z0-9]+(?:_[A-Z]+)?|I?Q\d_\d|BF16|F16|F32|TQ\d_\d|MXFP4(?:_MOE)?)"
    r"(?![A-Za-z0-9])", re.IGNORECASE)
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


def quant_of(filename: str) -> str:
    """"Q4_K_M" for "Llama-3.2-1B-Instruct-Q4_K_M.gguf"; "?" when the name does not say."""
    base = filename.rsplit("/", 1)[-1]
    found = _QUANT.findall(base)
    return found[-1].upper() if found else "?"


def split_part(filename: str) -> tuple[int, int] | None:
    """(part, of) for llama.cpp's split files ("model-00001-of-00003.gguf"), else None."""
    m = _SPLIT.search(filename)
    return (int(m.group(1)), int(m.group(2))) if m else None


def selects(name: str, sel: str | None) -> bool:
    """Whether `sel` (a file name, its last part, or a quantization; None for all) names `name`."""
    return sel is None or sel in (name, name.rsplit("/", 1)[-1]) or quant_of(name) == sel.upper()


def is_model_file(filename: str) -> bool:
    """A GGUF that holds a model: not a vision projector (mmproj) or an imatrix."""
    base = filename.rsplit("/", 1)[-1].lower()
    return base.endswith(".gguf") and not base.startswith(("mmproj", "imatrix")) and "mmproj" not in base


def choose(files: list, wanted: str | None):
    """The file `wanted` names among `files` (objects with .name and .quant): an exact file name,
    else a quantization; none given, Q4_K_M or the nearest to it. ValueError says what exists."""
    models = [f for f in files if is_model_file(f.name)]
    if wanted:
        exact = [f for f in files if f.name == wanted or f.name.rsplit("/", 1)[-1] == wanted]
        if exact:
            return exact[0]
        by_quant = [f for f in models if f.quant == wanted.upper()]
        if by_quant:
            return _first_part(by_quant)
        have = ", ".join(sorted({f.quant for f in models})) or "no GGUF model files"
        raise ValueError(f"no file or quantization {wanted!r} here (it has: {have})")
    if not models:
        raise ValueError("no GGUF model files here")
    for q in PREFERENCE:
        of_q = [f for f in models if f.quant == q]
        if of_q:
            return _first_part(of_q)
    return min(models, key=lambda f: f.size)


def _first_part(files: list):
    """One file of a quantization; the split ones are refused by the caller with the count."""
    return sorted(files, key=lambda f: (split_part(f.name) or (0, 0), f.name))[0]
