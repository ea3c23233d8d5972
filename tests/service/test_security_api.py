"""Hostile input above the job's own processes: errors that say what happened (a full disk included), where a
job may run, who may act (users removed, tokens rotated and revoked, names checked), the audit trail of who
did, and what the CLI and the dashboard show of other people's text.

The API is the real app under uvicorn (``LiveServer``) on a real SQLite or PostgreSQL database; the full disk
is a real tmpfs under a real ``dlsched serve``; the CLI is the real command.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from apikit import LiveServer
from servicekit import start_service, stop_service, wait_for_server, wait_until
from typer.testing import CliRunner

from dlsched.cli import app as cli_app
from dlsched.core import InputError
from dlsched.service.api import create_app
from dlsched.service.dashboard import add_dashboard
from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store

pytestmark = pytest.mark.timeout(300)
runner = CliRunner()


def spec(working_dir: Path | str, name: str = "j", **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": "true", "working_dir": str(working_dir), "gpus": 1, **extra}


def one_error_line(result: Any) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[str, Store, dict[str, str], Path]]:
    """The API on a SQLite state, jobs confined to ``tmp_path/home`` (and the state's ``uploads/``), a
    dashboard, and a ``cluster_info`` that fails (a bug in a callable the API calls)."""
    state = tmp_path / "state"
    store = Store.open(state)
    tokens = {"alice": store.add_user("alice", team="vision"), "bob": store.add_user("bob", team="nlp"),
              "carol": store.add_user("carol", team="nlp"), "root": store.add_user("root", admin=True)}
    (tmp_path / "home").mkdir()

    def broken() -> dict[str, Any]:
        raise RuntimeError("secret internal state /srv/key")

    app = create_app(store, jobs_dir=state / "jobs", cluster_info=broken, allowed_dirs=[tmp_path, tmp_path / "home"],
                     protected_dirs=[tmp_path / "ckpt"], state_dir=state)
    add_dashboard(app, store, lambda: {"nodes": []})
    with LiveServer(app) as server:
        yield server.url, store, tokens, tmp_path
    store.close()


def call(url: str, token: str | None, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, url + path, headers={**headers, **kwargs.pop("headers", {})}, timeout=20, **kwargs)


def check_shape(r: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert isinstance(body["error"], str) and body["error"] and "\n" not in body["error"], body
    assert "detail" in body, body
    if field is not None:
        assert body.get("field") == field, body
    return body


def test_every_error_is_json_in_one_shape(api):
    url, store, tokens, root = api
    alice = tokens["alice"]
    check_shape(call(url, None, "GET", "/nope"), 404)
    check_shape(call(url, alice, "GET", "/v1/jobs/job-99"), 404)
    check_shape(call(url, alice, "DELETE", "/v1/whoami"), 405)
    check_shape(call(url, None, "GET", "/v1/jobs"), 401)
    check_shape(call(url, "wrong", "GET", "/v1/jobs"), 401)
    truncated = check_shape(call(url, alice, "POST", "/v1/jobs", content=b'{"name": "x", "gpus"',
                                 headers={"Content-Type": "application/json"}), 400)
    assert truncated["error"].startswith("the body is not valid JSON")
    bad = check_shape(call(url, alice, "POST", "/v1/jobs", json=spec(root / "home", gpus=0)), 422, "gpus")
    assert bad["message"].startswith("field 'gpus': ") and isinstance(bad["detail"], list)
    env = check_shape(call(url, alice, "POST", "/v1/jobs", json=spec(root / "home", env={"RANK": "0"})), 422, "env")
    assert "set by the service" in env["error"]
    check_shape(call(url, alice, "GET", "/v1/jobs", params={"al": "true"}), 422, "al")
    check_shape(call(url, alice, "GET", "/v1/jobs/job-1/logs", params={"offset": 3}), 404)
    store.add_job("alice", JobSubmission.model_validate(spec(root / "home")), time.time())
    check_shape(call(url, alice, "GET", "/v1/jobs/job-1/logs", params={"offset": 3}), 422, "rank")
    check_shape(call(url, alice, "GET", "/v1/audit"), 403)
    internal = check_shape(call(url, alice, "GET", "/v1/cluster"), 500)
    assert "RuntimeError" in internal["error"] and "secret" not in r_text(internal)  # the log has it, not the client
    assert call(url, None, "GET", "/healthz").json()["status"] == "ok"


def r_text(body: dict[str, Any]) -> str:
    return json.dumps(body)


def test_working_dir_must_lie_under_an_allowed_root_once_resolved(api):
    url, store, tokens, root = api
    alice = tokens["alice"]
    home, state = root / "home", root / "state"
    (home / "proj").mkdir()
    (home / "to-etc").symlink_to("/etc")
    (state / "uploads" / "alice").mkdir(parents=True)
    (state / "jobs" / "job-7").mkdir(parents=True)
    (root / "ckpt" / "job-7").mkdir(parents=True)
    (home / "to-jobs").symlink_to(state / "jobs" / "job-7")
    ok = call(url, alice, "POST", "/v1/jobs", json=spec(home / "proj" / ".." / "proj"))
    assert ok.status_code == 201 and ok.json()["spec"]["working_dir"] == str(home / "proj"), ok.text
    assert call(url, alice, "POST", "/v1/jobs", json=spec(state / "uploads" / "alice")).status_code == 201
    for refused in ("/etc", home / "to-etc", home / ".." / ".." / "etc", state, state / "jobs" / "job-7",
                    home / "to-jobs", root / "ckpt" / "job-7", "/nonexistent-folder"):
        body = check_shape(call(url, alice, "POST", "/v1/jobs", json=spec(refused)), 422, "working_dir")
        assert body["message"].startswith("field 'working_dir': "), body
    assert len(store.jobs()) == 2  # nothing refused was stored


def test_the_cli_escapes_what_jobs_and_users_wrote(api):
    url, store, tokens, root = api
    hostile = "\x1b[2J\x1b]0;owned\x07[bold red]markup[/bold red]\nforged: line"
    job = store.add_job("alice", JobSubmission.model_validate(spec(root / "home", command=f"echo '{hostile}'")),
                        time.time())
    store.update_job(job.id, message=hostile, reason=hostile, reason_detail=hostile)
    store.add_event(job.id, "note", hostile, now_s=time.time())
    env = {"DLSCHED_SERVER": url, "DLSCHED_TOKEN": tokens["alice"]}
    for args in (["show", job.id], ["jobs"], ["cancel", job.id]):
        res = runner.invoke(cli_app, args, env=env)
        assert res.exit_code == 0, (args, res.stdout, res.stderr)
        assert "\x1b" not in res.stdout and "\x07" not in res.stdout, (args, res.stdout)
        assert "\nforged: line" not in res.stdout, (args, res.stdout)
        if args[0] != "cancel":
            assert "\\x1b[2J" in res.stdout and "[bold red]markup[/bold red]" in res.stdout, (args, res.stdout)
    logs = root / "state" / "jobs" / job.id / "logs"
    logs.mkdir(parents=True)
    (logs / "rank0.log").write_text(f"step 1\tok\n{hostile}\n")
    shown = runner.invoke(cli_app, ["logs", job.id], env=env)
    assert shown.exit_code == 0 and "\x1b" not in shown.stdout and "step 1\tok\n" in shown.stdout, shown.stdout
    assert "\\x1b]0;owned\\x07" in shown.stdout
    raw = runner.invoke(cli_app, ["logs", job.id, "--raw"], env=env)
    assert raw.exit_code == 0 and hostile in raw.stdout


def test_a_non_admin_sees_only_their_own_and_their_teams_usage(api):
    url, store, tokens, root = api
    for user in ("alice", "bob", "carol"):
        job = store.add_job(user, JobSubmission.model_validate(spec(root / "home")), time.time())
        store.update_job(job.id, status="running", gpus=2, started_s=time.time())
    store.set_quota("team", "vision", 4)

    def usage(user: str) -> set[tuple[str, str, int]]:
        r = call(url, tokens[user], "GET", "/ui/v1/snapshot")
        assert r.status_code == 200, r.text
        return {(u["kind"], u["name"], u["gpus"]) for u in r.json()["usage"]}

    assert usage("bob") == {("user", "bob", 2), ("team", "nlp", 4)}  # carol's GPUs count in the team, unnamed
    assert usage("alice") == {("user", "alice", 2), ("team", "vision", 2)}
    everyone = usage("root")
    assert {("user", "carol", 2), ("team", "nlp", 4), ("team", "vision", 2)} <= everyone


def test_names_and_teams_are_limited_to_a_safe_character_set(tmp_path: Path):
    state = str(tmp_path / "state")
    for args in (["serve", "user", "add", "eve\nadmin", "--state", state],
                 ["serve", "user", "add", "eve", "--team", "a team;rm", "--state", state],
                 ["serve", "user", "add", "\x1b[31meve", "--state", state],
                 ["serve", "user", "add", "x" * 65, "--state", state]):
        line = one_error_line(runner.invoke(cli_app, args))
        assert "field 'name'" in line or "field 'team'" in line, line
        assert "\x1b" not in line
    store = Store.open(Path(state))
    assert store.users() == []
    store.close()


def test_users_are_removed_and_tokens_rotated_and_revoked(db_url: str):
    store = Store(db_url)
    old = store.add_user("ann", team="vision")
    store.add_token("ann")
    job = store.add_job("ann", JobSubmission.model_validate(spec("/tmp")), time.time())
    new = store.rotate_token("ann", actor="root")
    assert store.user_by_token(old) is None and store.user_by_token(new).name == "ann"
    assert [t["user"] for t in store.tokens("ann")] == ["ann"]
    second = store.add_token("ann")
    first_id = store.tokens("ann")[0]["id"]
    assert store.revoke_tokens("ann", first_id) == 1
    assert store.user_by_token(new) is None and store.user_by_token(second) is not None
    with pytest.raises(InputError, match="no token with id"):
        store.revoke_tokens("ann", first_id)
    assert store.revoke_tokens("ann") == 1 and store.user_by_token(second) is None
    with pytest.raises(InputError, match="unfinished job"):
        store.remove_user("ann")
    assert store.remove_user("ann", force=True, actor="root") == [job.id]
    assert store.job(job.id).status == "cancelled"  # the job stays, cancelled
    assert "ann" not in {u.name for u in store.users()}
    with pytest.raises(InputError, match="exists already"):
        store.add_user("ann")  # a removed name is not given out again
    with pytest.raises(InputError, match="was removed"):
        store.rotate_token("ann")
    with pytest.raises(InputError, match="service's own admin"):
        store.remove_user("admin")
    actions = [(a["actor"], a["action"], a["target"]) for a in store.audit()]
    assert actions[:3] == [(actions[0][0], "user-add", "ann"), (actions[0][0], "token-add", "ann"),
                           ("ann", "submit", job.id)]
    assert ("root", "token-rotate", "ann") in actions and ("root", "user-remove", "ann") in actions
    assert actions[0][0].startswith("os:")
    with pytest.raises(InputError, match="no user named"):
        store.submit_job("nobody", JobSubmission.model_validate(spec("/tmp")), time.time())
    assert len(store.audit()) == len(actions)  # a submission that failed left no audit row either
    store.close()


def test_migration_0006_keeps_every_user_and_token(tmp_path: Path):
    """Upgrading a database made at 0005 adds the audit table and ``users.removed_s`` and keeps tokens (a
    rebuild of ``users`` would have deleted them by their ON DELETE CASCADE)."""
    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config

    from dlsched.service.store import MIGRATIONS, _sqlite_pragmas, hash_token

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    sa.event.listen(engine, "connect", _sqlite_pragmas)
    with engine.begin() as conn:
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0005")
        conn.execute(sa.text("INSERT INTO users (name, team, admin, created_s) VALUES ('old', NULL, 0, 1.0)"))
        conn.execute(sa.text("INSERT INTO tokens (user, sha256, created_s) VALUES ('old', :h, 1.0)"),
                     {"h": hash_token("tok")})
    engine.dispose()
    store = Store(url)
    assert store.user_by_token("tok").name == "old" and store.audit() == []
    store.close()


def _mount_tmpfs(folder: Path, size: str) -> None:
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); the full-disk test "
                    "needs root and mount permission")


def _fill(folder: Path) -> Path:
    """A file that takes every free byte of ``folder``'s file system (megabytes, then pages)."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            block = b"\0" * size
            try:
                while True:
                    os.write(fd, block)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_is_a_503_that_stores_nothing_and_healthz_says_degraded(tmp_path: Path):
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "24m")
    state = disk / "state"
    proc = start_service(state, "--executor", "dry-run", "--round-s", "1", log=tmp_path / "serve.log")
    try:
        info = wait_for_server(state, proc, timeout_s=120)
        url, token = info["url"], info["token"]
        work = tmp_path / "work"
        work.mkdir()
        assert call(url, token, "POST", "/v1/jobs", json=spec(work, "before")).status_code == 201
        filler = _fill(disk)
        refused = call(url, token, "POST", "/v1/jobs", json=spec(work, "on-full-disk"),
                       headers={"Idempotency-Key": "full-1"})
        body = check_shape(refused, 503)
        assert "full" in body["error"].lower(), body
        health = call(url, None, "GET", "/healthz")
        assert health.status_code == 503 and health.json()["status"] == "degraded", health.text
        assert "full" in health.json()["cause"].lower() and health.json()["since"], health.text
        names = [j["name"] for j in call(url, token, "GET", "/v1/jobs", params={"all": "true"}).json()]
        assert names == ["before"], names  # nothing acknowledged, nothing stored
        filler.unlink()
        deadline = time.monotonic() + 30
        while call(url, None, "GET", "/healthz").status_code != 200:
            assert time.monotonic() < deadline, call(url, None, "GET", "/healthz").text
            time.sleep(0.5)
        assert call(url, None, "GET", "/healthz").json()["status"] == "ok"
        again = call(url, token, "POST", "/v1/jobs", json=spec(work, "on-full-disk"),
                     headers={"Idempotency-Key": "full-1"})
        assert again.status_code == 201, again.text  # the key was not stored with the refused job either
        assert proc.poll() is None, "the service died of the full disk"
    finally:
        stop_service(proc)
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_default_roots_and_the_audit_trail_of_a_real_service(tmp_path: Path):
    state = tmp_path / "state"
    proc = start_service(state, "--executor", "dry-run", "--round-s", "1", allow_dirs=())  # the defaults
    try:
        info = wait_for_server(state, proc, timeout_s=120)
        url, admin = info["url"], info["token"]
        (state / "uploads" / "bob").mkdir(parents=True)
        work = tmp_path / "work"
        work.mkdir()
        dlsched = ["serve", "--state", str(state)]
        bob = runner.invoke(cli_app, [dlsched[0], "user", "add", "bob", "--team", "nlp", *dlsched[1:]])
        assert bob.exit_code == 0, bob.stderr
        bob_token = bob.stdout.strip()
        refused = check_shape(call(url, bob_token, "POST", "/v1/jobs", json=spec(work)), 422, "working_dir")
        assert "not under a folder this service allows" in refused["error"] and "uploads" in refused["error"]
        job = call(url, bob_token, "POST", "/v1/jobs", json=spec(state / "uploads" / "bob",
                                                                  env={"DLSCHED_DRY_RUN_S": "600"}))
        assert job.status_code == 201, job.text
        job_id = job.json()["id"]
        assert call(url, bob_token, "POST", f"/v1/jobs/{job_id}/cancel").status_code == 200
        quota = runner.invoke(cli_app, [dlsched[0], "quota", "set", "--team", "nlp", "--gpus", "2", *dlsched[1:]])
        assert quota.exit_code == 0, quota.stderr
        rotated = runner.invoke(cli_app, [dlsched[0], "token", "rotate", "bob", *dlsched[1:]])
        assert rotated.exit_code == 0 and rotated.stdout.strip() != bob_token, rotated.stderr
        assert call(url, bob_token, "GET", "/v1/whoami").status_code == 401
        new_token = rotated.stdout.strip()
        assert call(url, new_token, "GET", "/v1/whoami").json()["name"] == "bob"
        listed = json.loads(runner.invoke(cli_app, [dlsched[0], "token", "list", "bob", *dlsched[1:],
                                                    "--format", "json"]).stdout)
        assert [t["user"] for t in listed] == ["bob"]
        revoked = runner.invoke(cli_app, [dlsched[0], "token", "revoke", "bob", "--id", str(listed[0]["id"]),
                                          *dlsched[1:]])
        assert revoked.exit_code == 0 and call(url, new_token, "GET", "/v1/whoami").status_code == 401
        wait_until("the cancelled job ends", lambda: call(url, admin, "GET", f"/v1/jobs/{job_id}").json()["status"]
                   == "cancelled", timeout_s=60, every_s=0.3)  # a placed job is stopped by the next round
        removed = runner.invoke(cli_app, [dlsched[0], "user", "remove", "bob", *dlsched[1:]])
        assert removed.exit_code == 0, removed.stderr  # no unfinished job left
        assert call(url, admin, "GET", f"/v1/jobs/{job_id}").json()["user"] == "bob"  # kept
        trail = runner.invoke(cli_app, [dlsched[0], "audit", *dlsched[1:], "--format", "json"])
        rows = [json.loads(line) for line in trail.stdout.splitlines()]
        actions = [(r["actor"], r["action"], r["target"]) for r in rows]
        me = rows[-1]["actor"]
        assert me.startswith("os:")
        for expected in [(me, "user-add", "bob"), ("bob", "submit", job_id), ("bob", "cancel", job_id),
                         (me, "quota-set", "team:nlp"), (me, "token-rotate", "bob"), (me, "token-revoke", "bob"),
                         (me, "user-remove", "bob")]:
            assert expected in actions, (expected, actions)
        order = [a for a in actions if a[2] in ("bob", job_id, "team:nlp")]
        assert [a[1] for a in order] == ["user-add", "submit", "cancel", "quota-set", "token-rotate",
                                         "token-revoke", "user-remove"], order
        only_bob = runner.invoke(cli_app, [dlsched[0], "audit", *dlsched[1:], "--user", "bob", "--format", "json"])
        assert {json.loads(line)["action"] for line in only_bob.stdout.splitlines()} == {"submit", "cancel"}
        later = runner.invoke(cli_app, [dlsched[0], "audit", *dlsched[1:], "--since", "1m"])
        assert later.exit_code == 0 and "user-remove" in later.stdout
        assert "field 'since'" in one_error_line(runner.invoke(cli_app, [dlsched[0], "audit", *dlsched[1:],
                                                                         "--since", "yesterday"]))
        api_rows = call(url, admin, "GET", "/v1/audit", params={"actor": "bob"}).json()
        assert [r["action"] for r in api_rows] == ["submit", "cancel"]
    finally:
        stop_service(proc)
    assert os.path.isdir(state)
