"""Documents in a conversation's turn: whole when they fit, retrieved when they do not.

LM Studio's rule, which users understand: a document that fits the context with room for the
answer is given whole (the model reads all of it, nothing is missed by a search); one that does
not is searched (app.docs' BM25 index, hybrid when vectors exist) and only the passages that
bear on the question are given, numbered, with an instruction to cite them. A chosen collection
(a folder indexed once by `llamadesk docs add` or the Collections window) is always searched.
Either way the reply keeps a DocsUse: how, how many tokens, and its numbered sources with their
spans in the document's text, so a source opens at its passage. The room is measured as the
prompt will be (`room_tokens`), not guessed from a share of the context.

Used by the window's flow and by `ask --attach/--docs`; never imports Qt.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import zip_longest
from pathlib import Path

from app.chat.budget import REPLY_SHARE
from app.chat.doc_prompt import DocsPlan, Passage, frame_text, retrieved_text, whole_text
from app.docs.chunks import chunk
from app.docs.extract import DocumentError, Extracted, extract
from app.docs.index import DocsIndex, Hit
from app.engine.message import DOCS_RETRIEVED, DOCS_WHOLE, Attachment, DocsUse, MessageBody

__all__ = ["DocsPlan", "DocumentError", "attach", "plan_turn", "room_tokens", "token_counter"]

Count = Callable[[str], int]
Attached = tuple[Attachment, str, tuple[int, ...]]  # an attachment, its text, its pages' starts

SEARCH_K = 8  # passages asked of each search (the attachments', each collection's)
MIN_SHARE = 4  # documents may take a 1/MIN_SHARE of the context even if old turns must make way
# No tokenizer gives fewer tokens than a character in this many: above it a text cannot fit,
# and is not tokenized to find that out.
MAX_CHARS_PER_TOKEN = 8
UNKNOWN_CTX = 8192  # a server that does not say its context length
FIRST_CUT_CHARS = 400  # the least of a lone passage kept when even it does not fit


def attach(path: str | Path, count: Count | None = None) -> tuple[Attachment, Extracted]:
    """A file read as a turn's attachment, and its extracted text (to keep in the store).
    DocumentError (one line naming the file) when it cannot be; `count` given, the attachment
    says its tokens."""
    ex = extract(path)
    tokens = count(ex.text) if count is not None and ex.text else 0
    return Attachment(ex.name, ex.sha256, ex.kind, ex.pages, tokens, len(ex.text), str(ex.path)), ex


def token_counter(engine) -> Count:
    """The engine's own count of a text's tokens; a server's, which cannot count here, estimated
    from its bytes (about four a token in English)."""
    decoder = getattr(engine, "decoder", None)
    if decoder is not None:
        return lambda text: len(decoder.tokenize(text, add_bos=False, special=False))
    return lambda text: (len(text.encode("utf-8")) + 3) // 4


def room_tokens(engine, system: str | None, history: list[MessageBody], question: str,
                max_tokens: int, count: Count | None = None) -> int:
    """What the context has left for documents after the system prompt, the history, the question
    and the reply's budget (the reserve app.chat.budget keeps for it), measured on the prompt as
    the engine renders it. When the history leaves less than a quarter of the context, the
    documents get that quarter and the oldest turns make way (budget drops them, and says so):
    the documents of the question being asked matter more than what was said long ago."""
    n_ctx = engine.n_ctx or UNKNOWN_CTX
    reserve = min(max_tokens, REPLY_SHARE * n_ctx // 100)
    head = [MessageBody("system", system)] if system and system.strip() else []
    ask = [MessageBody("user", question)]
    render = getattr(engine, "prompt_tokens", None)
    size: Callable[[list[MessageBody]], int]
    if render is not None:
        def size(msgs: list[MessageBody]) -> int:
            return len(render(msgs))
    else:
        c = count or token_counter(engine)

        def size(msgs: list[MessageBody]) -> int:
            return sum(c(m.content) + 4 for m in msgs)
    full = n_ctx - reserve - size(head + history + ask)
    if not history or full >= n_ctx // MIN_SHARE:
        return full
    return max(full, min(n_ctx - reserve - size(head + ask), n_ctx // MIN_SHARE))


def plan_turn(question: str, attached: Sequence[Attached], collections: Sequence[str], room_tokens: int,
              count: Count, index: DocsIndex | None) -> DocsPlan:
    """The prompt text for `question` with its documents, and the DocsUse the reply keeps.

    Whole when there is no collection and the attachments' prompt fits `room_tokens`; otherwise the
    attachments are indexed (by hash: once) and the passages that best answer the question are
    searched in them and in the collections, as many as fit. `index` None: a temporary one.
    """
    if not attached and not collections:
        return DocsPlan(question, None)
    base = count(question)
    if not collections:
        chars = sum(len(text) for _, text, _ in attached)
        if chars <= max(room_tokens, 0) * MAX_CHARS_PER_TOKEN:
            text, sources = whole_text(question, [(a, t) for a, t, _ in attached])
            tokens = count(text) - base
            if tokens <= room_tokens:
                return DocsPlan(text, DocsUse(DOCS_WHOLE, tokens, sources))
    with _opened(index) as idx:
        passages = _search(idx, question, attached, collections)
    if not passages:
        passages = _leading(attached)
    chosen = _fit(question, passages, room_tokens, count, base)
    text, sources = retrieved_text(question, chosen)
    return DocsPlan(text, DocsUse(DOCS_RETRIEVED, count(text) - base, sources))


@contextmanager
def _opened(index: DocsIndex | None) -> Iterator[DocsIndex]:
    if index is not None:
        yield index
        return
    with tempfile.TemporaryDirectory(prefix="llamadesk-docs-") as tmp:
        idx = DocsIndex.open(Path(tmp) / "docs.db")
        try:
            yield idx
        finally:
            idx.close()


def _passage(h: Hit) -> Passage:
    return Passage(h.document, h.sha256, h.where, h.start, h.end, h.text, h.collection)


def _search(idx: DocsIndex, question: str, attached: Sequence[Attached],
            collections: Sequence[str]) -> list[Passage]:
    """The best passages of each search, interleaved by rank (each search's first, then each one's
    second...): scores of different searches are not on one scale, ranks are."""
    lists: list[list[Hit]] = []
    if attached:
        for a, text, starts in attached:
            idx.add(Extracted(a.name, a.path, a.kind, text, a.sha256, a.pages, tuple(starts)))
        lists.append(idx.search(question, shas=[a.sha256 for a, _, _ in attached], k=SEARCH_K))
    for name in collections:
        lists.append(idx.search(question, collection=name, k=SEARCH_K))
    out: list[Passage] = []
    seen: set[tuple[str, int, int]] = set()
    for rank in range(max((len(hits) for hits in lists), default=0)):
        for hits in lists:
            if rank < len(hits):
                h = hits[rank]
                if (h.sha256, h.start, h.end) not in seen:
                    seen.add((h.sha256, h.start, h.end))
                    out.append(_passage(h))
    return out


def _leading(attached: Sequence[Attached]) -> list[Passage]:
    """No passage matched the question's words (a question in other words than the document's):
    the documents' first passages, so the model still reads where they begin."""
    per_doc = [[Passage(a.name, a.sha256, c.where, c.start, c.end, c.text)
                for c in chunk(text, a.kind, tuple(starts))[:SEARCH_K]] for a, text, starts in attached]
    return [p for row in zip_longest(*per_doc) for p in row if p is not None]


def _fit(question: str, passages: list[Passage], room: int, count: Count, base: int) -> list[Passage]:
    """As many of the passages, best first, as fit `room`; at least the first, cut to fit."""
    chosen: list[Passage] = []
    for p in passages:
        if count(retrieved_text(question, [*chosen, p])[0]) - base > room:
            break
        chosen.append(p)
    if chosen or not passages:
        return chosen
    first = passages[0]
    left = max(room - (count(frame_text(question)) - base), 0)
    keep = max(FIRST_CUT_CHARS, min(len(first.text), left * 3))
    cut = first.text[:keep]
    return [Passage(first.document, first.sha256, first.where, first.start,
                    min(first.end, first.start + len(cut)), cut, first.collection)]

