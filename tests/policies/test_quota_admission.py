"""The ``quota`` admission stage: nominal quotas, borrowing from the cohort, held jobs, capped elastic jobs;
and, through the run function the CLI uses, that no round ever lets a team past its quota."""

from __future__ import annotations

import csv
import tempfile
from collections import defaultdict
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.core import Adaptivity, ClusterView, JobSpec, JobStatus, JobView, Placement, QuotaEntry, Quotas
from dlsched.policies import build_scheduler
from dlsched.policies.quota import QuotaAdmission
from dlsched.sim.config import RunConfig
from dlsched.sim.run import simulate
from testkit import small_cluster

CLUSTER = small_cluster((("v100", 4, 8),))  # 32 GPUs, ids in node order
_next_gpu = iter(range(10**6))


def job(job_id: str, user: str, gpus: int, *, submit: float = 0.0, running: bool = False,
        min_gpus: int | None = None, max_gpus: int | None = None, counts: tuple[int, ...] = ()) -> JobView:
    """A job of ``user``; elastic when ``min_gpus`` is given; running jobs hold ``gpus`` GPUs."""
    elastic = min_gpus is not None
    spec = JobSpec(job_id=job_id, submit_time_s=submit, model="cifar10" if elastic else "philly", num_gpus=gpus,
                   min_gpus=min_gpus or 1, max_gpus=max_gpus, user=user, gpu_counts=counts,
                   adaptivity=Adaptivity.ADAPTIVE if elastic else Adaptivity.RIGID,
                   duration_s=None if elastic else 600.0)
    placement = Placement.of([next(_next_gpu) % CLUSTER.num_gpus for _ in range(gpus)]) if running \
        else Placement.empty()
    return JobView(spec=spec, status=JobStatus.RUNNING if running else JobStatus.QUEUED, placement=placement,
                   batch_size=None, age_s=60.0, wait_s=0.0, attained_gpu_s=0.0, attained_service_s=0.0,
                   restarts=0, progress_fraction=0.0, start_time_s=0.0 if running else None)


def view(jobs: list[JobView], quotas: Quotas | None) -> ClusterView:
    return ClusterView(time_s=600.0, round_s=60.0, cluster=CLUSTER, jobs=jobs, quotas=quotas)


def quotas(teams: dict[str, tuple[int, int | None]], users: dict[str, tuple[int, int | None, str | None]],
           default: QuotaEntry | None = None) -> Quotas:
    return Quotas(users={u: QuotaEntry(g, b) for u, (g, b, _) in users.items()},
                  teams={t: QuotaEntry(g, b) for t, (g, b) in teams.items()},
                  team_of={u: t for u, (_, _, t) in users.items() if t is not None}, default_user=default)


def admitted(stage: QuotaAdmission, v: ClusterView) -> list[str]:
    return [j.job_id for j in stage.admit(v)]


# -- nominal quotas ---------------------------------------------------------------------------------------
def test_a_team_is_held_at_its_nominal_quota_and_running_jobs_stay_admitted():
    q = quotas({"vision": (8, 0), "nlp": (8, 0)}, {"alice": (8, None, "vision")})
    stage = QuotaAdmission()
    jobs = [job("a1", "alice", 4, running=True), job("a2", "alice", 4, submit=10), job("a3", "alice", 2, submit=20)]
    assert admitted(stage, view(jobs, q)) == ["a1", "a2"]
    assert stage.reasons["a1"] == "admitted: running on 4 GPUs"
    assert stage.reasons["a3"].startswith("held: ") and "8/8 GPUs" in stage.reasons["a3"]


def test_a_user_is_held_at_its_own_quota_while_its_team_has_room():
    q = quotas({"vision": (16, 0)}, {"alice": (4, None, "vision"), "bob": (4, 0, "vision")})
    stage = QuotaAdmission()
    jobs = [job("b1", "bob", 4), job("b2", "bob", 1, submit=1), job("a1", "alice", 4, submit=2)]
    assert admitted(stage, view(jobs, q)) == ["b1", "a1"]
    assert stage.reasons["b2"] == "held: user bob at 4/4 GPUs, borrowing limit 0 reached (needs 1)"


def test_unlisted_users_get_the_default_quota_each_and_without_one_are_not_limited():
    q = quotas({}, {}, default=QuotaEntry(2, None))
    stage = QuotaAdmission()
    jobs = [job("x1", "carol", 2), job("x2", "carol", 1, submit=1), job("y1", "dave", 2, submit=2)]
    assert admitted(stage, view(jobs, q)) == ["x1", "y1"]
    assert stage.reasons["x2"] == "held: user carol at 2/2 GPUs, no team to borrow from (needs 1)"
    assert admitted(QuotaAdmission(), view(jobs, quotas({}, {}))) == ["x1", "x2", "y1"]


def test_without_quotas_everyone_is_admitted_unchanged():
    stage = QuotaAdmission()
    jobs = [job("a", "alice", 30), job("b", "bob", 1, min_gpus=1)]
    out = stage.admit(view(jobs, None))
    assert out == jobs and out[1].spec is jobs[1].spec
    assert set(stage.reasons.values()) == {"admitted: no quotas"}


# -- borrowing --------------------------------------------------------------------------------------------
def test_a_team_borrows_unused_cohort_gpus_up_to_its_borrowing_limit():
    q = quotas({"vision": (8, 4), "nlp": (8, None)}, {"alice": (32, None, "vision"), "bob": (32, None, "nlp")})
    stage = QuotaAdmission()
    jobs = [job("a1", "alice", 8, running=True), job("b1", "bob", 2, running=True),
            job("a2", "alice", 4, submit=1), job("a3", "alice", 1, submit=2)]
    assert admitted(stage, view(jobs, q)) == ["a1", "b1", "a2"]  # 4 of nlp's 6 unused: the limit
    assert stage.reasons["a3"] == "held: team vision at 12/8 GPUs, borrowing limit 4 reached (needs 1)"


def test_borrowing_takes_only_what_the_cohort_left_unused_and_later_jobs_that_fit_go_first():
    q = quotas({"vision": (8, 8), "nlp": (8, None)}, {"alice": (32, None, "vision"), "bob": (32, None, "nlp")})
    stage = QuotaAdmission()
    jobs = [job("a1", "alice", 8, running=True), job("b1", "bob", 6, running=True),
            job("a2", "alice", 4, submit=1), job("a3", "alice", 2, submit=2)]
    assert admitted(stage, view(jobs, q)) == ["a1", "b1", "a3"]
    assert stage.reasons["a2"] == "held: team vision at 8/8 GPUs, cohort has 2 to lend (needs 4)"


def test_a_team_within_its_nominal_quota_is_admitted_even_when_others_borrowed_its_gpus():
    q = quotas({"vision": (8, None), "nlp": (8, None)}, {"alice": (32, None, "vision"), "bob": (32, None, "nlp")})
    stage = QuotaAdmission()
    jobs = [job("a1", "alice", 16, running=True), job("b1", "bob", 4, submit=1), job("a2", "alice", 1, submit=2)]
    assert admitted(stage, view(jobs, q)) == ["a1", "b1"]  # nlp's guarantee; vision may borrow no more
    assert "cohort has 0 to lend" in stage.reasons["a2"]


def test_a_user_borrows_only_what_its_teams_other_users_leave_unused():
    q = quotas({"vision": (32, None)}, {"alice": (4, 4, "vision"), "bob": (4, None, "vision")})
    stage = QuotaAdmission()
    jobs = [job("b1", "bob", 1, running=True), job("a1", "alice", 6, submit=1), job("a2", "alice", 2, submit=2)]
    assert admitted(stage, view(jobs, q)) == ["b1", "a1"]  # bob leaves 3 unused, alice borrows 2 of them
    assert stage.reasons["a2"] == "held: user alice at 6/4 GPUs, team vision has 1 to lend (needs 2)"


# -- held jobs come back ----------------------------------------------------------------------------------
def test_a_held_job_is_asked_again_every_round_and_admitted_once_its_team_has_room():
    q = quotas({"vision": (4, 0)}, {})
    q = Quotas(teams=q.teams, users={"alice": QuotaEntry(8)}, team_of={"alice": "vision"})
    sched = build_scheduler("fifo", admission="quota")
    first, second = job("a1", "alice", 4, running=True), job("a2", "alice", 4, submit=5)
    for _ in range(3):
        decision = sched.schedule(view([first, second], q))
        assert set(decision.allocations) == {"a1"}
        assert sched.admission.reasons["a2"].startswith("held:")  # type: ignore[attr-defined]
    decision = sched.schedule(view([second], q))  # a1 finished
    assert set(decision.allocations) == {"a2"}
    assert sched.admission.reasons["a2"] == "admitted: needs 4 GPUs, within quota"  # type: ignore[attr-defined]


# -- elastic jobs are capped ------------------------------------------------------------------------------
def test_an_admitted_elastic_job_is_capped_at_what_its_quotas_leave():
    q = quotas({"vision": (8, 0)}, {"alice": (8, None, "vision")})
    stage = QuotaAdmission()
    jobs = [job("r", "alice", 2, running=True), job("e", "alice", 4, min_gpus=1, submit=1),
            job("f", "alice", 2, min_gpus=2, submit=2)]
    out = {j.job_id: j for j in stage.admit(view(jobs, q))}
    # e counted 1 and f 2 at admission; the 3 left go to e, the first in order
    assert out["e"].spec.max_gpus == 4 and out["e"].spec.upper_gpus == 4 and out["e"].spec.num_gpus == 4
    assert out["f"].spec.upper_gpus == 2 and out["f"].spec.lower_gpus == 2
    assert "capped at 4 GPUs" in stage.reasons["e"] and "capped at 2 GPUs" in stage.reasons["f"]
    assert jobs[1].spec.max_gpus is None  # the view's own job is left alone


def test_a_cap_keeps_the_lower_bound_and_only_counts_the_job_accepts():
    q = quotas({"vision": (6, 0)}, {"alice": (8, None, "vision")})
    stage = QuotaAdmission()
    jobs = [job("g", "alice", 4, min_gpus=2, counts=(2, 4, 8), submit=0),
            job("r", "alice", 4, min_gpus=4, max_gpus=16, running=True)]
    out = {j.job_id: j for j in stage.admit(view(jobs, q))}
    assert out["r"].spec.upper_gpus == 4  # running on 4, nothing left beyond it: kept where it is
    assert out["g"].spec.gpu_counts == (2,) and out["g"].spec.num_gpus == 2 and out["g"].spec.upper_gpus == 2


def test_under_a_rigid_allocation_jobs_count_at_their_request_and_are_not_capped():
    q = quotas({"vision": (4, 0)}, {"alice": (8, None, "vision")})
    sched = build_scheduler("fifo", admission="quota")  # rigid gangs: an elastic job runs on its request
    jobs = [job("e", "alice", 3, min_gpus=1), job("f", "alice", 2, min_gpus=1, submit=1)]
    out = sched.admission.admit(view(jobs, q))
    assert [j.job_id for j in out] == ["e"] and out[0].spec is jobs[0].spec


# -- whole runs -------------------------------------------------------------------------------------------
@st.composite
def quota_runs(draw):
    teams = {f"t{i}": (draw(st.integers(1, 8)), draw(st.one_of(st.none(), st.integers(0, 6))))
             for i in range(draw(st.integers(1, 3)))}
    users = {}
    for i in range(draw(st.integers(1, 4))):
        users[f"u{i}"] = (draw(st.integers(1, 8)), draw(st.one_of(st.none(), st.integers(0, 4))),
                          draw(st.sampled_from([*teams, None])))
    default = draw(st.one_of(st.none(), st.builds(QuotaEntry, st.integers(1, 4))))
    rows = []
    for i in range(draw(st.integers(1, 12))):
        user = draw(st.sampled_from([*users, "stranger"]))
        submit = draw(st.floats(0, 1800, allow_nan=False))
        gpus = draw(st.integers(1, 6))
        if draw(st.booleans()):
            rows.append({"job_id": f"j{i}", "submit_time_s": submit, "model": "philly", "num_gpus": gpus,
                         "user": user, "duration_s": draw(st.floats(60, 3000))})
        else:
            rows.append({"job_id": f"j{i}", "submit_time_s": submit, "model": "cifar10", "num_gpus": gpus,
                         "user": user, "adaptivity": "adaptive", "min_gpus": 1, "batch_size": 128})
    policy = draw(st.sampled_from(["fifo", "las", "pollux", "sia"]))
    return quotas(teams, users, default), rows, policy


def _write_run(folder: Path, q: Quotas, rows: list[dict]) -> tuple[Path, Path, Path]:
    cluster = folder / "cluster.yaml"
    cluster.write_text("name: quota-test\nnodes:\n  - {gpu_type: v100, count: 2, gpus_per_node: 4}\n")
    spec: dict = {"teams": {t: {"gpus": e.gpus, "borrowing_limit": e.borrowing_limit} for t, e in q.teams.items()},
                  "users": {u: {"gpus": e.gpus, "borrowing_limit": e.borrowing_limit,
                                **({"team": q.team_of[u]} if u in q.team_of else {})} for u, e in q.users.items()}}
    if q.default_user is not None:
        spec["default_user"] = {"gpus": q.default_user.gpus}
    qfile = folder / "quotas.yaml"
    qfile.write_text(yaml.safe_dump(spec))
    trace = folder / "trace.csv"
    columns = ["job_id", "submit_time_s", "model", "num_gpus", "user", "duration_s", "adaptivity", "min_gpus",
               "batch_size"]
    with trace.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return cluster, qfile, trace


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=quota_runs())
def test_no_round_lets_a_team_or_user_past_its_quota_and_every_job_is_accounted_for(run):
    q, rows, policy = run
    with tempfile.TemporaryDirectory() as tmp:
        cluster, qfile, trace = _write_run(Path(tmp), q, rows)
        config = RunConfig(cluster=str(cluster), trace=str(trace), policy=policy, admission="quota",
                           quotas=str(qfile), max_time_s=4 * 3600.0, stall_rounds=20,
                           settings={"population": "10", "generations": "3"} if policy == "pollux" else {})
        rounds = []

        def observe(v: ClusterView, decision) -> None:
            assert v.quotas == q
            team_gpus: dict[str, int] = defaultdict(int)
            user_gpus: dict[str, int] = defaultdict(int)
            for job_id, alloc in decision.allocations.items():
                user = v.job(job_id).spec.user
                user_gpus[user] += alloc.placement.num_gpus
                if q.team(user) is not None:
                    team_gpus[q.team(user)] += alloc.placement.num_gpus
            for team, used in team_gpus.items():
                assert used <= q.teams[team].ceiling, (team, used)
            for user, used in user_gpus.items():
                entry = q.user_entry(user)
                if entry is not None:
                    assert used <= (entry.ceiling if q.team(user) is not None else entry.gpus), (user, used)
            rounds.append(v.time_s)

        records = simulate(config, on_decision=observe)
    assert rounds
    assert sorted(r.job_id for r in records.jobs) == sorted(row["job_id"] for row in rows)
    assert records.config.quotas == str(qfile.resolve())


def test_dlsched_simulate_with_quota_admission_and_a_quota_file(tmp_path):
    qfile = tmp_path / "quotas.yaml"
    qfile.write_text("teams:\n  research: {gpus: 16, borrowing_limit: 8}\n  prod: {gpus: 16}\n"
                     "users:\n  default: {gpus: 24, team: research}\n")
    res = CliRunner().invoke(app, ["simulate", "--admission", "quota", "--quotas", str(qfile), "--jobs", "20",
                                   "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert '"completed": 20' in res.stdout


def test_dlsched_simulate_refuses_a_bad_quota_file_or_one_no_stage_enforces(tmp_path):
    qfile = tmp_path / "quotas.yaml"
    qfile.write_text("users:\n  alice: {gpus: 4, team: vision}\n")
    res = CliRunner().invoke(app, ["simulate", "--admission", "quota", "--quotas", str(qfile), "--jobs", "2"])
    assert res.exit_code == 2
    assert res.stderr.strip() == (f"error: {qfile} field 'users.alice.team': user 'alice' names team 'vision', "
                                  f"which is not declared under 'teams' (known: none declared)")
    qfile.write_text("teams: {vision: {gpus: 4}}\n")
    res = CliRunner().invoke(app, ["simulate", "--quotas", str(qfile), "--jobs", "2"])
    assert res.exit_code == 2 and res.stderr.startswith("error: field 'quotas': admission 'all' ignores quotas")


def test_a_team_member_without_a_quota_of_their_own_is_limited_by_the_team_only():
    # the service knows every user's team; only some users have a quota of their own
    q = Quotas(users={"alice": QuotaEntry(2, 0)}, teams={"vision": QuotaEntry(4, 0)},
               team_of={"alice": "vision", "bob": "vision"})
    jobs = [job("a1", "alice", 2), job("a2", "alice", 2, submit=1), job("b1", "bob", 2, submit=2),
            job("b2", "bob", 2, submit=3)]
    assert admitted(QuotaAdmission(), view(jobs, q)) == ["a1", "b1"]
