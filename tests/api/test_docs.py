"""The examples in docs/api.md and docs/extending.md run as written.

Each page's ``python`` code blocks run in order as one script, in a fresh interpreter (so the stages a page
registers do not leak into other tests), from the repository root (the pages name ``examples/stages/``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from testkit import DATA

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(page: str) -> list[str]:
    return BLOCK.findall((ROOT / "docs" / page).read_text())


@pytest.mark.parametrize("page", ["api.md", "extending.md"])
def test_the_page_s_examples_run(page: str, tmp_path: Path) -> None:
    code = blocks(page)
    assert len(code) >= 3, f"{page} lost its examples"
    script = tmp_path / "page.py"
    script.write_text("\n\n".join(code))
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "DLSCHED_DATA": str(DATA),
           "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, env=env,
                         timeout=600)
    assert run.returncode == 0, f"{page}:\n{run.stderr[-3000:]}"


def test_the_api_page_shows_what_its_error_example_prints(tmp_path: Path) -> None:
    """The "prints" block under the misspelt names is what that example prints (the known lists elided)."""
    page = (ROOT / "docs" / "api.md").read_text()
    shown = page.split("prints\n\n```\n", 1)[1].split("```", 1)[0].splitlines()
    example = next(b for b in blocks("api.md") if "dlsched.InputError" in b)
    run = subprocess.run([sys.executable, "-c", "import dlsched\n" + example], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=120)
    printed = run.stdout.splitlines()
    assert len(printed) == len(shown)
    for got, want in zip(printed, shown, strict=True):
        assert re.fullmatch(re.escape(want).replace(re.escape("..."), ".*"), got), (got, want)
