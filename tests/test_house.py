"""The shape of ``src/dlsched``: no module over 600 lines, no import circle between its modules.

A long module does several things, and a circle makes two modules one in all but name (neither can be read,
tested or changed alone, and which one loads first decides what the other sees). Both creep in one small
change at a time, so they are checked on every run rather than left to review.

What counts as an import (decided here, stated in docs/layout.md): every ``import`` and
``from ... import`` of a ``dlsched`` module written anywhere in a module: at module level, inside a function
(a deferred import is still a dependency, only a later one), and under ``if TYPE_CHECKING:`` (the names it
brings are part of the module's interface, so the design depends on them even if the interpreter does not).
``from package import name`` counts as an import of ``package.name`` when that is a module, else of the
package's ``__init__``. A package's ``__init__`` is not counted as imported by its own submodules unless
they name it: Python runs it first, but a circle through it only forms when a submodule imports a name from
it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "dlsched"
MAX_LINES = 600


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line`` (``how``: module level, function or TYPE_CHECKING)."""

    source: str
    target: str
    line: int
    how: str


def modules(root: Path = SRC, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by the name of its ``__init__``'s folder)."""
    out: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Each import statement anywhere in ``tree`` with where it sits (``module``, ``function``,
    ``TYPE_CHECKING``); an import both in a function and under TYPE_CHECKING reads as TYPE_CHECKING."""
    stack: list[tuple[ast.AST, str]] = [(tree, "module")]
    while stack:
        node, how = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, how
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((stmt, "TYPE_CHECKING") for stmt in node.body)
            stack.extend((stmt, how) for stmt in node.orelse)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and how == "module":
            how = "function"
        stack.extend((child, how) for child in ast.iter_child_nodes(node))


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The innermost known module ``name`` lies in (``a.b.C`` -> ``a.b``), or None outside the package."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_edges(known: dict[str, Path]) -> list[Edge]:
    """Every import between two different modules of ``known``, as :class:`Edge`\\ s."""
    edges: list[Edge] = []
    for mod, path in known.items():
        is_pkg = path.name == "__init__.py"
        for node, how in _imports(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    origin = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    origin = node.module or ""
                targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin for a in node.names]
            for name in targets:
                target = _resolve(name, known)
                if target is not None and target != mod:
                    edges.append(Edge(mod, target, node.lineno, how))
    return edges


def strongly_connected(nodes: list[str], edges: list[Edge]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module (iterative: no recursion limit)."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        if e.target not in succ[e.source]:
            succ[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def a_cycle(component: list[str], edges: list[Edge]) -> list[Edge]:
    """One circle through the component's first module, edge by edge (breadth-first: a shortest one)."""
    inside = set(component)
    succ: dict[str, list[Edge]] = {}
    for e in edges:
        if e.source in inside and e.target in inside:
            succ.setdefault(e.source, []).append(e)
    start = component[0]
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for e in succ.get(v, []):
                if e.target == start:
                    path = [e]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                if e.target not in came:
                    came[e.target] = e
                    nxt.append(e.target)
        frontier = nxt
    raise AssertionError(f"no circle through {start} in {component}")  # a component always has one


def describe(component: list[str], edges: list[Edge]) -> str:
    lines = [f"import circle among {len(component)} modules: {', '.join(component)}", "  for example:"]
    lines += [f"    {e.source} imports {e.target} (line {e.line}, {e.how})" for e in a_cycle(component, edges)]
    return "\n".join(lines)


def test_no_module_over_the_line_limit() -> None:
    known = modules()
    assert len(known) > 50, f"found only {len(known)} modules under {SRC}: wrong folder?"
    long = sorted(((sum(1 for _ in p.open()), name) for name, p in known.items()), reverse=True)
    over = [f"{name}: {n} lines" for n, name in long if n > MAX_LINES]
    assert not over, f"modules over {MAX_LINES} lines (split each along a seam):\n  " + "\n  ".join(over)


def test_no_import_circle() -> None:
    known = modules()
    edges = import_edges(known)
    assert len(edges) > 100, f"found only {len(edges)} imports between dlsched modules: the parser missed them?"
    circles = strongly_connected(sorted(known), edges)
    assert not circles, "\n".join(describe(c, edges) for c in circles)


# -- the checker itself, on small packages written for the purpose ------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return modules(root, "pkg")


@pytest.mark.parametrize("how, line, a_text", [
    ("module", 1, "from pkg.b import f\n"),
    ("function", 2, "def g():\n    from pkg import b\n    return b\n"),
    ("TYPE_CHECKING", 3, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import f\n"),
    ("module", 1, "from .b import f\n"),
])
def test_a_circle_is_found_and_named(tmp_path: Path, how: str, line: int, a_text: str) -> None:
    known = _write(tmp_path, {"__init__.py": "", "a.py": a_text, "b.py": "import pkg.c\n",
                              "c.py": "from pkg.a import x\n", "d.py": "import pkg.a\n"})
    edges = import_edges(known)
    circles = strongly_connected(sorted(known), edges)
    assert circles == [["pkg.a", "pkg.b", "pkg.c"]]
    text = describe(circles[0], edges)
    assert "pkg.a, pkg.b, pkg.c" in text
    assert f"pkg.a imports pkg.b (line {line}, {how})" in text
    assert "pkg.b imports pkg.c (line 1, module)" in text and "pkg.c imports pkg.a (line 1, module)" in text


def test_a_tree_of_imports_has_no_circle(tmp_path: Path) -> None:
    known = _write(tmp_path, {"__init__.py": "from pkg.a import x\n", "a.py": "x = 1\n",
                              "sub/__init__.py": "", "sub/b.py": "from .. import a\nfrom pkg.sub import c\n",
                              "sub/c.py": "import os\nimport pkg.a\n"})
    edges = import_edges(known)
    assert {(e.source, e.target) for e in edges} == {("pkg", "pkg.a"), ("pkg.sub.b", "pkg.a"),
                                                     ("pkg.sub.b", "pkg.sub.c"), ("pkg.sub.c", "pkg.a")}
    assert strongly_connected(sorted(known), edges) == []
