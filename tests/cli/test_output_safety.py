"""dlsched never writes over what is not its own, and a bad output target fails before any work.

Targets tried: a character device (made in a temporary folder, never /dev/null itself), a directory, a
symbolic link, an empty path, an existing regular file where a folder is wanted, a path under a regular
file, and an ``--out`` folder that already holds an earlier run's results (refused unless ``--force``).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli import app

runner = CliRunner()
TRACE = "synthetic:rate=6,hours=1,seed=3"
SMALL = ["--trace", TRACE, "--cluster", "sia-hetero-64"]


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def one_error_line(res, *fragments: str) -> str:
    """The run failed with exit 2 and one ``error:`` line containing every fragment."""
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def device(tmp_path: Path) -> Path:
    """A character device equal to /dev/null, made in a temporary folder."""
    path = tmp_path / "null-device"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return path


def is_same_device(path: Path) -> bool:
    st = path.lstat()
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)


# -- trace convert -----------------------------------------------------------------------------------------


def test_trace_convert_refuses_a_device_and_leaves_it(device: Path):
    one_error_line(invoke("trace", "convert", TRACE, str(device)), str(device), "device")
    assert is_same_device(device)


def test_trace_convert_refuses_a_directory_and_leaves_it(tmp_path: Path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    one_error_line(invoke("trace", "convert", TRACE, str(folder)), str(folder), "directory")
    assert folder.is_dir() and (folder / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]  # no temporary file left behind


def test_trace_convert_refuses_a_symlink_and_leaves_link_and_target(tmp_path: Path):
    outside = tmp_path / "elsewhere" / "precious.csv"
    outside.parent.mkdir()
    outside.write_text("precious\n")
    link = tmp_path / "out" / "trace.csv"
    link.parent.mkdir()
    link.symlink_to(outside)
    one_error_line(invoke("trace", "convert", TRACE, str(link)), str(link), "symbolic link")
    assert link.is_symlink() and os.readlink(link) == str(outside)
    assert outside.read_text() == "precious\n"


def test_trace_convert_replaces_a_regular_file_with_ordinary_permissions(tmp_path: Path):
    target = tmp_path / "trace.csv"
    target.write_text("old\n")
    res = invoke("trace", "convert", TRACE, str(target))
    assert res.exit_code == 0, res.output
    assert target.read_text().startswith("job_id,submit_time_s,")
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()


@pytest.mark.parametrize(("target", "fragment"), [
    ("", "empty"),
    ("plain.txt/trace.csv", "not a directory"),
])
def test_trace_convert_bad_targets_are_one_line(tmp_path: Path, target: str, fragment: str):
    (tmp_path / "plain.txt").write_text("x")
    path = str(tmp_path / target) if target else ""
    one_error_line(invoke("trace", "convert", TRACE, path), fragment)
    assert (tmp_path / "plain.txt").read_text() == "x"


def test_trace_convert_checks_the_target_before_reading_the_trace(tmp_path: Path):
    # A trace that does not exist and a bad target: the target is named, so it was checked first.
    one_error_line(invoke("trace", "convert", str(tmp_path / "missing.csv"), ""), "empty")


# -- simulate / compare --out ------------------------------------------------------------------------------


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_out_as_a_device_is_refused_before_simulating(device: Path, command: str):
    extra = ["--policies", "fifo", "--workers", "1"] if command == "compare" else []
    one_error_line(invoke(command, *SMALL, *extra, "--out", str(device)), str(device), "not a directory")
    assert is_same_device(device)


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_out_empty_is_an_error(command: str):
    one_error_line(invoke(command, *SMALL, "--out", ""), "--out is empty")


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_out_naming_an_existing_file_is_refused_and_the_file_kept(tmp_path: Path, command: str):
    existing = tmp_path / "results.txt"
    existing.write_text("keep me")
    one_error_line(invoke(command, *SMALL, "--out", str(existing)), str(existing), "regular file")
    assert existing.read_text() == "keep me"


def test_out_under_a_regular_file_is_refused(tmp_path: Path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    one_error_line(invoke("simulate", *SMALL, "--out", str(plain / "run")), "not a directory")
    assert plain.read_text() == "x"


def test_out_in_an_unwritable_folder_is_refused(tmp_path: Path):
    if os.geteuid() == 0:
        pytest.skip("root may write anywhere; a path under a regular file covers the unwritable case")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    one_error_line(invoke("simulate", *SMALL, "--out", str(locked / "run")), "not writable")


def test_out_is_created_with_ordinary_permissions(tmp_path: Path):
    out = tmp_path / "new" / "run"
    res = invoke("simulate", *SMALL, "--out", str(out), "--format", "json")
    assert res.exit_code == 0, res.output
    for folder in (out, out.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~_umask()
    for f in out.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~_umask(), f
    assert not [f for f in out.iterdir() if f.name.startswith(".")]  # no temporary files left


def test_reusing_out_needs_force_and_then_leaves_no_stale_files(tmp_path: Path):
    out = tmp_path / "cmp"
    res = invoke("compare", "--policies", "fifo,las", *SMALL, "--workers", "1", "--out", str(out))
    assert res.exit_code == 0, res.output
    stale = {p.name for p in out.iterdir()}
    assert "jobs-las-seed0.csv" in stale
    (out / "notes.txt").write_text("my notes")  # not a result: never touched

    before = {p.name: p.read_bytes() for p in out.iterdir()}
    one_error_line(invoke("simulate", *SMALL, "--out", str(out)), str(out), "earlier run", "--force")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before

    res = invoke("simulate", *SMALL, "--out", str(out), "--force", "--format", "json")
    assert res.exit_code == 0, res.output
    names = {p.name for p in out.iterdir()}
    assert names == {"jobs.csv", "rounds.csv", "allocations.csv", "cluster.json", "summary.json", "config.json",
                     "report.html", "explanations.jsonl", "notes.txt"}
    assert isinstance(json.loads((out / "summary.json").read_text()), dict)  # the new run's, not the list


def test_force_still_refuses_a_symlinked_result_and_leaves_its_target(tmp_path: Path):
    out = tmp_path / "run"
    out.mkdir()
    outside = tmp_path / "precious.json"
    outside.write_text("{}")
    (out / "summary.json").symlink_to(outside)
    one_error_line(invoke("simulate", *SMALL, "--out", str(out), "--force"), "symbolic link")
    assert (out / "summary.json").is_symlink() and outside.read_text() == "{}"
    assert [p.name for p in out.iterdir()] == ["summary.json"]


def test_an_empty_existing_folder_is_fine_without_force(tmp_path: Path):
    out = tmp_path / "empty"
    out.mkdir()
    res = invoke("simulate", *SMALL, "--out", str(out), "--format", "json")
    assert res.exit_code == 0, res.output
    assert (out / "summary.json").exists()


def test_compare_without_out_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    res = invoke("compare", "--policies", "fifo", *SMALL, "--workers", "1", "--format", "json")
    assert res.exit_code == 0, res.output
    assert list(tmp_path.iterdir()) == []
    assert "--out" in res.stderr  # says how to keep the report


def test_compare_out_writes_report_summary_and_per_run_tables(tmp_path: Path):
    out = tmp_path / "cmp"
    res = invoke("compare", "--policies", "fifo,las", *SMALL, "--seeds", "2", "--workers", "1", "--out", str(out))
    assert res.exit_code == 0, res.output
    names = {p.name for p in out.iterdir()}
    assert {"report.html", "summary.json", "config.json", "jobs-fifo-seed0.csv", "jobs-las-seed1.csv"} <= names
    rows = json.loads((out / "summary.json").read_text())
    assert [r["policy"] for r in rows] == ["fifo", "las"]
    assert len(json.loads((out / "config.json").read_text())) == 4
