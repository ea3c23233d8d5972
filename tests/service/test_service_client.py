"""The client commands end to end against a live API server, and ``dlsched serve``'s own subcommands."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from apikit import live_api
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.service.store import Store

runner = CliRunner()
pytestmark = pytest.mark.timeout(120)  # a followed log that never ends would hang the run otherwise


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], Store, Path]]:
    store = Store.open(tmp_path / "state")
    tokens = {"alice": store.add_user("alice"), "bob": store.add_user("bob")}
    jobs_dir = tmp_path / "state" / "jobs"
    with live_api(store, jobs_dir) as server:
        yield server.url, tokens, store, jobs_dir
    store.close()


def cli(url: str, token: str, *args: str):
    return runner.invoke(app, list(args), env={"DLSCHED_SERVER": url, "DLSCHED_TOKEN": token})


def error_line(result) -> str:
    """The one ``error:`` line a refused command prints (and nothing else on stderr)."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def write_spec(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "job.yaml"
    path.write_text(text)
    return path


def test_submit_jobs_show_cancel_and_logs(live, tmp_path: Path):
    url, tokens, store, jobs_dir = live
    (tmp_path / "proj" / "code").mkdir(parents=True)
    spec = write_spec(tmp_path / "proj", "name: resnet-demo\ncommand: python resnet.py --epochs 2\n"
                      "working_dir: code\ngpus: 2\ngpu_types: [a100, v100]\nenv: {SEED: '1'}\n")
    res = cli(url, tokens["alice"], "submit", str(spec))
    assert res.exit_code == 0, res.stderr
    assert res.stdout == "job-1\n"
    assert store.job("job-1").submission.working_dir == str((tmp_path / "proj" / "code").resolve())
    res = cli(url, tokens["alice"], "submit", str(spec), "--format", "json")
    assert json.loads(res.stdout)["id"] == "job-2"

    res = cli(url, tokens["alice"], "jobs", "--format", "json")
    rows = json.loads(res.stdout)
    assert [r["id"] for r in rows] == ["job-1", "job-2"]
    assert {"id", "user", "name", "status", "gpus", "gpu_type", "submitted", "started", "finished"} <= set(rows[0])
    table = cli(url, tokens["alice"], "jobs").stdout
    for word in ("id", "user", "name", "status", "gpus", "gpu_type", "submitted", "job-1", "resnet-demo", "queued"):
        assert word in table
    assert json.loads(cli(url, tokens["bob"], "jobs", "--format", "json").stdout) == []

    res = cli(url, tokens["alice"], "cancel", "job-1")
    assert res.exit_code == 0 and res.stdout == "job-1 cancelled\n"
    assert [r["id"] for r in json.loads(cli(url, tokens["alice"], "jobs", "--format", "json").stdout)] == ["job-2"]
    assert len(json.loads(cli(url, tokens["alice"], "jobs", "--all", "--format", "json").stdout)) == 2

    shown = json.loads(cli(url, tokens["alice"], "show", "job-1", "--format", "json").stdout)
    assert shown["status"] == "cancelled" and [e["kind"] for e in shown["events"]] == ["submitted", "cancelled"]
    assert {"steps_done", "restarts", "failures"} <= set(shown)
    text = cli(url, tokens["alice"], "show", "job-1").stdout
    assert "status: cancelled" in text and "steps_done: 0" in text and "submitted by alice" in text

    logs = jobs_dir / "job-2" / "logs"
    logs.mkdir(parents=True)
    (logs / "rank0.log").write_text("hello from rank 0\n")
    (logs / "rank1.log").write_text("hello from rank 1\n")
    res = cli(url, tokens["alice"], "logs", "job-2")
    assert res.stdout == "==> rank0 <==\nhello from rank 0\n==> rank1 <==\nhello from rank 1\n"
    assert cli(url, tokens["alice"], "logs", "job-2", "--rank", "1").stdout == "==> rank1 <==\nhello from rank 1\n"
    store.update_job("job-2", status="failed", finished_s=time.time())
    res = cli(url, tokens["alice"], "logs", "job-2", "--follow", "--rank", "0")
    assert res.exit_code == 0 and res.stdout == "==> rank0 <==\nhello from rank 0\n"


def test_refusals_are_one_error_line(live, tmp_path: Path):
    url, tokens, store, _ = live
    spec = write_spec(tmp_path / "p", "name: ok\ncommand: 'true'\ngpus: 1\n")
    assert "401" in error_line(cli(url, "wrong-token", "jobs"))
    assert "404" in error_line(cli(url, tokens["alice"], "show", "job-7"))
    assert cli(url, tokens["alice"], "submit", str(spec)).exit_code == 0
    assert "404" in error_line(cli(url, tokens["bob"], "cancel", "job-1"))  # alice's job
    assert "404" in error_line(cli(url, tokens["bob"], "logs", "job-1"))
    assert "field 'rank'" in error_line(cli(url, tokens["alice"], "logs", "job-1", "--rank", "x"))
    bad = write_spec(tmp_path / "bad", "name: ok\ncommand: 'true'\ngpus: 0\n")
    assert error_line(cli(url, tokens["alice"], "submit", str(bad))).startswith(f"error: {bad} field 'gpus': ")
    typo = write_spec(tmp_path / "typo", "name: ok\ncommand: 'true'\ngpus: 1\ngpu_types: [a10O]\n")
    assert "did you mean 'a100'" in error_line(cli(url, tokens["alice"], "submit", str(typo)))
    nodir = write_spec(tmp_path / "nodir", "name: ok\ncommand: 'true'\ngpus: 1\nworking_dir: missing\n")
    assert "field 'working_dir'" in error_line(cli(url, tokens["alice"], "submit", str(nodir)))
    broken = write_spec(tmp_path / "yaml", "name: [unclosed\n")
    assert "not valid YAML" in error_line(cli(url, tokens["alice"], "submit", str(broken)))
    assert "cannot read" in error_line(cli(url, tokens["alice"], "submit", str(tmp_path / "none.yaml")))
    assert store.count_jobs() == 1
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert "cannot reach the service" in error_line(cli(dead, tokens["alice"], "jobs"))
    assert "DLSCHED_SERVER" in error_line(runner.invoke(app, ["jobs"], env={"DLSCHED_SERVER": "", "DLSCHED_TOKEN": ""}))
    assert "DLSCHED_TOKEN" in error_line(runner.invoke(app, ["jobs", "--server", url], env={"DLSCHED_TOKEN": ""}))


def test_serve_user_and_quota_commands_work_on_the_store(tmp_path: Path):
    state = str(tmp_path / "state")
    res = runner.invoke(app, ["serve", "user", "add", "alice", "--team", "vision", "--state", state])
    assert res.exit_code == 0, res.stderr
    token = res.stdout.strip()
    assert runner.invoke(app, ["serve", "user", "add", "root", "--admin", "--state", state]).exit_code == 0
    assert "exists already" in error_line(runner.invoke(app, ["serve", "user", "add", "alice", "--state", state]))
    users = json.loads(runner.invoke(app, ["serve", "user", "list", "--state", state, "--format", "json"]).stdout)
    assert users == [{"name": "alice", "team": "vision", "admin": False, "os_user": None},
                     {"name": "root", "team": None, "admin": True, "os_user": None}]
    assert "vision" in runner.invoke(app, ["serve", "user", "list", "--state", state]).stdout
    assert runner.invoke(app, ["serve", "quota", "set", "--team", "vision", "--gpus", "4", "--borrowing-limit", "2",
                               "--state", state]).exit_code == 0
    assert runner.invoke(app, ["serve", "quota", "set", "--user", "alice", "--gpus", "2", "--state", state]).exit_code == 0
    assert "exactly one" in error_line(runner.invoke(app, ["serve", "quota", "set", "--gpus", "2", "--state", state]))
    assert "field 'gpus'" in error_line(runner.invoke(app, ["serve", "quota", "set", "--user", "alice", "--gpus",
                                                            "many", "--state", state]))
    assert "field 'user'" in error_line(runner.invoke(app, ["serve", "quota", "set", "--user", "zed", "--gpus", "1",
                                                            "--state", state]))
    quotas = json.loads(runner.invoke(app, ["serve", "quota", "list", "--state", state, "--format", "json"]).stdout)
    assert quotas == [{"kind": "team", "name": "vision", "gpus": 4, "borrowing_limit": 2},
                      {"kind": "user", "name": "alice", "gpus": 2, "borrowing_limit": None}]
    store = Store.open(Path(state))
    try:
        assert store.user_by_token(token).name == "alice"
    finally:
        store.close()


def test_serve_checks_its_flags_before_starting(tmp_path: Path):
    assert "field 'state'" in error_line(runner.invoke(app, ["serve"]))
    for flag, value, field in (("--round-s", "0", "round_s"), ("--round-s", "nan", "round_s"),
                               ("--port", "70000", "port"), ("--executor", "docker", "executor"),
                               ("--database", "mysql://x", "database"), ("--set", "novalue", "set"),
                               ("--explain-keep-rounds", "0", "explain_keep_rounds"),
                               ("--explain-keep-rounds", "many", "explain_keep_rounds")):
        line = error_line(runner.invoke(app, ["serve", "--state", str(tmp_path), flag, value]))
        assert f"field '{field}'" in line, line


def test_without_the_service_extra_one_line_names_it(tmp_path: Path):
    script = f"""
import sys
sys.modules["httpx"] = None
sys.modules["sqlalchemy"] = None
from typer.testing import CliRunner
from dlsched.cli import app
r = CliRunner()
for args in (["serve", "--state", {str(tmp_path)!r}], ["serve", "user", "list", "--state", {str(tmp_path)!r}],
             ["jobs", "--server", "http://127.0.0.1:1", "--token", "t"]):
    res = r.invoke(app, args)
    print(res.exit_code, res.stderr.strip())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 3, done.stdout + done.stderr
    for line in lines:
        assert line.startswith("2 error: ") and "pip install 'dlsched[service]'" in line, line
