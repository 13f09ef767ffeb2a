"""Where an admitted prompt's prefix comes from, so a prefix several slots share is evaluated once.

Chat clients all start with the same tokens (the transcript's preamble, a
system prompt), and a client's next turn with its whole history. Evaluating
those again in every slot made 8 chat clients little faster than one. So
before a slot prefills, its prompt's longest prefix already computed anywhere
is taken, cheapest first:

1. what its own sequence kept from its last request (the scheduler's kept prefix);
2. another sequence that holds more of it, busy or kept, copied (BatchContext.copy_prefix);
3. the disk prompt cache, for the format's shared prefix (the preamble and the
   system prompt), as the chat window does: a server started again does not
   evaluate it again, and the first slot to evaluate it saves it;
4. a slot still prefilling the same prefix: this one waits for it, and copies.

Like the scheduler, this runs only on the engine's run() thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.engine.control import common_prefix
from app.engine.message import MessageBody
from app.engine.prompt_cache import MIN_PREFIX_TOKENS, PromptCache
from app.slots.context import BatchContext
from app.slots.scheduler import Scheduler, SlotState
from app.slots.slot import Slot
from app.slots.types import PrefixCounts, SlotRequest

log = logging.getLogger("llamadesk.batch")

_PROBES = ("a", "b")  # two first messages: their prompts' common start is the format's shared prefix
ToTokens = Callable[[list[MessageBody], bool], list[int]]


class Prefixes:
    def __init__(self, bctx: BatchContext, sched: Scheduler[SlotRequest, Slot], to_tokens: ToTokens,
                 cache: PromptCache | None = None, share: bool = True):
        self.bctx, self.sched, self.to_tokens = bctx, sched, to_tokens
        self.cache = cache  # None: nothing is read from or written to disk
        self.share = share
        self.counts = PrefixCounts()
        self._shared: dict[tuple[str | None, bool], list[int] | None] = {}

    def keep(self, seq: int, toks: list[int]) -> int:
        """Cut the sequence back to what it shares with `toks`; how many tokens stay cached."""
        n = self.sched.take_kept(seq, toks)
        if n > 0 and self.bctx.cut(seq, n):
            return n
        self.bctx.clear_seq(seq)
        return 0

    def plan(self, slot: Slot, wait: bool = True) -> None:
        """At admission (`wait`) or when the slot it waited for went away: take the longest
        prefix held anywhere; with `wait`, follow a slot still prefilling a longer one."""
        toks = slot.prompt
        share = self.sched.share_source(slot.seq, toks, slot.prefilled, wait) if self.share else None
        if share is not None and share.ready:
            self._copy(slot, share.seq, share.n)
        prefix = self._disk_prefix(slot.req, toks)
        if prefix is not None and slot.prefilled < len(prefix):
            self._load(slot, prefix)
        if share is not None and not share.ready and share.n > slot.prefilled:
            leader = self.sched.slots[share.seq]
            assert leader is not None  # share_source only follows a busy slot
            slot.follow = (leader, share.n)
        elif prefix is not None and slot.prefilled < len(prefix):
            slot.save_at = len(prefix)

    def resolve(self, live: list[Slot]) -> None:
        """Before a step: a waiting slot whose leader has evaluated the prefix copies it; one
        whose leader is gone or does not step now takes what is held now instead (waiting on
        a paused batch slot, or under online_first on a batch slot, would never end)."""
        for s in live:
            if s.follow is None:
                continue
            leader, n = s.follow
            steps = any(x is leader for x in live) and self.sched.slots[leader.seq] is leader
            if steps and leader.state is SlotState.PREFILLING and leader.prefilled < n:
                continue
            s.follow = None
            if steps:
                self._copy(s, leader.seq, n)
            else:
                self.plan(s, wait=False)

    def chunk_end(self, s: Slot) -> int:
        """Where this step's prefill of `s` stops: its prompt's end, or the save point first."""
        if s.save_at is not None and s.prefilled < s.save_at:
            return s.save_at
        return len(s.prompt)

    def stepped(self, fed: list[tuple[Slot, int]]) -> None:
        """After a step decoded, before its samples: count the prompt tokens evaluated; a slot
        that just reached its save point holds exactly the shared prefix, the one moment it
        can be saved."""
        for s, k in fed:
            if s.state is SlotState.PREFILLING:
                self.counts.evaluated += k
            if s.save_at is not None and s.prefilled == s.save_at:
                if self.cache is not None:
                    self.cache.save(self.bctx.ctx, s.prompt[:s.save_at], s.seq)
                s.save_at = None

    def counted(self, slot: Slot) -> None:
        """As a slot ends: count how its prompt's prefix was found."""
        c = self.counts
        c.prompts += len(slot.prompt)
        c.shared += slot.shared
        c.disk += slot.cached_disk
        c.kept += slot.cached - slot.shared - slot.cached_disk

    # -- the three ways in -------------------------------------------------
    def _copy(self, slot: Slot, src: int, n: int) -> None:
        if n <= slot.prefilled:
            return
        if self.bctx.copy_prefix(src, slot.seq, n):
            slot.take_prefix(n, shared=n)
        else:
            log.info("copying %d tokens from sequence %d to %d failed; evaluating them", n, src, slot.seq)
            slot.take_prefix(0)

    def _disk_prefix(self, req: SlotRequest, toks: list[int]) -> list[int] | None:
        """The format's shared prefix for this chat request's system prompt, when the prompt
        starts with it and it is long enough to be worth a file; None otherwise."""
        if self.cache is None or not req.messages or req.prompt_tokens is not None:
            return None
        system = next((m.content for m in req.messages if m.role == "system"), None)
        key = (system if system and system.strip() else None, req.settings.preamble)
        if key not in self._shared:
            head = [MessageBody("system", key[0])] if key[0] else []
            a, b = (self.to_tokens([*head, MessageBody("user", p)], key[1]) for p in _PROBES)
            n = common_prefix(a, b)
            self._shared = dict(list(self._shared.items())[-7:])  # a few system prompts at most
            self._shared[key] = a[:n] if n >= MIN_PREFIX_TOKENS else None
        prefix = self._shared[key]
        if prefix is None or len(prefix) >= len(toks) or toks[:len(prefix)] != prefix:
            return None
        return prefix

    def _load(self, slot: Slot, prefix: list[int]) -> None:
        cache = self.cache
        assert cache is not None  # only a prefix of a cache's is loaded
        found = cache.lookup(prefix)
        if found is None:
            return
        if cache.restore(self.bctx.ctx, found, prefix, seq=slot.seq):
            slot.take_prefix(len(prefix), disk=len(prefix))
        else:
            slot.take_prefix(0)  # restore left the sequence empty
