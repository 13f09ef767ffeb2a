"""`llamadesk embed`: embeddings of texts on the command line, in OpenAI's /v1/embeddings shape.

The same context and pooling as the server's /v1/embeddings (app.engine.embedder), so a vector
made here is the one a client of `llamadesk serve` gets.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.commands.common import add_model_args, load_options, note


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("embed", help="print embeddings of texts (OpenAI's /v1/embeddings JSON)",
                       description="Embed each TEXT (or each line of --input FILE) with the model, mean "
                                   "pooled and L2-normalised, and print OpenAI's embeddings list as JSON.")
    p.add_argument("texts", nargs="*", metavar="TEXT", help="texts to embed")
    p.add_argument("--input", metavar="FILE", help="texts to embed, one per line")
    p.add_argument("--no-normalize", dest="normalize", action="store_false",
                   help="the mean-pooled vectors as they are, not scaled to length 1")
    add_model_args(p, ctx=2048, ctx_help="the longest input, in tokens")
    return p


def _texts(args: argparse.Namespace) -> list[str]:
    texts = list(args.texts)
    if args.input is not None:
        try:
            lines = Path(args.input).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"--input {args.input}: cannot be read ({getattr(e, 'strerror', None) or e})") \
                from None
        texts += [ln for ln in lines if ln.strip()]
    if not texts:
        raise ValueError("nothing to embed: give TEXT or --input FILE")
    if any(not t.strip() for t in texts):
        raise ValueError("an empty text has no embedding")
    return texts


def run(args: argparse.Namespace) -> int:
    from app.engine.embedder import Embedder
    from app.engine.loader import load_model
    from app.engine.models import resolve_model

    texts = _texts(args)
    opts = load_options(args)
    n_ctx, opts.n_ctx = opts.n_ctx, 256  # the chat context is unused here
    path = resolve_model(args.model)
    model = load_model(path, opts)
    try:
        if model.report.fallback:
            note(model.report.fallback)
        emb = Embedder(model, n_ctx)
        try:
            data, used = [], 0
            for i, text in enumerate(texts):
                toks = emb.tokenize(text)
                used += len(toks)
                data.append({"object": "embedding", "index": i,
                             "embedding": emb.embed(toks, args.normalize).tolist()})
        finally:
            emb.close()
    finally:
        model.close()
    json.dump({"object": "list", "data": data, "model": path.name,
               "usage": {"prompt_tokens": used, "total_tokens": used}}, sys.stdout)
    sys.stdout.write("\n")
    return 0
