"""``dlsched.Client`` against a live API server: typed answers, one error type, the CLI's discovery."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from apikit import live_api

import dlsched
from dlsched.client import Job, JobDetail, ServiceError, WaitTimeout
from dlsched.service.store import Store

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], Store, Path]]:
    store = Store.open(tmp_path / "state")
    tokens = {"alice": store.add_user("alice", team="vision"), "bob": store.add_user("bob"),
              "root": store.add_user("root", admin=True)}
    jobs_dir = tmp_path / "state" / "jobs"
    nodes = {"name": "local", "policy": "fifo", "round": 3,
             "nodes": [{"name": "n0", "gpu_type": "a100", "gpus": 2}, {"name": "n1", "gpu_type": "v100", "gpus": 1}]}
    with live_api(store, jobs_dir, cluster_info=lambda: nodes) as server:
        yield server.url, tokens, store, jobs_dir
    store.close()


def spec(tmp_path: Path, **extra: object) -> dict[str, object]:
    return {"name": "demo", "command": "python train.py", "working_dir": str(tmp_path), "gpus": 1, **extra}


def test_submit_list_show_cancel_logs_explain_wait(live, tmp_path: Path) -> None:
    url, tokens, store, jobs_dir = live
    client = dlsched.Client(url, tokens["alice"])
    job = client.submit(spec(tmp_path, gpu_types=["a100"]))
    assert isinstance(job, Job) and job.id == "job-1" and job.status == "queued" and not job.ended
    assert job.spec.gpu_types == ["a100"] and job.spec.adaptivity == "rigid" and job.user == "alice"
    assert job.raw["id"] == "job-1"  # the answer as the service sent it

    (tmp_path / "code").mkdir()
    path = tmp_path / "job.yaml"
    path.write_text("name: from-file\ncommand: 'true'\nworking_dir: code\ngpus: [1, 2]\n"
                    "adaptivity: per-gpu-batch\nbatch_size: 32\n")
    second = client.submit(path)
    assert second.id == "job-2" and second.spec.working_dir == str((tmp_path / "code").resolve())
    assert second.spec.gpus == [1, 2]

    assert [j.id for j in client.jobs()] == ["job-1", "job-2"]
    assert dlsched.Client(url, tokens["bob"]).jobs() == []
    cancelled = client.cancel("job-1")
    assert cancelled.status == "cancelled" and cancelled.ended
    assert [j.id for j in client.jobs()] == ["job-2"]
    assert [j.id for j in client.jobs(all=True)] == ["job-1", "job-2"]

    shown = client.show("job-1")
    assert isinstance(shown, JobDetail) and shown.steps_done == 0 and shown.restarts == 0
    assert [e.kind for e in shown.events] == ["submitted", "cancelled"]
    assert shown.submitted.tzinfo is not None

    logs = jobs_dir / "job-2" / "logs"
    logs.mkdir(parents=True)
    (logs / "rank0.log").write_text("one\ntwo\nthree\n")
    (logs / "rank1.log").write_text("r1\n")
    assert client.logs("job-2") == "==> rank0 <==\none\ntwo\nthree\n==> rank1 <==\nr1\n"
    assert client.logs("job-2", tail=1, rank=0) == "==> rank0 <==\nthree\n"
    assert client.explain("job-2") == []

    assert client.wait("job-1", timeout_s=5).status == "cancelled"
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as timed_out:
        client.wait("job-2", timeout_s=0.5, poll_s=0.1)
    assert timed_out.value.status is None and "still queued" in str(timed_out.value)
    assert time.monotonic() - started < 5

    def finish() -> None:
        time.sleep(0.5)
        store.update_job("job-2", status="succeeded", finished_s=time.time())

    threading.Thread(target=finish).start()
    assert client.wait("job-2", timeout_s=30, poll_s=0.1).status == "succeeded"


def test_a_submission_with_the_same_key_is_stored_once(live, tmp_path: Path) -> None:
    url, tokens, store, _ = live
    client = dlsched.Client(url, tokens["alice"])
    first = client.submit(spec(tmp_path), idempotency_key="run-42")
    again = client.submit(spec(tmp_path), idempotency_key="run-42")
    assert first.id == again.id and store.count_jobs() == 1
    assert client.submit(spec(tmp_path)).id != first.id  # a fresh key per call otherwise


def test_whoami_and_the_cluster_with_who_holds_each_gpu(live, tmp_path: Path) -> None:
    url, tokens, store, _ = live
    alice, bob = dlsched.Client(url, tokens["alice"]), dlsched.Client(url, tokens["bob"])
    me = alice.whoami()
    assert (me.name, me.team, me.admin) == ("alice", "vision", False)
    assert dlsched.Client(url, tokens["root"]).whoami().admin
    job = alice.submit(spec(tmp_path, gpus=2))
    store.update_job(job.id, status="running", placement={"n0": [0, 1]}, gpus=2, gpu_type="a100")
    seen = alice.cluster()
    assert (seen.name, seen.policy, seen.round) == ("local", "fifo", 3)
    assert [(n.name, n.gpu_type, n.gpus, n.holders) for n in seen.nodes] == [
        ("n0", "a100", 2, [[job.id], [job.id]]), ("n1", "v100", 1, [[]])]
    assert bob.cluster().nodes[0].holders == [["other"], ["other"]]  # another user's job is not named
    assert dlsched.Client(url, tokens["root"]).cluster().nodes[0].holders == [[job.id], [job.id]]


def test_every_failure_is_one_service_error_with_status_and_message(live, tmp_path: Path) -> None:
    url, tokens, store, _ = live
    with pytest.raises(ServiceError) as refused:
        dlsched.Client(url, "not-a-token").jobs()
    assert refused.value.status == 401 and "401" in str(refused.value) and refused.value.field == "token"
    client = dlsched.Client(url, tokens["alice"])
    with pytest.raises(ServiceError) as missing:
        client.show("job-9")
    assert missing.value.status == 404 and missing.value.detail == "no job 'job-9'"
    job = client.submit(spec(tmp_path))
    with pytest.raises(ServiceError) as hidden:  # alice's job is not bob's to see
        dlsched.Client(url, tokens["bob"]).cancel(job.id)
    assert hidden.value.status == 404
    with pytest.raises(ServiceError) as bad:  # checked here, before anything is sent
        client.submit(spec(tmp_path, gpus=0))
    assert bad.value.status is None and "field 'gpus'" in str(bad.value)
    with pytest.raises(ServiceError) as gone:  # the service refuses a working_dir it has not got
        client.request("POST", "/v1/jobs", json=spec(tmp_path / "nowhere"))
    assert gone.value.status == 422 and "working_dir" in gone.value.detail
    assert store.count_jobs() == 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(ServiceError) as unreachable:
        dlsched.Client(dead, tokens["alice"]).jobs()
    assert unreachable.value.status is None and "cannot reach the service" in str(unreachable.value)
    assert isinstance(unreachable.value, dlsched.InputError)  # what the CLI prints as its error: line


def test_server_and_token_come_from_the_environment_as_for_the_cli(live, monkeypatch, tmp_path: Path) -> None:
    url, tokens, _, _ = live
    monkeypatch.setenv("DLSCHED_SERVER", url.removeprefix("http://"))  # http:// is assumed, as by the CLI
    monkeypatch.setenv("DLSCHED_TOKEN", tokens["bob"])
    assert dlsched.Client().whoami().name == "bob"
    assert dlsched.Client(token=tokens["alice"]).whoami().name == "alice"  # an argument wins
    monkeypatch.delenv("DLSCHED_TOKEN")
    with pytest.raises(ServiceError, match="DLSCHED_TOKEN"):
        dlsched.Client()
    monkeypatch.delenv("DLSCHED_SERVER")
    with pytest.raises(ServiceError, match="DLSCHED_SERVER"):
        dlsched.Client(token="x")
    monkeypatch.setenv("DLSCHED_SUBMIT_RETRY_S", "soon")
    with pytest.raises(ServiceError, match="DLSCHED_SUBMIT_RETRY_S"):
        dlsched.Client(url, tokens["alice"]).submit(spec(tmp_path))


def test_the_typed_answers_mirror_the_api_s_models() -> None:
    """A field the API adds or renames fails here, so the client is kept in step."""
    from dlsched.client import Event, WhoAmI
    from dlsched.service import api

    for mine, theirs in ((Job, api.JobOut), (JobDetail, api.JobDetail), (Event, api.EventOut),
                         (WhoAmI, api.WhoAmI)):
        assert set(mine.model_fields) == set(theirs.model_fields), mine.__name__
        for name, field in theirs.model_fields.items():
            want = str(field.annotation).replace("dlsched.service.api.EventOut", "dlsched.client.Event")
            assert str(mine.model_fields[name].annotation) == want, (mine.__name__, name)
