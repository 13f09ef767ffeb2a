"""A PDF attached: its pages reach the prompt and the sources ("page 2"), whole or retrieved, and
the store keeps where each page starts. The PDF is written here byte by byte (a text layer of
Helvetica lines, its objects and cross-reference table by hand), so no generator is needed."""

from __future__ import annotations

from app.chat.conversation import LiveConversation
from app.chat.documents import attach, plan_turn, token_counter
from app.chat.recorder import TurnRecorder, record_turn
from app.engine.sampling import GenerationSettings
from app.history.store import Store

PAGES = ["The first page talks about apples and orchards.", "The vault code is 4417.",
         "Page three is about pears."]


def pdf_bytes(pages: list[str]) -> bytes:
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objs = ["<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>",
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, text in enumerate(pages):
        esc = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 40 700 Td ({esc}) Tj ET"
        objs.append("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                    f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>")
        objs.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    out = b"%PDF-1.4\n"
    offsets = []
    for n, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def test_a_pdf_s_pages_name_its_passages_and_come_back_from_the_store(engine, tmp_path):
    path = tmp_path / "manual.pdf"
    path.write_bytes(pdf_bytes(PAGES))
    count = token_counter(engine)
    att, ex = attach(path, count)
    assert (att.kind, att.pages, len(ex.page_starts)) == ("pdf", 3, 3)

    whole = plan_turn("What is the vault code?", [(att, ex.text, ex.page_starts)], [], 1000, count, None)
    assert whole.use.mode == "whole" and "[1] manual.pdf (3 pages)" in whole.user_text

    # No room: still the passage that answers, named by its page, cut to fit if need be.
    got = plan_turn("What is the vault code?", [(att, ex.text, ex.page_starts)], [], 0, count, None)
    first = got.use.sources[0]
    assert got.use.mode == "retrieved" and first.where == "page 2"
    assert "[1] manual.pdf, page 2\nThe vault code is 4417." in got.user_text
    assert ex.text[first.start:first.end] == "The vault code is 4417."
    assert ex.page_starts[1] <= first.start < ex.page_starts[2]

    with Store.open(tmp_path / "h.db") as store:
        turn = record_turn(TurnRecorder(store), engine, None, "What is the vault code?",
                           GenerationSettings(max_tokens=4, temperature=0.0), docs=got,
                           attachments=[(att, ex)])
        kept = store.document(ex.sha256)
        live = LiveConversation.from_store(store.get_conversation(turn.conversation_id))
    assert kept is not None and (kept.pages, kept.page_starts, kept.kind) == (3, ex.page_starts, "pdf")
    assert live.attached() == [(att, ex.text, ex.page_starts)]
    assert live.messages[1].docs.sources[0].where == "page 2"
