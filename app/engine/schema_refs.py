"""JSON schemas whose `$ref`s recurse without end, refused before LLGuidance compiles them.

LLGuidance turns `{"$ref": "#"}`, a two-step `$ref` cycle, or an object that
requires a property of its own type into a grammar that matches nothing: the
matcher then fails at the first token, or exhausts its item limit on the
second, after the request was accepted. Whether a schema has any finite
instance is a least fixpoint over its local references, exact for the
constructs that decide it (required properties, minimum items, allOf, anyOf,
oneOf), so the refusal names the `$ref` that loops and the client hears it as
a 400 before anything is decoded. What this does not understand (remote
references, anchors) it leaves to the compiler.
"""

from __future__ import annotations

from urllib.parse import unquote

_MISSING = object()


def endless_ref(schema) -> str | None:
    """The first local `$ref` through which every instance of `schema` would recurse forever,
    or None when the schema has a finite instance (as far as references decide it)."""
    refs = {r: _target(schema, r) for r in _refs(schema)}
    refs = {r: t for r, t in refs.items() if t is not _MISSING}
    finite = dict.fromkeys(refs, False)
    changed = True
    while changed:  # each pass can only turn references finite: at most len(refs) passes
        changed = False
        for r, target in refs.items():
            if not finite[r] and _Walk(finite).finite(target):
                finite[r] = changed = True
    walk = _Walk(finite)
    return None if walk.finite(schema) else next(iter(walk.blocked), None)


class _Walk:
    """One evaluation of "has a finite instance", with each reference's answer so far."""

    def __init__(self, finite: dict[str, bool]):
        self.known = finite
        self.blocked: list[str] = []  # references found endless, in the order met

    def finite(self, node) -> bool:
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            return True  # not a schema: the compiler names it
        if "const" in node or "enum" in node:
            return True
        ok = True
        ref = node.get("$ref")
        if isinstance(ref, str) and ref in self.known and not self.known[ref]:
            self.blocked.append(ref)
            ok = False
        for key, need_all in (("allOf", True), ("anyOf", False), ("oneOf", False)):
            subs = node.get(key)
            if isinstance(subs, list) and subs:
                results = [self.finite(s) for s in subs]
                ok &= all(results) if need_all else any(results)
        return ok and self._typed(node)

    def _typed(self, node: dict) -> bool:
        types = node.get("type")
        if types is None:
            return True  # any type will do, and a number needs no reference
        names = types if isinstance(types, list) else [types]
        return any(self._of_type(node, t) for t in names)

    def _of_type(self, node: dict, name) -> bool:
        if name == "object":
            props = _of(node, "properties", dict)
            extra = node.get("additionalProperties", True)
            required = [k for k in _of(node, "required", list) if isinstance(k, str)]
            return all(self.finite(props.get(k, extra)) for k in required)
        if name == "array":
            least = node.get("minItems", 0)
            if not isinstance(least, int) or least <= 0:
                return True
            prefix = _of(node, "prefixItems", list)
            rest = node.get("items", True)
            needed = prefix[:least] + ([rest] if least > len(prefix) else [])
            return all(self.finite(s) for s in needed)
        return True


def _of(node: dict, key: str, kind: type):
    """node[key] when it is a `kind`, else an empty one: a malformed keyword is the compiler's to name."""
    value = node.get(key)
    return value if isinstance(value, kind) else kind()


def _refs(node) -> list[str]:
    """Every local `$ref` in the document, in document order, once each."""
    found: dict[str, None] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            ref = n.get("$ref")
            if isinstance(ref, str) and ref.startswith("#"):
                found[ref] = None
            stack.extend(reversed(list(n.values())))
        elif isinstance(n, list):
            stack.extend(reversed(n))
    return list(found)


def _target(root, ref: str):
    """What a local JSON pointer (`#`, `#/$defs/a`) names; _MISSING for an anchor or a dangling one."""
    pointer = unquote(ref[1:])
    if pointer and not pointer.startswith("/"):
        return _MISSING  # an anchor ("#name"): left to the compiler
    node = root
    for part in pointer.split("/")[1:] if pointer else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node
