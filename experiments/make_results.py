"""Regenerate every table of ``docs/results.md``, ``docs/fidelity.md`` and ``docs/hops.md`` from the result files in ``experiments/results/``, running nothing.

``docs/results.md`` keeps hand-written prose; every table or sentence whose numbers come from a result file
sits in a block::

    <!-- generated: EXPERIMENT.PART -->            (reads experiments/results/EXPERIMENT.json)
    <!-- generated: EXPERIMENT.PART from FILE -->  (reads experiments/results/FILE)
    ...
    <!-- end generated -->

``EXPERIMENT`` is a script ``experiments/EXPERIMENT.py`` (or ``benchmarks/EXPERIMENT.py``) exposing ``tables(data) -> dict[str, str]`` (the same
tables the script prints after a run, rendered from its result file alone); the block's content becomes
``tables(data)[PART]`` followed by a line naming the file, its commit and dlsched version. A missing or
malformed result file, an unknown experiment or part, or an unclosed block ends the command with one
``error:`` line naming the file, exit code 2.

    python experiments/make_results.py            # rewrite docs/results.md in place (atomically)
    python experiments/make_results.py --check    # exit 1, naming the first differing line, if it is stale
    python experiments/make_results.py --purge-stale  # delete result files not made by the code checked out now

``--purge-stale`` is the first step of ``make experiments``: it removes every JSON under ``experiments/results/``
whose provenance does not match the checkout (another commit or version, uncommitted changes, or none
recorded), so that re-running the experiments leaves no file from older code; files made by the current code
stay, so an interrupted ``make experiments`` resumes from the Sia runs it cached. It refuses to run on a tree
with uncommitted code changes (results must name a commit) unless given ``--allow-dirty``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
DOC = ROOT / "docs" / "results.md"
#: Every document with generated blocks: the results, the fidelity summary (paper vs ours per world), and
#: the Hops notes (its estimator against the oracle).
DOCS = (DOC, ROOT / "docs" / "fidelity.md", ROOT / "docs" / "hops.md")
#: Where the scripts that write result files live (experiments first).
SCRIPT_DIRS = (HERE, ROOT / "benchmarks")

BEGIN = re.compile(r"^<!-- generated: (?P<exp>[A-Za-z_][A-Za-z0-9_]*)\.(?P<part>[A-Za-z0-9_:-]+)"
                   r"(?: from (?P<file>[A-Za-z0-9_.-]+\.json))? -->$")
END = "<!-- end generated -->"


class ResultError(Exception):
    """A block cannot be rendered: the message names the file (result file or the document's line)."""


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def load(path: Path) -> dict[str, Any]:
    """A result file's content; a missing, unreadable or non-object file is a :class:`ResultError`."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultError(f"{_rel(path)}: missing (run the experiment that writes it; see `make experiments`)") from None
    except (OSError, ValueError) as exc:
        raise ResultError(f"{_rel(path)}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ResultError(f"{_rel(path)}: malformed (a JSON object was expected)")
    return data


def source_line(path: Path, data: dict[str, Any]) -> str:
    """The line under a generated block: which file and which code the numbers came from."""
    from dlsched.sim.about import describe_provenance

    version = data.get("dlsched_version")
    return (f"<sub>Generated from `{_rel(path)}` ({describe_provenance(data)}"
            f"{f', dlsched {version}' if version else ''}) by `make results`.</sub>")


def render_block(exp: str, part: str, file: str | None, results: Path = RESULTS, doc: Path = DOC) -> str:
    """The content of one block: the experiment's table ``part`` rendered from its result file, and the source."""
    path = results / (file or f"{exp}.json")
    script = next((d / f"{exp}.py" for d in SCRIPT_DIRS if (d / f"{exp}.py").is_file()), None)
    if script is None:
        raise ResultError(f"{_rel(doc)}: no script experiments/{exp}.py or benchmarks/{exp}.py for block {exp}.{part}")
    module = importlib.import_module(exp)
    if not callable(getattr(module, "tables", None)):
        raise ResultError(f"{_rel(script)}: has no tables(data) function")
    data = load(path)
    try:
        parts = module.tables(data)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError) as exc:
        raise ResultError(f"{_rel(path)}: malformed for {_rel(script)} ({type(exc).__name__}: {exc})") from None
    if part not in parts:
        raise ResultError(f"{_rel(doc)}: {_rel(script)} has no table {part!r} (it has {', '.join(parts)})")
    return f"{parts[part].rstrip()}\n\n{source_line(path, data)}"


def regenerate(text: str, results: Path = RESULTS, doc: Path = DOC) -> str:
    """``text`` (a document) with every generated block rendered afresh from ``results``."""
    for d in reversed(SCRIPT_DIRS):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        m = BEGIN.match(line.strip())
        if not m:
            if line.strip().startswith("<!-- generated"):
                raise ResultError(f"{_rel(doc)}:{i}: malformed block marker {line.strip()!r}")
            continue
        start = i
        while i < len(lines) and lines[i].strip() != END:
            if BEGIN.match(lines[i].strip()):
                break
            i += 1
        if i >= len(lines) or lines[i].strip() != END:
            raise ResultError(f"{_rel(doc)}:{start}: block {m['exp']}.{m['part']} has no {END!r}")
        out += ["", render_block(m["exp"], m["part"], m["file"], results, doc), "", END]
        i += 1
    return "\n".join(out)


def purge_stale(results: Path, allow_dirty: bool = False) -> int:
    """Delete the result files under ``results`` not made by the code checked out now; the number deleted."""
    from dlsched.sim.about import code_state, same_code

    state = code_state()
    if state["commit"] is None:
        raise ResultError(f"{_rel(ROOT)}: not a git checkout, so results cannot name a commit")
    if state["dirty"] and not allow_dirty:
        raise ResultError(f"{_rel(ROOT)}: uncommitted changes under src/, experiments/, benchmarks/, scripts/ or "
                          "pyproject.toml; commit them first so that results name their commit (or --allow-dirty)")
    removed = 0
    for path in sorted(results.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict) or not same_code(data):
            path.unlink()
            removed += 1
    return removed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when a document differs from what the result files give")
    p.add_argument("--doc", type=Path, action="append", default=None,
                   help="a document to regenerate (repeatable; default docs/results.md and docs/fidelity.md)")
    p.add_argument("--results", type=Path, default=RESULTS, help="result folder (default experiments/results)")
    p.add_argument("--purge-stale", action="store_true",
                   help="only delete result files not made by the code checked out now (before re-running)")
    p.add_argument("--allow-dirty", action="store_true", help="with --purge-stale: accept uncommitted changes")
    args = p.parse_args(argv)
    if args.purge_stale:
        try:
            removed = purge_stale(args.results, args.allow_dirty)
        except ResultError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"removed {removed} result files not made by the code checked out now", file=sys.stderr)
        return 0
    status = 0
    for doc in args.doc or DOCS:
        status = max(status, _one_doc(doc, args.results, args.check))
    return status


def _one_doc(doc: Path, results: Path, check: bool) -> int:
    """Regenerate (or with ``check`` compare) one document; the exit status."""
    try:
        current = doc.read_text()
        fresh = regenerate(current, results, doc)
    except ResultError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {_rel(doc)}: {exc.strerror}", file=sys.stderr)
        return 2
    if check:
        if fresh != current:
            old, new = current.split("\n"), fresh.split("\n")
            n = next((k for k, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
            print(f"error: {_rel(doc)}:{n + 1}: differs from the result files (run `make results`)",
                  file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        from dlsched.outputs import atomic_file

        with atomic_file(doc) as tmp:
            tmp.write_text(fresh)
        print(f"rewrote {_rel(doc)}", file=sys.stderr)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
