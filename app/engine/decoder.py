"""The decode loop: prefill with prefix reuse, sample, stream, measure, cancel.

Written against llama.cpp's low-level API rather than
`create_chat_completion`: the high-level stream path re-detokenizes and copies
the logits into Python for every token, which the decode rate pays for; this
loop adds only what the reader needs (UTF-8 assembly, stop strings, events).
`llamadesk bench` measures it against the raw loop.

One Decoder owns one llama context (the model's own) and is not thread-safe:
only the thread that drives the chat uses it (the thread rule is in the
app.engine docstring). CancelToken.cancel is the one call safe from any thread.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

import llama_cpp

from app.engine import batch_fill, vocabulary
from app.engine.control import CancelToken, EventSink, common_prefix
from app.engine.draft import DraftDrafter, DraftModel, draft_for
from app.engine.errors import ContextOverflowError, GenerationError
from app.engine.events import Finished, PrefillStarted, Preparing, Progress
from app.engine.grammar import GrammarError
from app.engine.loader import LoadedModel
from app.engine.prompt_cache import MIN_PREFIX_TOKENS, PromptCache
from app.engine.sampling import GenerationSettings, Sampler
from app.engine.speculative import Drafter, NgramDrafter, Pacer, Speculation
from app.engine.stats import ReplyStats
from app.engine.swa_checkpoints import SwaCheckpoints
from app.engine.textstream import TokenReader
from app.engine.turn import PROGRESS_EVERY_S, Live, Perf, Turn

log = logging.getLogger("llamadesk.engine")
# What a model's first constrained reply waits for, as the waiting line says it.
INDEXING = "indexing the model's vocabulary for the reply's format (once per model)"


class Decoder:
    def __init__(self, model: LoadedModel, prompt_cache: PromptCache | None = None):
        self.model = model
        self.prompt_cache = prompt_cache  # None: nothing is read from or written to disk
        self.llm = model.llm
        self.ctx = self.llm.ctx
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.n_ctx = self.llm.n_ctx()
        self.n_batch = model.options.n_batch
        self.n_vocab = self.llm.n_vocab()
        self.n_swa = llama_cpp.llama_model_n_swa(self.llm.model)
        self.tokens: list[int] = []  # exactly what seq 0 of the KV cache holds
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self._perf = Perf(self.ctx)
        self._abort_state: Turn | None = None  # set only while a prefill runs
        self._abort_cb = llama_cpp.ggml_abort_callback(self._abort_check)
        self._no_abort = llama_cpp.ggml_abort_callback()  # NULL: no per-node Python call in decode
        # A plain step's measured cost, carried from reply to reply: speculation's yardstick.
        self._plain_s: float | None = None
        self.last_speculation: Speculation | None = None  # the last reply's: bench and tests replay it
        self.draft: DraftModel | None = None  # guesses for speculative="draft"
        self.can_speculate = model.rewinds
        # A small sliding-window cache cannot go back past its window by itself: its checkpoints
        # can (app.engine.swa_checkpoints). A full-size one, or no window, never needs them.
        swa_full = bool(getattr(self.llm.context_params, "swa_full", False))
        self.checkpoints = SwaCheckpoints(self.ctx, self.n_swa) if self.n_swa > 0 and not swa_full \
            and model.rewinds else None

    # -- tokens -------------------------------------------------------------
    def tokenize(self, text: str, add_bos: bool = True, special: bool = False) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    def kv_used(self) -> int:
        mem = llama_cpp.llama_get_memory(self.ctx)
        return llama_cpp.llama_memory_seq_pos_max(mem, 0) + 1

    def reset(self) -> None:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        self.tokens = []
        if self.checkpoints is not None:
            self.checkpoints.clear()

    def attach_draft(self, draft: LoadedModel | None) -> None:
        """The draft model speculative="draft" guesses with (None: none); refused, with the reason,
        when its vocabulary is not this model's. The decoder owns it from here and frees it."""
        checked = draft_for(self.model, draft) if draft is not None else None
        if self.draft is not None:
            self.draft.close()
        self.draft = checked

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self.checkpoints is not None:
            self.checkpoints.clear()
        self.attach_draft(None)

    # -- the KV cache ---------------------------------------------------------
    def _reuse_prefix(self, prompt: list[int]) -> int:
        """Keep the longest cached prefix of prompt; return its length."""
        n = common_prefix(self.tokens, prompt)
        if n == len(prompt):
            n -= 1  # the last prompt token must be evaluated to get logits
        if n < len(self.tokens):
            mem = llama_cpp.llama_get_memory(self.ctx)
            if not llama_cpp.llama_memory_seq_rm(mem, 0, n, -1):
                n = 0  # this memory type cannot be cut partially
                llama_cpp.llama_memory_clear(mem, True)
        self.tokens = self.tokens[:n]
        if n and not self._prefix_usable(n):
            n = self._from_checkpoint(prompt, n)
        if self.checkpoints is not None:
            self.checkpoints.keep_held(self.tokens)
        return n

    def _from_checkpoint(self, prompt: list[int], n: int) -> int:
        """The window before `n` is gone: go back to the latest checkpoint at or before it that
        begins the prompt, and return its end; with none, or one that does not give back what
        the next token needs, empty the cache and return 0 (the whole prompt is evaluated)."""
        cp = self.checkpoints.best(prompt, n) if self.checkpoints is not None else None
        if cp is not None and self.checkpoints is not None:
            mem = llama_cpp.llama_get_memory(self.ctx)
            if llama_cpp.llama_memory_seq_rm(mem, 0, cp.end, -1) and self.checkpoints.restore(cp):
                self.tokens = self.tokens[:cp.end]
                if self._prefix_usable(cp.end):
                    return cp.end
                log.warning("a sliding-window checkpoint at %d tokens did not hold the window before "
                            "it; evaluating the prompt again", cp.end)
        self.reset()
        return 0

    def _prefix_usable(self, n: int) -> bool:
        """Whether the cache really holds what the next token at position n needs.

        A sliding-window cache keeps only the last n_swa positions; after a
        rollback the window before n may already be gone (llama-server makes
        the same check), and then the honest answer is a full re-prefill.
        """
        mem = llama_cpp.llama_get_memory(self.ctx)
        if llama_cpp.llama_memory_seq_pos_max(mem, 0) != n - 1:
            return False
        if self.n_swa > 0 and llama_cpp.llama_memory_seq_pos_min(mem, 0) > max(0, n - self.n_swa):
            return False
        return True

    def _fill(self, toks: Sequence[int], pos0: int, want_logits: bool, every_row: bool = False) -> None:
        batch_fill.fill(self._batch, toks, pos0, every_row, want_logits)

    def _abort_check(self, _data) -> bool:
        """llama.cpp's abort callback, installed only during prefill: cancel and live gauges."""
        turn = self._abort_state
        try:
            if turn is None:
                return False
            if turn.cancelled():
                return True
            now = time.perf_counter()
            if turn.sink is not None and now - turn.last_progress >= PROGRESS_EVERY_S:
                self._prefill_progress(turn, now)
        except Exception:
            log.exception("the prefill's progress callback failed")
            return False
        return False

    def _prefill_progress(self, turn: Turn, now: float) -> None:
        """The prompt tokens evaluated so far, whole chunks (the cache grows a chunk at a time),
        with the running rate: the waiting line's "768/1500 prompt tok" and its time to go."""
        turn.last_progress = now
        done = len(self.tokens) - turn.cached
        took = now - turn.t_pre
        turn.emit(Progress("prefill", now - turn.t_submit, done, 0, done / took if done and took > 0
                           else None, len(self.tokens), self.n_ctx))

    # -- one reply ----------------------------------------------------------
    def generate(
        self,
        prompt: list[int],
        settings: GenerationSettings,
        on_event: EventSink | None = None,
        cancel: CancelToken | None = None,
        strip_leading: bool = True,
        shared_prefix: Sequence[int] | None = None,
    ) -> Finished:
        """One reply: check, reuse the cached prefix, prefill, decode, flush, measure.

        `shared_prefix`: the tokens every chat like this one starts with; with a
        prompt cache they come from disk when memory lacks them, or are saved
        there once evaluated. Events go to on_event on this thread; the
        returned Finished is also the last event.
        """
        max_new = self._check(prompt, settings)
        t_submit = time.perf_counter()
        if settings.constraint is not None and on_event is not None and not vocabulary.ready(self.vocab):
            on_event(Preparing(INDEXING))
        sampler = Sampler(settings, self.n_vocab, self.vocab, prompt)  # a bad constraint fails here, first
        turn = Turn(prompt, 0, cancel, on_event, t_submit)
        if settings.constraint is not None:
            turn.grammar_setup_s = time.perf_counter() - t_submit
        try:
            turn.cached = self._reuse_prefix(prompt)
            if shared_prefix is not None:
                self._from_disk(turn, list(shared_prefix))
            turn.emit(PrefillStarted(len(prompt), turn.cached, len(prompt) - turn.cached, self.n_ctx,
                                     turn.cached_disk, max_new))
            llama_cpp.llama_perf_context_reset(self.ctx)
            p0 = self._perf.snapshot()
            self._prefill(turn)
            p1 = self._perf.snapshot()
        except BaseException:
            sampler.close()
            raise
        reader = TokenReader(self.vocab, settings.stop, max_new, settings.ignore_eos, strip_leading)
        if settings.speculative and self.can_speculate:
            drafter: Drafter = DraftDrafter(self.draft, prompt) if settings.speculative == "draft" \
                and self.draft is not None else NgramDrafter(prompt)  # _check refused draft without one
            turn.spec = Speculation(drafter, Pacer(plain_s=self._plain_s))
        self._decode_loop(turn, reader, sampler)
        if turn.spec is not None:
            self._plain_s = turn.spec.pacer.plain_s
        self.last_speculation = turn.spec
        self._flush(turn, reader)
        done = Finished("".join(turn.parts), self._stats(turn, reader.generated, p0, p1),
                        tuple(reader.tokens), tuple(turn.logprobs))
        turn.emit(done)
        return done

    def _check(self, prompt: list[int], settings: GenerationSettings) -> int:
        """Refuse what cannot run; return how many tokens the reply may have."""
        settings.validate()
        if not prompt:
            raise GenerationError("empty prompt")
        if settings.speculative == "draft" and self.draft is None:
            raise GenerationError("speculative decoding with a draft model needs one: choose a draft "
                                  "model (--draft-model)")
        if len(prompt) >= self.n_ctx:
            raise ContextOverflowError(
                f"prompt is {len(prompt)} tokens; the context holds {self.n_ctx}"
            )
        return min(settings.max_tokens, self.n_ctx - len(prompt))

    def _from_disk(self, turn: Turn, prefix: list[int]) -> None:
        """Load the shared prefix from the prompt cache when memory lacks it, or plan to save it.

        Only a strict prefix of the prompt counts: the last prompt token is
        always evaluated, for its logits.
        """
        n = len(prefix)
        if (self.prompt_cache is None or n < MIN_PREFIX_TOKENS or n >= len(turn.prompt)
                or turn.cached >= n or turn.prompt[:n] != prefix):
            return
        found = self.prompt_cache.lookup(prefix)
        if found is not None and self.prompt_cache.restore(self.ctx, found, prefix):
            self.tokens = list(prefix)
            if self._prefix_usable(n):
                turn.cached = turn.cached_disk = n
                return
            self.prompt_cache.discard(prefix)  # loaded, but not what the next token needs
        if found is not None:
            self.reset()
            turn.cached = 0
        turn.save_at = n

    def _save_prefix(self, turn: Turn) -> None:
        """Seq 0 holds exactly the shared prefix now: the one moment its state can be saved."""
        if self.prompt_cache is not None and not turn.cancelled():
            self.prompt_cache.save(self.ctx, turn.prompt[:turn.save_at])

    def _chunks(self, turn: Turn) -> list[tuple[int, int]]:
        """The prefill's [start, end) spans: n_batch at most, and one ends where the prefix is saved."""
        cuts = [turn.cached, len(turn.prompt)]
        if turn.cached < turn.save_at < len(turn.prompt):
            cuts.insert(1, turn.save_at)
        return [(i, min(i + self.n_batch, b))
                for a, b in itertools.pairwise(cuts) for i in range(a, b, self.n_batch)]

    def _prefill(self, turn: Turn) -> None:
        """Evaluate the uncached prompt in chunks, with the abort callback set.

        Outside this phase the callback is NULL, so a decode step makes no
        per-node call into Python.
        """
        prompt = turn.prompt
        turn.t_pre = time.perf_counter()
        self._prefill_progress(turn, turn.t_pre)  # 0 of the prompt: the count starts here
        self._checkpoint(turn)  # where the cached part ends: the turn before this question
        self._abort_state = turn
        llama_cpp.llama_set_abort_callback(self.ctx, self._abort_cb, None)
        try:
            for start, end in self._chunks(turn):
                chunk = prompt[start:end]
                self._fill(chunk, len(self.tokens), end == len(prompt))
                rc = llama_cpp.llama_decode(self.ctx, self._batch)
                if rc == 2:  # aborted: the ubatches already done stay in the cache
                    self.tokens = prompt[:self.kv_used()]
                    turn.stop_reason = "cancelled"
                    break
                if rc != 0:
                    self.tokens = prompt[:max(0, self.kv_used())]
                    raise GenerationError(f"llama_decode failed during prefill (code {rc})")
                self.tokens.extend(chunk)
                if end == turn.save_at:
                    self._save_prefix(turn)
                if end < len(prompt):
                    self._checkpoint(turn)
                self._prefill_progress(turn, time.perf_counter())  # every chunk, however quick
        finally:
            llama_cpp.llama_set_abort_callback(self.ctx, self._no_abort, None)
            self._abort_state = None
        if turn.stop_reason is None and turn.cancelled():
            turn.stop_reason = "cancelled"

    def _checkpoint(self, turn: Turn) -> None:
        """Keep the sliding window where seq 0 ends now, a point a later branch may restart from:
        where the prompt's cached part ends (after the last reply: editing the question that
        followed it, or regenerating after a reply longer than the window can go back) and where
        each prefill chunk but the last ends (a branch inside a long stretch of new text).
        Taking one changes nothing in the cache, so a reply decodes exactly as without them."""
        if self.checkpoints is not None and self.tokens and not turn.cancelled() \
                and self._prefix_usable(len(self.tokens)):
            self.checkpoints.save(self.tokens)

    def _decode_loop(self, turn: Turn, reader: TokenReader, sampler: Sampler) -> None:
        """Sample, stream and evaluate until a stop; closes the sampler. With speculation, a step
        evaluates the sampled token with guesses at the next ones (app.engine.speculative)."""
        live = Live(turn, len(turn.prompt) - turn.cached, sampler.grammar)
        try:
            if turn.stop_reason is not None:  # the prefill was stopped: no logits to sample from
                return
            tok = sampler.sample(self.ctx)
            while not self._take(turn, reader, sampler, tok, live):
                room = min(reader.max_new - reader.generated, self.n_ctx - len(self.tokens) - 1,
                           self.n_batch - 1)
                guesses = turn.spec.guesses(room) if turn.spec is not None else []
                nxt = self._check_guesses(turn, reader, sampler, tok, guesses, live) if guesses \
                    else self._plain_step(turn, sampler, tok)
                if nxt is None:
                    break
                tok = nxt
        except (GenerationError, GrammarError) as e:  # a constraint breaking down mid-reply ends it
            turn.stop_reason, turn.error = "error", str(e)
        finally:
            if sampler.grammar is not None:
                turn.grammar_ms = sampler.grammar.ms_per_token()
            sampler.close()

    def _take(self, turn: Turn, reader: TokenReader, sampler: Sampler, tok: int, live: Live) -> bool:
        """One sampled token into the reply: its text, logprob, clock, drafter; True at a stop."""
        now = time.perf_counter()
        counted = reader.generated
        delta = reader.accept(tok)
        if reader.generated > counted:  # an end-of-generation token is not a token of the reply
            live.recent.append(now)
            turn.timer.token(now)
            if sampler.last is not None:
                turn.logprobs.append(sampler.last)
                turn.unsent += 1
        if delta:
            turn.show(delta, reader.generated, now)
        if reader.stop_reason is not None:
            turn.stop_reason = reader.stop_reason
        elif sampler.grammar is not None and sampler.grammar.finished:
            turn.stop_reason = "stop"  # complete: the grammar allows nothing but the end
        elif turn.cancelled():
            turn.stop_reason = "cancelled"
        if turn.stop_reason is not None:
            return True
        if turn.spec is not None:
            turn.spec.took(tok)
        live.progress(now, reader.generated, len(self.tokens) + 1, self.n_ctx)
        return False

    def _eval(self, toks: Sequence[int], every_row: bool = False) -> None:
        self._fill(toks, len(self.tokens), True, every_row)
        rc = llama_cpp.llama_decode(self.ctx, self._batch)
        if rc != 0:
            raise GenerationError(f"llama_decode failed while generating (code {rc})")

    def _plain_step(self, turn: Turn, sampler: Sampler, tok: int) -> int:
        t0 = time.perf_counter()
        self._eval((tok,))
        self.tokens.append(tok)
        nxt = sampler.sample(self.ctx)
        turn.decoded += 1
        if turn.spec is not None:
            turn.spec.pacer.plain_step(time.perf_counter() - t0)
        return nxt

    def _check_guesses(self, turn: Turn, reader: TokenReader, sampler: Sampler, tok: int,
                       guesses: list[int], live: Live) -> int | None:
        """Evaluate tok and the guesses in one pass; keep the guesses the model agrees with, row by
        row as its sampler draws; return the model's own next token (None: the reply stopped)."""
        spec = turn.spec
        assert spec is not None
        t0 = time.perf_counter()
        spec.checks.append((len(self.tokens), (tok, *guesses)))
        self._eval((tok, *guesses), every_row=True)
        self.tokens.append(tok)
        kept, nxt = 0, None
        for i in range(len(guesses) + 1):
            nxt = sampler.sample(self.ctx, i)
            turn.decoded += 1
            if i == len(guesses) or nxt != guesses[i]:
                break
            kept += 1
            if self._take(turn, reader, sampler, nxt, live):
                nxt = None
                break
            self.tokens.append(nxt)  # its KV row is this pass's row i + 1
        mem = llama_cpp.llama_get_memory(self.ctx)
        llama_cpp.llama_memory_seq_rm(mem, 0, len(self.tokens), -1)  # the rejected guesses' rows
        spec.pacer.check(len(guesses), kept, time.perf_counter() - t0 + spec.guess_s)
        return nxt

    def _flush(self, turn: Turn, reader: TokenReader) -> None:
        """Show the text the reader held back (a partial stop string, a split character)."""
        tail = reader.finish()
        if tail:
            turn.show(tail, reader.generated, time.perf_counter())

    def _stats(self, turn: Turn, generated: int, p0: tuple[int, float],
               p1: tuple[int, float]) -> ReplyStats:
        """The reply's record: compute times by phase from llama.cpp's counters."""
        p2 = self._perf.snapshot()
        t_end = time.perf_counter()
        pre_n, pre_s = p1[0] - p0[0], p1[1] - p0[1]
        dec_n, dec_s = p2[0] - p1[0], p2[1] - p1[1]
        spec = turn.spec
        if spec is not None:
            dec_n = turn.decoded  # llama.cpp counts the rejected guesses as evaluated tokens too
        decode_tok_s = dec_n / dec_s if dec_s > 0 and dec_n else None
        speedup = spec.pacer.speedup() if spec is not None else None
        st = ReplyStats(
            ttft_s=turn.timer.ttft_from(turn.t_submit),
            prefill_tokens=pre_n,
            cached_tokens=turn.cached,
            prefill_s=pre_s,
            prefill_tok_s=pre_n / pre_s if pre_s > 0 and pre_n else None,
            decode_tokens=generated,
            decode_s=dec_s,
            decode_tok_s=decode_tok_s,
            total_s=t_end - turn.t_submit,
            kv_used=self.kv_used(),
            n_ctx=self.n_ctx,
            stop_reason=turn.stop_reason or "stop",
            prompt_tokens=len(turn.prompt),
            wall_decode_tok_s=turn.timer.wall_rate(generated),
            error=turn.error,
            cached_disk_tokens=turn.cached_disk,
            grammar_ms_per_token=turn.grammar_ms,
            grammar_setup_s=turn.grammar_setup_s,
            gpu_layers=self.model.report.layers_offloaded,
            layers_total=self.model.report.layers_total,
            gpu_device=self.model.report.gpu_device,
        )
        if spec is None:
            return st
        p = spec.pacer
        return replace(st, spec_mode=spec.mode, draft_tokens=p.drafted, draft_accepted=p.accepted,
                       spec_checks=p.checks, spec_stepped_aside=p.stepped_aside,
                       plain_tok_s=decode_tok_s / speedup if decode_tok_s and speedup else None)
