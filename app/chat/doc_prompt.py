"""The words a turn with documents sends the model: the documents (whole, or numbered passages),
then the question, and the numbered sources the reply keeps.

The documents go in the prompt of the turn being answered, never in the stored question: the
history keeps the user's words and the Attachment list, and each later turn is given what it
needs again (whole, or the passages for its own question), so an old turn's documents do not
fill the context twice. Sources are numbered as the prompt numbers them, so a reply's [2] is
the second source listed under it.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.message import Attachment, DocsUse, Source

SNIPPET_CHARS = 90

WHOLE_HEAD = ("The user gave you these documents, numbered. Answer the question from them, and cite a "
              "document you use as [n].")
RETRIEVED_HEAD = ("Passages from the user's documents, numbered, that may bear on the question. Answer "
                  "from them and cite each passage you use as [n]; if they do not hold the answer, say so.")


@dataclass(frozen=True)
class DocsPlan:
    """A turn's prompt text and what documents it gives the reply (None: none)."""

    user_text: str
    use: DocsUse | None


@dataclass(frozen=True)
class Passage:
    """One retrieved span of a document, as the prompt shows it and the reply's source names it."""

    document: str
    sha256: str
    where: str
    start: int
    end: int
    text: str
    collection: str | None = None


def snippet(text: str, width: int = SNIPPET_CHARS) -> str:
    """A passage's first words on one line."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def _framed(head: str, blocks: list[str], question: str) -> str:
    return "\n\n".join([head, *blocks, f"Question: {question}"])


def whole_text(question: str, attached: list[tuple[Attachment, str]]) -> tuple[str, tuple[Source, ...]]:
    """Every document in full, numbered, then the question; a source per document."""
    blocks, sources = [], []
    for n, (a, text) in enumerate(attached, 1):
        pages = f" ({a.pages} pages)" if a.pages else ""
        blocks.append(f"[{n}] {a.name}{pages}\n\"\"\"\n{text.strip()}\n\"\"\"")
        sources.append(Source(n, a.name, a.sha256, "", 0, len(text), snippet(text)))
    return _framed(WHOLE_HEAD, blocks, question), tuple(sources)


def retrieved_text(question: str, passages: list[Passage]) -> tuple[str, tuple[Source, ...]]:
    """The passages numbered [1]..[n] with their document and page or heading, then the question."""
    blocks, sources = [], []
    for n, p in enumerate(passages, 1):
        where = f", {p.where}" if p.where else ""
        blocks.append(f"[{n}] {p.document}{where}\n{p.text.strip()}")
        sources.append(Source(n, p.document, p.sha256, p.where, p.start, p.end, snippet(p.text),
                              p.collection))
    return _framed(RETRIEVED_HEAD, blocks, question), tuple(sources)


def frame_text(question: str) -> str:
    """The retrieved prompt with no passage: what it costs before the first."""
    return _framed(RETRIEVED_HEAD, [], question)
