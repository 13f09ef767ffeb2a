"""A comparison as a table, Markdown, CSV and JSON: the same record in each, like the stats record.

The best value per column is marked; where the best target's spread overlaps
the runner-up's, the column says "no clear winner" instead, because a
difference smaller than the run-to-run noise is not a result.
"""

from __future__ import annotations

import csv
import io
import json

from app.compare.run import METRICS, Comparison, Row

# memory: what the target added to the process, at its peak
COLUMNS = (("ttft_s", "TTFT ms", 1000, 0), ("prefill_tok_s", "prefill tok/s", 1, 0),
           ("decode_tok_s", "decode tok/s", 1, 1), ("total_s", "total s", 1, 2),
           ("decode_tokens", "tokens", 1, 0), ("peak_rss_bytes", "memory MB", 1e-6, 0))


def _num(v: float | None, scale: float, digits: int) -> str:
    return "–" if v is None else f"{v * scale:,.{digits}f}"


def _cell(row: Row, metric: str, scale: float, digits: int) -> str:
    med, sp = row.median(metric), row.spread(metric)
    if med is None:
        return "–"
    text = _num(med, scale, digits)
    if sp and sp[0] != sp[1] and metric != "peak_rss_bytes":
        text += f" ({_num(sp[0], scale, digits)}–{_num(sp[1], scale, digits)})"
    return text


def to_json(cmp: Comparison) -> dict:
    rows = []
    for r in cmp.rows:
        stats = {m: r.median(m) for m in METRICS}
        spread = {m: r.spread(m) for m in METRICS}
        rows.append({"target": r.target.label, "kind": r.target.kind, "settings": r.target.describe(),
                     "runs": len(r.runs), "text": r.texts[0] if r.texts else None, "texts": r.texts,
                     "stats": {**stats, "predicted_total_s": r.predicted_total()},
                     "spread": spread, "error": r.error})
    best = {}
    for m in METRICS:
        row, clear = cmp.best(m)
        best[m] = {"target": row.target.label if row else None, "clear": clear}
    return {"prompts": cmp.prompts, "repeat": cmp.repeat, "max_tokens": cmp.settings.max_tokens,
            "temperature": cmp.settings.temperature, "started_at": cmp.started_at, "cancelled": cmp.cancelled,
            "rows": rows, "best": best}


def _grid(cmp: Comparison, mark) -> tuple[list[str], list[list[str]], list[str]]:
    head = ["target", "runs", *[name for _, name, _, _ in COLUMNS], "predicted s"]
    body, notes = [], []
    winners = {m: cmp.best(m) for m, *_ in COLUMNS}
    for r in cmp.rows:
        if r.error and not r.runs:
            body.append([r.target.label, "0", f"failed: {r.error}", *[""] * (len(head) - 3)])
            continue
        cells = [r.target.label + (f" (stopped: {r.error})" if r.error else ""), str(len(r.runs))]
        for m, _name, scale, digits in COLUMNS:
            text = _cell(r, m, scale, digits)
            best, clear = winners[m]
            cells.append(mark(text) if best is r and clear and m != "decode_tokens" else text)
        pred, total = r.predicted_total(), r.median("total_s")
        cells.append(_num(pred, 1, 2) + (f" ({pred / total:.2f}x)" if pred and total else ""))
        body.append(cells)
    for m, name, _, _ in COLUMNS:
        best, clear = winners[m]
        if best is not None and not clear and m != "decode_tokens":
            notes.append(f"{name}: no clear winner (the spreads overlap)")
    return head, body, notes


def to_table(cmp: Comparison) -> str:
    head, body, notes = _grid(cmp, lambda t: "*" + t)
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head, *body]]
    lines.append("* best, outside the others' spread; medians of "
                 f"{cmp.repeat} runs per prompt, (min–max); predicted = TTFT + tokens / decode rate")
    return "\n".join(lines + notes)


def to_markdown(cmp: Comparison) -> str:
    head, body, notes = _grid(cmp, lambda t: f"**{t}**")
    esc = lambda s: s.replace("|", "\\|")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    out += ["", f"Medians of {cmp.repeat} runs per prompt, (min–max); **bold**: best, outside the others' "
            "spread; predicted = TTFT + tokens / decode rate (and its ratio to the measured total)."]
    out += [f"- {n}" for n in notes]
    for r in cmp.rows:
        for prompt, text in zip(cmp.prompts, r.texts):
            out += ["", f"### {esc(r.target.label)}: {esc(prompt)}", "", text]
    return "\n".join(out) + "\n"


def to_csv(cmp: Comparison) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["target", "kind", "settings", "runs", *METRICS, "predicted_total_s", "error"])
    for r in cmp.rows:
        w.writerow([r.target.label, r.target.kind, json.dumps(r.target.describe()), len(r.runs),
                    *[r.median(m) for m in METRICS], r.predicted_total(), r.error or ""])
    return buf.getvalue()


EXPORTERS = {".md": to_markdown, ".csv": to_csv, ".json": lambda c: json.dumps(to_json(c), indent=2) + "\n"}
