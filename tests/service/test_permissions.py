"""The modes of what the service keeps: its state, database, ``server.json`` and token (0600, its own), the
jobs' folders and checkpoints (reachable by the job's account only); and a service without the privileges
to run jobs elsewhere says so and serves one user unless told ``--allow-shared-account``.

Run as root (as CI does): the service runs its jobs under the OS accounts the test creates. The dry-run
executor starts no process, but the round loop prepares each job's folders as for a real launch."""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from isolationkit import NO_SUITE_ISOLATION, os_account, passable_tmp, require_root
from servicekit import EXAMPLES, client, service_log, start_service, stop_service, wait_for_server, wait_until

pytestmark = pytest.mark.timeout(300)


def _mode(path: Path) -> tuple[int, int, int]:
    st = path.lstat()
    return stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def _spec(folder: Path, name: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "command": "python mlp.py", "working_dir": str(EXAMPLES),
                                    "gpus": 1, "env": {"DLSCHED_DRY_RUN_S": "600"}}))
    return path


def test_the_state_and_each_jobs_folders_are_reachable_only_by_their_owners() -> None:
    require_root()
    alice = os_account("dlsched-t-alice")
    job_user = os_account("dlsched-t-jobs")
    with passable_tmp() as base:
        state = base / "state"
        add = subprocess.run([sys.executable, "-m", "dlsched", "serve", "user", "add", "alice", "--os-user",
                              alice.name, "--state", str(state)], capture_output=True, text=True, timeout=120)
        assert add.returncode == 0, add.stderr
        alice_token = add.stdout.strip()
        bob_token = subprocess.run([sys.executable, "-m", "dlsched", "serve", "user", "add", "bob", "--state",
                                    str(state)], capture_output=True, text=True, timeout=120, check=True).stdout.strip()
        proc = start_service(state, "--executor", "dry-run", "--round-s", "1", "--isolation", "accounts",
                             "--job-user", job_user.name, env=NO_SUITE_ISOLATION)
        try:
            info = wait_for_server(state, proc)
            health = httpx.get(info["url"] + "/healthz", timeout=5).json()
            assert health["isolation"] == "accounts"
            ids = {who: client({**info, "token": token}, "submit", str(_spec(base, who))).stdout.strip()
                   for who, token in (("alice", alice_token), ("bob", bob_token))}
            wait_until("both jobs placed", lambda: all(
                json.loads(client(info, "show", j, "--format", "json").stdout)["status"] == "running"
                for j in ids.values()), timeout_s=120)
            assert _mode(state)[0] == 0o711  # others may pass to their job's folder, not list
            for name in ("dlsched.db", "server.json", "admin.token", "serve-config.json"):
                assert _mode(state / name) == (0o600, 0, 0), name
            assert _mode(state / "jobs")[0] == 0o711 and _mode(state / "checkpoints")[0] == 0o711
            for who, account in (("alice", alice), ("bob", job_user)):
                job_dir, ckpt = state / "jobs" / ids[who], state / "checkpoints" / ids[who]
                assert _mode(job_dir) == (0o710, 0, account.gid), who  # it enters, writes nothing
                assert _mode(job_dir / "logs") == (0o700, 0, 0), who  # the service's alone
                assert _mode(job_dir / "reports.jsonl") == (0o600, account.uid, account.gid), who
                assert _mode(job_dir / "control.json") == (0o640, 0, account.gid), who
                assert _mode(ckpt) == (0o700, account.uid, account.gid), who
            assert "isolation=accounts" in service_log(state)
        finally:
            stop_service(proc)


def test_without_root_the_service_warns_and_serves_one_user_unless_allowed() -> None:
    require_root()  # to become an unprivileged account for the service itself
    nobody = pwd.getpwnam("nobody")
    os_account("nobody")  # skips when nobody cannot reach this checkout
    with passable_tmp() as base:
        state, home = base / "state", base / "home"
        for folder in (state, home):
            folder.mkdir()
            os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        env = {**NO_SUITE_ISOLATION, "HOME": str(home)}
        as_nobody = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        proc = start_service(state, "--executor", "dry-run", "--round-s", "1", env=env, user=nobody.pw_uid)
        try:
            info = wait_for_server(state, proc)
            assert httpx.get(info["url"] + "/healthz", timeout=5).json()["isolation"] == "none"
            warning = [line for line in service_log(state).splitlines() if "event=isolation" in line]
            assert len(warning) == 1 and "level=warning" in warning[0].lower() and "no isolation" in warning[0]
            second = subprocess.run([sys.executable, "-m", "dlsched", "serve", "user", "add", "bob", "--state",
                                     str(state)], capture_output=True, text=True, timeout=120, env=env, **as_nobody)
            assert second.returncode != 0 and second.stderr.startswith("error: ") \
                and "--allow-shared-account" in second.stderr and second.stderr.count("\n") == 1, second.stderr
        finally:
            stop_service(proc)
        # a state with two users (added while allowed) is refused at start without the flag, served with it
        add = subprocess.run([sys.executable, "-m", "dlsched", "serve", "user", "add", "bob", "--state", str(state)],
                             capture_output=True, text=True, timeout=120,
                             env={**env, "DLSCHED_ALLOW_SHARED_ACCOUNT": "1"}, **as_nobody)
        assert add.returncode != 0, "the stored configuration does not allow a shared account"
        proc = start_service(state, "--executor", "dry-run", "--round-s", "1", "--allow-shared-account",
                             "--reconfigure", env=env, user=nobody.pw_uid)
        try:
            wait_for_server(state, proc)
            add = subprocess.run([sys.executable, "-m", "dlsched", "serve", "user", "add", "bob", "--state",
                                  str(state)], capture_output=True, text=True, timeout=120, env=env, **as_nobody)
            assert add.returncode == 0, add.stderr
        finally:
            stop_service(proc)
        refused = start_service(state, "--executor", "dry-run", "--round-s", "1", "--no-allow-shared-account",
                                "--reconfigure", env=env, user=nobody.pw_uid)
        assert refused.wait(timeout=120) != 0
        said = [line for line in service_log(state).splitlines() if line.startswith("error: ")]
        assert said and "2 users" in said[-1] and "--allow-shared-account" in said[-1], said


def test_a_fresh_state_under_a_passable_folder_starts_with_isolation() -> None:
    require_root()
    job_user = os_account("dlsched-t-jobs")
    with passable_tmp() as base:
        state = base / "fresh"  # made by the service itself, under its umask 077
        proc = start_service(state, "--executor", "dry-run", "--isolation", "accounts", "--job-user",
                             job_user.name, env=NO_SUITE_ISOLATION)
        try:
            info = wait_for_server(state, proc)
            assert httpx.get(info["url"] + "/healthz", timeout=5).json()["isolation"] == "accounts"
            assert _mode(state)[0] == 0o711 and _mode(state / "checkpoints")[0] == 0o711
        finally:
            stop_service(proc)
