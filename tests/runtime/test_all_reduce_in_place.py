"""In-place collectives must reduce a tensor the caller keeps.

``dist.all_reduce(x.to(device))`` reduces a temporary copy whenever ``.to`` copies (on CUDA) and drops it, so
each rank silently keeps its own values; on the CPU ``.to`` returns ``x`` itself, which hides the bug from any
CPU test run. This check reads the source instead: no in-place collective in dlsched may take a freshly
computed expression as its tensor.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dlsched

IN_PLACE = {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter"}


def _offenders(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if called not in IN_PLACE:
            continue
        tensor = node.args[0]
        if isinstance(tensor, ast.IfExp):
            tensor_parts = [tensor.body, tensor.orelse]
        else:
            tensor_parts = [tensor]
        if any(isinstance(part, ast.Call) for part in tensor_parts):
            found.append(f"{name}:{node.lineno}")
    return found


def test_the_check_catches_the_pattern() -> None:
    bad = "dist.all_reduce(packed.to(device) if device.type == 'cuda' else packed)\ndist.all_reduce(x.cuda())\n"
    good = "reduced = packed.to(device)\ndist.all_reduce(reduced)\ndist.all_reduce(packed, op=op)\n"
    assert _offenders(bad, "bad") == ["bad:1", "bad:2"]
    assert _offenders(good, "good") == []


def test_no_collective_reduces_a_temporary() -> None:
    root = Path(dlsched.__file__).parent
    offenders = [hit for path in sorted(root.rglob("*.py"))
                 for hit in _offenders(path.read_text(), str(path.relative_to(root)))]
    assert offenders == []
