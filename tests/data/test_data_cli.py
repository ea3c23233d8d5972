"""``dlsched data list|fetch`` as a user runs them, and the messages that send a user to ``data fetch``."""

from __future__ import annotations

import json
from pathlib import Path

import platformdirs
import pytest
from fetchkit import check_fetched
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.core import InputError
from dlsched.datadir import default_dir, require_data, target_dir

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def rows(res) -> dict[str, dict]:
    assert res.exit_code == 0, res.output
    return {r["name"]: r for r in map(json.loads, res.stdout.splitlines())}


def test_list_shows_absent_then_present_then_partial(tmp_path, serve, tiny):
    mirror, manifest = tiny
    data = tmp_path / "data"
    common = ("--manifest", str(manifest), "--data-dir", str(data))
    before = rows(invoke("data", "list", *common, "--format", "json"))["tiny"]
    assert before["state"] == "absent" and before["where"] is None and before["present_files"] == 0
    assert before["origins"] == [{"repository": "example-lab/tiny-artifact",
                                  "commit": "0123456789abcdef0123456789abcdef01234567"}]
    assert before["unavailable"] == [{"file": "tiny/notes.json", "reason": "written by hand"}]
    res = invoke("data", "fetch", "tiny", *common, "--mirror", serve(mirror))
    assert res.exit_code == 0, res.output
    assert "tiny: 6 written" in res.stdout and "warning: tiny/notes.json not fetched: written by hand" in res.stderr
    check_fetched(data / "tiny")
    after = rows(invoke("data", "list", *common, "--format", "json"))["tiny"]
    assert after["state"] == "present" and after["where"] == str(data / "tiny") and after["present_files"] == 6
    (data / "tiny" / "jobs.csv").write_bytes(b"truncated")  # wrong size: not the upstream file
    assert rows(invoke("data", "list", *common, "--format", "json"))["tiny"]["state"] == "partial"
    table = invoke("data", "list", *common)
    assert table.exit_code == 0
    assert "example-lab/tiny-artifact@0123456789abcdef0123456789abcdef01234567" in table.stdout
    assert "partial" in table.stdout and "tiny/notes.json: not downloadable: written by hand" in table.stderr


def test_fetch_refuses_corrupted_file_with_one_error_line(tmp_path, serve, tiny):
    mirror, manifest = tiny
    next(mirror.rglob("jobs.csv")).write_bytes(b"name,time\njob-0,0\njob-1,61\n")
    data = tmp_path / "data"
    res = invoke("data", "fetch", "all", "--manifest", str(manifest), "--data-dir", str(data),
                 "--mirror", serve(mirror))
    assert res.exit_code == 2
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "tiny/jobs.csv: checksum mismatch" in errors[0], res.stderr
    assert "Traceback" not in res.output
    assert not (data / "tiny").exists() and [p.name for p in data.iterdir()] == []


def test_fetch_unknown_and_unfetchable_names(tmp_path):
    res = invoke("data", "fetch", "nosuch", "--data-dir", str(tmp_path))
    assert res.exit_code == 2 and "field 'name': unknown dataset 'nosuch'" in res.stderr
    res = invoke("data", "fetch", "h200", "--data-dir", str(tmp_path))
    assert res.exit_code == 2 and "h200: no download brings it" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_packaged_list_names_every_dataset_with_full_commits(tmp_path):
    listed = rows(invoke("data", "list", "--data-dir", str(tmp_path / "none"), "--format", "json"))
    assert {"sia", "pollux", "gavel", "pal", "lucid", "tiresias", "alibaba", "h200"} <= set(listed)
    assert all(r["state"] in ("absent", "not fetchable") for r in listed.values())
    assert listed["lucid"]["redistribution"] is False and "non-commercial" in listed["lucid"]["licence"]
    assert listed["h200"]["origins"] == [] and listed["h200"]["state"] == "not fetchable"


def test_default_data_dir_is_the_user_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("DLSCHED_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert target_dir() == default_dir() == Path(platformdirs.user_data_dir("dlsched"))
    assert target_dir() == tmp_path / "xdg" / "dlsched"
    (tmp_path / "checkout").mkdir()
    (tmp_path / "shared" / "data").mkdir(parents=True)  # the old ../shared/data fallback is not used
    monkeypatch.chdir(tmp_path / "checkout")
    assert target_dir() == tmp_path / "xdg" / "dlsched"
    monkeypatch.setenv("DLSCHED_DATA", str(tmp_path / "mine"))
    assert target_dir() == tmp_path / "mine"


def test_fetch_fills_the_default_data_dir(tmp_path, monkeypatch, serve, tiny):
    mirror, manifest = tiny
    monkeypatch.delenv("DLSCHED_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("DLSCHED_DATA_MIRROR", serve(mirror))
    res = invoke("data", "fetch", "--manifest", str(manifest))
    assert res.exit_code == 0, res.output
    check_fetched(tmp_path / "xdg" / "dlsched" / "tiny")


def test_missing_dataset_error_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("DLSCHED_DATA", str(tmp_path / "absent"))
    with pytest.raises(InputError, match=r"`dlsched data fetch sia` brings it"):
        require_data("sia/traces/philly.csv", "Philly job log")
    (tmp_path / "absent").mkdir()
    with pytest.raises(InputError, match=r"`dlsched data fetch gavel` brings it"):
        require_data("gavel/simulation_throughputs.json", "Gavel throughputs")
    with pytest.raises(InputError, match=r"no download brings it \(transcribed by hand"):
        require_data("pal/pal_simulation_constants.json", "PAL constants")
    res = invoke("simulate", "--trace", "tiresias", "--policy", "fifo")
    assert res.exit_code == 2
    assert "`dlsched data fetch tiresias` brings it" in res.stderr and "\n" == res.stderr[-1]
    assert len(res.stderr.splitlines()) == 1
