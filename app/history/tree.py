"""A conversation's messages as a tree: the path shown, and where a switch lands.

Each message names the message it follows (parent_id); a conversation remembers
the last message of the path it shows (active_leaf). These are the pure rules
the store applies to its rows: a hand-edited file may hold a loop or a parent
from elsewhere, so every walk stops at a message seen before or missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Node(Protocol):
    id: int
    parent_id: int | None


def path_to(nodes: Sequence[Node], leaf: int | None) -> list:
    """The messages from the first to `leaf` (its latest message's path when `leaf` is missing)."""
    by_id = {n.id: n for n in nodes}
    if leaf not in by_id:
        if not nodes:
            return []
        leaf = max(by_id)
    out, seen = [], set()
    cur = by_id.get(leaf)
    while cur is not None and cur.id not in seen:
        seen.add(cur.id)
        out.append(cur)
        cur = by_id.get(cur.parent_id) if cur.parent_id is not None else None
    out.reverse()
    return out


def latest_leaf(nodes: Sequence[Node], start: int | None) -> int | None:
    """Where showing `start` leads: down through the latest reply or version of each message to
    one that nothing follows (`start` None: the conversation's first messages)."""
    kids: dict[int | None, list[int]] = {}
    for n in nodes:
        kids.setdefault(n.parent_id, []).append(n.id)
    cur, seen = start, set()
    while cur not in seen:
        seen.add(cur)
        below = kids.get(cur)
        if not below:
            return cur
        cur = max(below)
    return cur


def subtree(nodes: Sequence[Node], root: int) -> set[int]:
    """`root` and every message after it on any branch."""
    kids: dict[int | None, list[int]] = {}
    for n in nodes:
        kids.setdefault(n.parent_id, []).append(n.id)
    out, stack = set(), [root]
    while stack:
        cur = stack.pop()
        if cur in out:
            continue
        out.add(cur)
        stack.extend(kids.get(cur, ()))
    return out
