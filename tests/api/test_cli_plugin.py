"""``--plugin`` on the command line: stages of one's own by name, and one ``error:`` line when a file fails."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli import app

SMALL = ["--cluster", "sia-hetero-64", "--trace", "synthetic:rate=20,hours=1,seed=1", "--jobs", "5"]
PLUGIN = """
import dataclasses
import dlsched

@dataclasses.dataclass
class Newest:
    name: str = "cli-newest"

    def order(self, view, jobs):
        return sorted(jobs, key=lambda j: -j.spec.submit_time_s)

dlsched.register_stage("ordering", "cli-newest", Newest)
"""


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parametrize("command", [["simulate"], ["compare", "--policies", "fifo,las", "--workers", "1"]])
def test_a_plugin_s_stage_is_named_like_a_shipped_one(command: list[str], tmp_path: Path) -> None:
    plugin = tmp_path / "newest.py"
    plugin.write_text(PLUGIN)
    res = invoke(*command, "--plugin", str(plugin), "--ordering", "cli-newest", *SMALL, "--format", "json")
    assert res.exit_code == 0, res.output
    assert '"policy": "fifo+cli-newest"' in res.stdout


@pytest.mark.parametrize(("text", "message"), [
    (None, "plugin file not found"),
    ("import numpyy\n", "plugin failed to import: ModuleNotFoundError: No module named 'numpyy'"),
    ("x = (\n", "plugin has a syntax error"),
    ("raise SystemExit(3)\n", "plugin failed to import: SystemExit: 3"),
])
@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_a_plugin_that_fails_ends_with_one_error_line_naming_it(command: str, text: str | None, message: str,
                                                                 tmp_path: Path) -> None:
    plugin = tmp_path / "mine.py"
    if text is not None:
        plugin.write_text(text)
    res = invoke(command, "--plugin", str(plugin), *SMALL)
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {plugin}") and message in lines[0], res.stderr


def test_help_lists_the_option() -> None:
    assert "--plugin" in invoke("simulate", "--help").stdout
