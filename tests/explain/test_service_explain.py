"""Explanations from a live ``dlsched serve --executor dry-run`` (ray-local-4: 8 GPUs; five 2-GPU jobs, so
the fifth waits behind the gang cut): each round's changes of records reach the database in the round's
transaction, a record standing for the rounds its decision held, ``GET /v1/jobs/{id}/explain`` returns them (a job's own user only), and ``dlsched
explain JOB`` prints them as paragraphs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from servicekit import client, start_service, stop_service, wait_for_server

from dlsched.explain import explain_paragraphs
from dlsched.service.store import Store

pytestmark = pytest.mark.timeout(180)


def test_a_waiting_job_is_explained_by_the_service(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = start_service(state, "--executor", "dry-run", "--round-s", "1")
    try:
        info = wait_for_server(state, proc)
        store = Store.open(state)
        bob = store.add_user("bob")
        store.close()
        (tmp_path / "code").mkdir()
        spec = tmp_path / "job.yaml"
        spec.write_text(f"name: gang\ncommand: python train.py\nworking_dir: {tmp_path / 'code'}\ngpus: 2\n")
        ids = [client(info, "submit", str(spec)).stdout.strip() for _ in range(5)]
        auth = {"Authorization": f"Bearer {info['token']}"}
        url = f"{info['url']}/v1/jobs/{ids[4]}/explain"
        deadline = time.monotonic() + 60
        records: list[dict] = []
        while time.monotonic() < deadline:
            records = httpx.get(url, headers=auth, timeout=10).json()
            if any(r["stage"] == "allocation" and r["last_round"] >= r["round"] + 2 for r in records):
                break  # a decision that held for three rounds
            time.sleep(0.5)
        assert records, "no explanations after 60 s of rounds"
        assert all(set(r) >= {"round", "time_s", "job", "stage", "decided", "summary", "facts"} for r in records)
        assert {r["job"] for r in records} == {ids[4]}
        rounds = [r["round"] for r in records]
        assert rounds == sorted(rounds)  # newest rounds last
        cut = [r for r in records if r["stage"] == "allocation"]
        assert cut[-1]["decided"] == "none"
        assert "behind the gang cut: the jobs ahead take 8 of 8 GPUs" in cut[-1]["summary"]
        # stored as changes: a record per stage and change of decision, not per round
        assert all(len([r for r in records if r["stage"] == stage]) <= 2 for stage in {r["stage"] for r in records})
        last = max(r["last_round"] for r in records)
        # one round only: the records that stand for it
        one = httpx.get(url, params={"round": last}, headers=auth, timeout=10).json()
        assert one and all(r["round"] <= last <= r["last_round"] for r in one)
        assert {r["stage"] for r in one} >= {"ordering", "allocation"}
        # the same auth rules as the other job routes: not bob's job, no token
        assert httpx.get(url, headers={"Authorization": f"Bearer {bob}"}, timeout=10).status_code == 404
        assert httpx.get(url, timeout=10).status_code == 401
        # the client command
        text = client(info, "explain", ids[4]).stdout
        assert text.startswith(f"{ids[4]}:\n") and "allocation: round" in text and "behind the gang cut" in text
        lines = client(info, "explain", ids[4], "--round", str(last), "--format", "json").stdout
        got = [json.loads(x) for x in lines.splitlines()]
        assert got and all(r["round"] <= last <= r["last_round"] for r in got)
        assert explain_paragraphs(got)
        running = httpx.get(f"{info['url']}/v1/jobs/{ids[0]}/explain", headers=auth, timeout=10).json()
        assert any(r["stage"] == "placement" and r["decided"] == "placed" for r in running)
    finally:
        stop_service(proc)
