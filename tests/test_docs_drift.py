"""The docs that name the code, checked against it: docs/architecture.md's Threads table and
paths, and the README's package table.

Plain reads of the source tree (ast and the Markdown text: nothing imported, no model), so they
run in a blink. Each failure names what is missing and where, and the line to write.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
README = ROOT / "README.md"
THREAD_PREFIX = "llamadesk-"
FIELD = "{}"  # an f-string's formatted field, and a table row's <placeholder>, compared as this
# A path the docs name: app/ then folders and a file, not the tail of another word or path.
APP_PATH = re.compile(r"(?<![\w./-])app/[\w./-]*")


# -- reading the docs ---------------------------------------------------------


def _section(path: Path, heading: str) -> list[tuple[int, str]]:
    """The (line number, line) pairs of the `## heading` section of a Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == f"## {heading}"), None)
    assert start is not None, f"{path.relative_to(ROOT)} has no '## {heading}' section any more"
    out = []
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("## "):
            break
        out.append((i + 1, lines[i]))
    return out


def _table(section: list[tuple[int, str]], first_header: str) -> list[tuple[int, list[str]]]:
    """The body rows (line number, cells) of the section's table whose first header is
    `first_header`."""
    rows: list[tuple[int, list[str]]] = []
    inside = False
    for no, line in section:
        if not line.startswith("|"):
            if inside:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not inside:
            inside = cells[0] == first_header
            continue
        if set(cells[0]) <= set("-: "):
            continue  # the |---| line
        rows.append((no, cells))
    return rows


def _ticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


# -- 1. threads ------------------------------------------------------------------


@dataclass(frozen=True)
class GivenName:
    """A thread name the code gives: `name=` (threading.Thread), `thread_name_prefix=` (a pool's
    threads are that prefix and _0, _1...) or WorkerThread's first argument (app/ui/threads.py)."""

    pattern: str  # the name, each formatted field of an f-string as FIELD
    shown: str  # as a table row would write it: the field's expression in <>
    where: str  # app/...py:line


def _name_of(node: ast.expr) -> tuple[str, str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, node.value
    if isinstance(node, ast.JoinedStr):
        pattern = shown = ""
        for part in node.values:
            if isinstance(part, ast.Constant):
                pattern, shown = pattern + str(part.value), shown + str(part.value)
            elif isinstance(part, ast.FormattedValue):
                pattern, shown = pattern + FIELD, shown + f"<{ast.unparse(part.value)}>"
        return pattern, shown
    return None


def code_thread_names() -> list[GivenName]:
    found = []
    for path in sorted(APP.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            values = [kw.value for kw in node.keywords if kw.arg in ("name", "thread_name_prefix")]
            func = node.func
            callee = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if callee == "WorkerThread" and node.args:
                values.append(node.args[0])
            for value in values:
                named = _name_of(value)
                if named is not None and named[0].startswith(THREAD_PREFIX):
                    found.append(GivenName(*named, f"{path.relative_to(ROOT).as_posix()}:{value.lineno}"))
    return found


def documented_thread_names() -> list[tuple[int, str]]:
    """(line, name) for every `llamadesk-...` in the first cell of the Threads table's rows;
    a `<placeholder>` stands for an f-string's field, a `*` is a glob."""
    rows = _table(_section(ARCHITECTURE, "Threads"), "thread")
    assert rows, "docs/architecture.md's Threads section has no table whose first column is 'thread'"
    return [(no, re.sub(r"<[^>]*>", FIELD, name)) for no, cells in rows
            for name in _ticked(cells[0]) if name.startswith(THREAD_PREFIX)]


def _documents(row: str, given: GivenName) -> bool:
    """A row names a thread exactly (a placeholder only an f-string's field), or by a glob."""
    return row == given.pattern or ("*" in row and fnmatchcase(given.pattern, row))


def test_every_thread_the_code_names_has_a_row_in_the_architecture_threads_table():
    given = code_thread_names()
    rows = documented_thread_names()
    assert given, "found no thread name in app/: has the way threads are named changed?"
    problems = [
        f"{g.where} starts a thread named `{g.shown}`, which docs/architecture.md's Threads table "
        f"does not list; add a row: | `{g.shown}` | what it owns | how work is handed on |"
        for g in given if not any(_documents(row, g) for _, row in rows)]
    problems += [
        f"docs/architecture.md:{no}: the Threads table lists `{row.replace(FIELD, '<...>')}`, but "
        "no name=, thread_name_prefix= or WorkerThread(...) in app/ gives a thread that name any "
        "more; rename the row to the thread's name now, or remove it"
        for no, row in rows if not any(_documents(row, g) for g in given)]
    assert not problems, "\n".join(problems)


# -- 2. packages -----------------------------------------------------------------


def _is_package(p: Path) -> bool:
    return p.is_dir() and (p / "__init__.py").is_file()


def app_top_level() -> list[str]:
    """app/'s packages and its modules but __init__.py and __main__.py."""
    names = [f"app/{p.name}" for p in sorted(APP.iterdir()) if _is_package(p)]
    return names + [f"app/{p.name}" for p in sorted(APP.glob("*.py")) if not p.name.startswith("__")]


def test_the_readme_package_table_lists_exactly_the_packages_of_app():
    rows = _table(_section(README, "Development"), "package")
    assert rows, "README.md's Development section has no table whose first column is 'package'"
    listed: dict[str, tuple[int, str]] = {}  # app/... of a first cell -> (line, the row's text)
    problems = []
    for no, cells in rows:
        names = [n for n in _ticked(cells[0]) if n.startswith("app/")]
        rest = " | ".join(cells[1:])
        for name in names:
            listed[name] = (no, rest)
            p = ROOT / name
            if not (_is_package(p) or (p.is_file() and p.suffix == ".py")):
                problems.append(f"README.md:{no}: the package table lists `{name}`, which is no "
                                "package or module of app/ any more; rename or remove it")
        for name in _ticked(rest):
            if name.startswith("app/") and not (ROOT / name).exists():
                problems.append(f"README.md:{no}: the package table names `{name}`, which does not exist")
            elif len(names) == 1 and re.fullmatch(r"[\w/]+(\.py|/)", name) and not (
                    ROOT / names[0] / name).exists():
                problems.append(f"README.md:{no}: the `{names[0]}` row names `{name}`, but "
                                f"{names[0]}/{name} does not exist")
    for name in app_top_level():
        if name not in listed:
            problems.append(
                f"README.md's package table (Development section) has no row for `{name}`; add "
                f"| `{name}` | what lives there | where its layer is (bottom up, as pyproject.toml's "
                "import-linter layers run)")
    # Packages inside packages (app/ui/models, app/history/export) are named in their parent's
    # row, as `models/` in app/ui's, or get a row of their own.
    for init in sorted(APP.glob("*/*/**/__init__.py")):
        parts = init.parent.relative_to(ROOT).parts
        sub, top, inner = "/".join(parts), "/".join(parts[:2]), "/".join(parts[2:]) + "/"
        if sub in listed or top not in listed:
            continue
        no, rest = listed[top]
        if inner not in _ticked(rest):
            problems.append(f"README.md:{no}: the `{top}` row does not name its package `{inner}` "
                            f"({sub}); add `{inner}` to what the row lists")
    assert not problems, "\n".join(problems)


# -- 3. paths ----------------------------------------------------------------------


def test_every_app_path_in_the_architecture_doc_exists():
    named = []
    for no, line in enumerate(ARCHITECTURE.read_text(encoding="utf-8").splitlines(), 1):
        named += [(no, m.group().rstrip(".,;:")) for m in APP_PATH.finditer(line)]
    assert named, "docs/architecture.md names no app/ path: has the way it names files changed?"
    problems = [f"docs/architecture.md:{no}: `{path}` does not exist; name the file or folder as it "
                "is now" for no, path in named if not (ROOT / path).exists()]
    assert not problems, "\n".join(problems)
