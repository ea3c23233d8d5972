"""``dlsched simulate --out`` then ``dlsched explain RUN_DIR JOB``: the paragraphs, the JSON records (the same
the Python API returns), ``--round``, explanations turned off, and refusals as one ``error:`` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dlsched
from dlsched.cli import app
from dlsched.explain import EXPLANATIONS_FILE, explain_paragraphs, load_records

runner = CliRunner()
pytestmark = pytest.mark.timeout(120)
TRACE = "synthetic:rate=2000,hours=0.05,seed=1,jobs=100,kind=rigid-duration"


def error_line(result) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("explain") / "run"
    res = runner.invoke(app, ["simulate", "--policy", "fifo", "--cluster", "sia-homo-64", "--trace", TRACE,
                              "--max-time-s", "3600", "--out", str(out)])
    assert res.exit_code == 0, res.stderr
    return out


def test_explain_prints_one_paragraph_per_stage(run_dir: Path) -> None:
    records = load_records(run_dir)
    waited = [r for r in records if r["stage"] == "allocation" and r["decided"] == "none"]
    assert waited, "the load should leave some job waiting behind the gang cut"
    job = waited[0]["job"]
    res = runner.invoke(app, ["explain", str(run_dir), job])
    assert res.exit_code == 0, res.stderr
    text = res.stdout
    assert text.startswith(f"{job}:\n")
    for stage in ("admission", "ordering", "allocation"):
        assert f"\n{stage}: round" in text
    assert "behind the gang cut" in text
    assert "in the fifo queue (submit time s" in text
    # consecutive rounds with the same decision collapse into a range
    assert "rounds " in text
    assert text.strip().split("\n\n")[1:] == explain_paragraphs(dlsched.explain(str(run_dir), job))[1:]


def test_json_records_are_the_python_apis_and_round_selects(run_dir: Path) -> None:
    records = load_records(run_dir)
    job = records[-1]["job"]
    res = runner.invoke(app, ["explain", str(run_dir), job, "--format", "json"])
    assert res.exit_code == 0, res.stderr
    got = [json.loads(line) for line in res.stdout.splitlines()]
    assert got == dlsched.explain(str(run_dir), job)
    assert {r["stage"] for r in got} >= {"admission", "ordering", "allocation"}
    r = got[-1]["round"]
    res = runner.invoke(app, ["explain", str(run_dir), job, "--round", str(r), "--format", "json"])
    at = [json.loads(line) for line in res.stdout.splitlines()]
    assert at and all(x["round"] <= r <= x.get("last_round", x["round"]) for x in at)
    assert len({x["stage"] for x in at}) == len(at)  # one record per stage in one round


def test_refusals_name_the_field(run_dir: Path, tmp_path: Path) -> None:
    assert "field 'job'" in error_line(runner.invoke(app, ["explain", str(run_dir), "no-such-job"]))
    job = load_records(run_dir)[0]["job"]
    assert "field 'round'" in error_line(runner.invoke(app, ["explain", str(run_dir), job, "--round", "999999"]))
    assert "field 'run_dir'" in error_line(runner.invoke(app, ["explain", str(tmp_path), job]))
    assert "field 'run_dir'" in error_line(runner.invoke(app, ["explain", str(tmp_path / "nope"), job]))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / EXPLANATIONS_FILE).write_text("{not json\n")
    assert "explanations.jsonl:1: not JSON" in error_line(runner.invoke(app, ["explain", str(bad), job]))


def test_explanations_off_writes_none(tmp_path: Path) -> None:
    out = tmp_path / "off"
    res = runner.invoke(app, ["simulate", "--policy", "fifo", "--cluster", "sia-homo-64", "--trace", TRACE,
                              "--max-time-s", "600", "--set", "explain=false", "--out", str(out)])
    assert res.exit_code == 0, res.stderr
    assert not (out / EXPLANATIONS_FILE).exists()
    assert json.loads((out / "config.json").read_text())["explain"] is False


def test_records_are_strict_json(tmp_path: Path) -> None:
    from dlsched.explain import plain_records, write_records

    recs = [{"round": 0, "time_s": 0.0, "job": "a", "stage": "ordering", "decided": "rank 1", "summary": "s",
             "facts": {"value": float("inf"), "nested": [float("nan"), 1.5]}}]
    write_records(tmp_path / EXPLANATIONS_FILE, recs)
    assert load_records(tmp_path)[0]["facts"] == {"value": None, "nested": [None, 1.5]}
    assert plain_records(recs) == load_records(tmp_path)


def test_a_forced_run_without_explanations_leaves_no_stale_file(run_dir: Path, tmp_path: Path) -> None:
    import shutil

    out = tmp_path / "again"
    shutil.copytree(run_dir, out)
    res = runner.invoke(app, ["simulate", "--policy", "fifo", "--cluster", "sia-homo-64", "--trace", TRACE,
                              "--max-time-s", "600", "--set", "explain=false", "--out", str(out), "--force"])
    assert res.exit_code == 0, res.stderr
    assert not (out / EXPLANATIONS_FILE).exists()
