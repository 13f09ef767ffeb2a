"""`llamadesk bench --speculative`: prompt-lookup speculation against plain decoding, one run.

Every prompt of app.bench.speculative_set is answered twice through the
window's engine, with and without speculation, the order alternating from
prompt to prompt so neither always runs on a warmer machine. Greedy (and no
repeat penalty, which fights copying) so the two replies can be compared:
where they part, the batch shapes rounded the logits differently (a check
evaluates several rows at once, a plain step one), which is agreement across
shapes, measured here rather than asserted. Reported per set: the decode
speedup (tokens over decode seconds, summed), the share of guesses kept,
tokens kept a check, replies where speculation stepped aside, and how well
the gauges' "rate without it" (from the measured step costs) predicted the
plain replies' real rate, and the median (worst, best) of the prompts' own
speedups beside the summed one.

The editing set is then answered by the server's engine (app.slots) with one
client, so every step is a slot decoding alone, with and without
speculation in the same context: `server_editing`, the figure a local
`llamadesk serve --speculative ngram` gives one client (its
`server_editing_speedup` the median of the prompts' own). With a second
client it does not speculate, so there is no figure for that. The free-chat set
goes through it too (`server_chat`).

`check_cost` says what a check costs: a one-token step, a check of nine rows
with every row's logits and with the last row's only (app.bench.check_cost),
so where the median prompt gains little the part of a check that costs is named.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from app.bench.check_cost import PREFIX, check_cost
from app.bench.speculative_set import CHAT, EDITING
from app.chat.local_engine import LocalChatEngine
from app.chat.reply import Reply
from app.engine.events import Event, Finished
from app.engine.loader import LoadedModel, LoadOptions
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.slots.engine import BatchEngine
from app.slots.speculation import BatchSpeculation
from app.slots.types import SlotRequest

TARGETS = {"editing_speedup": 1.3, "chat_speedup": 0.97}


def _prefix_share(a: str, b: str) -> float:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n / max(len(a), len(b), 1)


@dataclass
class _Tally:
    plain_n: int = 0
    plain_s: float = 0.0
    spec_n: int = 0
    spec_s: float = 0.0
    drafted: int = 0
    accepted: int = 0
    checks: int = 0
    aside: int = 0
    identical: int = 0
    predicted_plain: list[float] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)

    def add(self, a: Reply | Finished, b: Reply | Finished) -> None:
        """a: the plain reply, b: the speculating one, to the same prompt."""
        self.plain_n += a.stats.decode_tokens or 0
        self.plain_s += a.stats.decode_s or 0.0
        st = b.stats
        self.spec_n += st.decode_tokens or 0
        self.spec_s += st.decode_s or 0.0
        self.drafted += st.draft_tokens
        self.accepted += st.draft_accepted
        self.checks += st.spec_checks
        self.aside += st.spec_stepped_aside is not None
        self.identical += a.text == b.text
        if st.plain_tok_s:
            self.predicted_plain.append(st.plain_tok_s)
        self.shares.append(_prefix_share(a.text, b.text))

    def report(self) -> dict:
        plain = self.plain_n / self.plain_s if self.plain_s else None
        spec = self.spec_n / self.spec_s if self.spec_s else None
        pred = self.predicted_plain
        return {
            "prompts": len(self.shares), "plain_tok_s": _r(plain), "spec_tok_s": _r(spec),
            "speedup": _r(spec / plain if plain and spec else None, 3),
            "acceptance_pct": _r(100 * self.accepted / self.drafted if self.drafted else None),
            "accepted_per_check": _r(self.accepted / self.checks if self.checks else None, 2),
            "checks": self.checks, "stepped_aside": self.aside, "identical_replies": self.identical,
            "agreement_pct": _r(100 * sum(self.shares) / len(self.shares) if self.shares else None),
            # The gauges' "rate without it" against the plain replies' measured rate.
            "predicted_plain_ratio": _r(sum(pred) / len(pred) / plain if pred and plain else None, 3),
        }


def _run_set(engine: LocalChatEngine, prompts, tokens: int) -> dict:
    """The set through the chat's decoder, each prompt plain and speculating; the median of the
    prompts' own speedups beside the set's summed one, which a few prompts with long copied runs
    can carry while the typical prompt gains nothing."""
    plain = GenerationSettings(max_tokens=tokens, temperature=0, repeat_penalty=1.0)
    spec = replace(plain, speculative="ngram")
    tally, ratios = _Tally(), []
    for i, prompt in enumerate(prompts):
        order = (plain, spec) if i % 2 == 0 else (spec, plain)
        got = {id(s): engine.reply([], prompt, s) for s in order}
        tally.add(got[id(plain)], got[id(spec)])
        rates = [_rate(got[id(s)]) for s in (plain, spec)]
        if rates[0] and rates[1]:
            ratios.append(rates[1] / rates[0])
    return {**tally.report(), **_spread(ratios)}


def _rate(r: Reply | Finished) -> float:
    return (r.stats.decode_tokens or 0) / r.stats.decode_s if r.stats.decode_s else 0.0


def _spread(ratios: list[float]) -> dict:
    """The per-prompt speedups: their median, the worst and best, and how many gained."""
    if not ratios:
        return {"median_prompt_speedup": None}
    return {"median_prompt_speedup": _r(statistics.median(ratios), 3),
            "min_prompt_speedup": _r(min(ratios), 3), "max_prompt_speedup": _r(max(ratios), 3),
            "prompts_faster": sum(x > 1.0 for x in ratios)}


def _run_server_set(model: LoadedModel, prompts, tokens: int) -> dict:
    """The prompts through the server's engine, one at a time: a slot alone, speculating or not
    (the same context, so the same cache layout, either way). Each prompt runs plain,
    speculating, speculating, plain, and the median of the prompts' speedups is reported beside
    the set's: a busy machine's swings move the summed rates, far less a pair run back to back."""
    plain = GenerationSettings(max_tokens=tokens, temperature=0, repeat_penalty=1.0)
    spec = BatchSpeculation("ngram")
    eng = BatchEngine(model, n_slots=1, slot_ctx=1024, speculation=spec)
    tally, ratios = _Tally(), []
    try:
        for i, prompt in enumerate(prompts):
            runs: list[Finished] = []
            for speculating in (False, True, True, False):
                eng.speculation = spec if speculating else None
                got: dict[bool, Finished] = {}
                eng.submit_online(SlotRequest(f"p{i}", [MessageBody("user", prompt)], plain,
                                              on_event=_keep(got, speculating)))
                eng.run()
                runs.append(got[speculating])
            tally.add(runs[0], runs[1])
            tally.add(runs[3], runs[2])
            rates = [(r.stats.decode_count() or 0) / (r.stats.decode_s or 1e9) for r in runs]
            if rates[0] + rates[3] > 0:
                ratios.append((rates[1] + rates[2]) / (rates[0] + rates[3]))
    finally:
        eng.free()
    return {**tally.report(), **_spread(ratios)}


def _keep(got: dict[bool, Finished], key: bool):
    def on_event(ev: Event) -> None:
        if isinstance(ev, Finished):
            got[key] = ev
    return on_event


def _r(v: float | None, digits: int = 1) -> float | None:
    return round(v, digits) if v is not None else None


def _cost_tokens(engine: LocalChatEngine) -> list[int]:
    """The editing set's own text, tokenized, as the rows a check is timed on."""
    text = " ".join(EDITING)
    return (engine.model.llm.tokenize(text.encode(), add_bos=False) * 4)[:PREFIX + 16]


def run_speculative_bench(model: str | None, options: LoadOptions, tokens: int) -> dict:
    engine = LocalChatEngine.open(model, options)
    try:
        engine.reply([], "Hello.", GenerationSettings(max_tokens=8))  # load, page in, calibrate
        editing = _run_set(engine, EDITING, tokens)
        chat = _run_set(engine, CHAT, tokens)
        server = _run_server_set(engine.model, EDITING, tokens)
        server_chat = _run_server_set(engine.model, CHAT, tokens)
        cost = check_cost(engine.model, _cost_tokens(engine))
    finally:
        engine.close()
    got = {"editing_speedup": editing["speedup"], "chat_speedup": chat["speedup"]}
    return {"tokens": tokens, "amx": engine.model.report.amx, "check_cost": cost,
            "editing": editing, "chat": chat, "server_editing": server, "server_chat": server_chat,
            "server_editing_speedup": server["median_prompt_speedup"],
            "server_chat_speedup": server_chat["median_prompt_speedup"], **got,
            "editing_median_prompt_speedup": editing["median_prompt_speedup"],
            "chat_median_prompt_speedup": chat["median_prompt_speedup"], "targets": TARGETS,
            "meets_targets": all(got[k] is not None and got[k] >= v for k, v in TARGETS.items())}
