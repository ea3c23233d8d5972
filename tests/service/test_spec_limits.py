"""A hostile spec file ends in one ``error:`` line from the client, never a traceback or a full memory:
nesting 50,000 deep, an alias bomb, a file of many megabytes, bytes that are not UTF-8."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlsched", "spec", "check", str(path)], capture_output=True,
                          text=True, timeout=60)


BOMB = "\n".join(["a: &a [" + ", ".join(['"x"'] * 9) + "]"]
                 + [f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)])


@pytest.mark.parametrize(("text", "said"), [
    ("a: " + "[" * 50000 + "]" * 50000, "nested deeper than 32 levels"),
    ("a: " + "{b: " * 50000 + "1" + "}" * 50000, "nested deeper than 32 levels"),
    (BOMB, "more than 64 YAML aliases"),
    ("name: x\nenv:\n  A: '" + "y" * (2 << 20) + "'\n", "larger than 1024 KiB"),
], ids=["lists", "mappings", "alias-bomb", "huge"])
def test_a_hostile_spec_is_one_error_line(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    done = _check(path)
    assert done.returncode != 0
    assert done.stderr.startswith(f"error: {path}") and done.stderr.count("\n") == 1, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr


def test_bytes_that_are_not_text_are_named(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(b"name: \xff\xfe\n")
    done = _check(path)
    assert done.returncode != 0 and done.stderr.count("\n") == 1 and "not UTF-8" in done.stderr, done.stderr
