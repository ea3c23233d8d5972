"""The recorder on hand-made rounds of FIFO on one 4-GPU node: a record per change of decision, unchanged
rounds folded into ``last_round``, records closed when a job leaves, and every round in full without
collapsing (the service's mode)."""

from __future__ import annotations

from dlsched.core import ClusterView, JobStatus, JobView, Placement
from dlsched.explain import explain_paragraphs
from dlsched.policies import build_scheduler
from testkit import duration_job, small_cluster

CLUSTER = small_cluster((("v100", 1, 4),))
BIG, SMALL = duration_job("big", 0.0, 4, 600.0), duration_job("small", 1.0, 2, 600.0)


def jv(spec, t: float, placement: tuple[int, ...] = ()) -> JobView:
    running = bool(placement)
    return JobView(spec=spec, status=JobStatus.RUNNING if running else JobStatus.QUEUED,
                   placement=Placement.of(placement), batch_size=None, age_s=t - spec.submit_time_s,
                   wait_s=0.0 if running else t - spec.submit_time_s, attained_gpu_s=0.0, attained_service_s=0.0,
                   restarts=0, progress_fraction=0.0, start_time_s=0.0 if running else None)


VIEWS = [[jv(BIG, 60.0), jv(SMALL, 60.0)],                 # round 0: big placed, small behind the cut
         [jv(BIG, 120.0, (0, 1, 2, 3)), jv(SMALL, 120.0)],  # round 1: big kept, small still waits
         [jv(BIG, 180.0, (0, 1, 2, 3)), jv(SMALL, 180.0)],  # round 2: the same
         [jv(SMALL, 240.0)]]                                # round 3: big finished, small placed


def schedule(sched, jobs: list[JobView]) -> None:
    sched.schedule(ClusterView(time_s=jobs[0].age_s + jobs[0].spec.submit_time_s, round_s=60.0,
                               cluster=CLUSTER, jobs=jobs))


def rounds(collapse: bool) -> list[dict]:
    sched = build_scheduler("fifo")
    sched.explain_collapse = collapse
    for jobs in VIEWS:
        schedule(sched, jobs)
    return sched.take_explanations()


def test_changes_taken_every_round_make_the_same_records_as_one_take_at_the_end() -> None:
    """The service's way (changes each round, in its own round numbers) stores what the simulator's
    way (one take at the end) writes, once open records are closed at the last round."""
    sched = build_scheduler("fifo")
    rows: list[dict] = []
    ranks = []
    for n, jobs in enumerate(VIEWS):
        schedule(sched, jobs)
        got = sched.take_explanation_changes(100 + n)
        for job, stage, last in got.closed:  # what the store does with a closing
            (row,) = [r for r in rows if r["job"] == job and r["stage"] == stage and "last_round" not in r]
            row["last_round"] = last
        rows.extend(dict(r) for r in got.opened)
        ranks.append(got.ranks)
    for r in rows:
        r.setdefault("last_round", 103)
    assert ranks[0] == {"big": 1, "small": 2} and ranks[3] == {"small": 1}
    expected = [{**r, "round": r["round"] + 100, "last_round": r["last_round"] + 100} for r in rounds(True)]
    key = lambda r: (r["job"], r["stage"], r["round"])  # noqa: E731
    assert sorted(rows, key=key) == sorted(expected, key=key)


def test_unchanged_decisions_fold_into_one_record() -> None:
    recs = rounds(collapse=True)
    small = {(r["stage"], r["round"], r["last_round"], r["decided"]) for r in recs if r["job"] == "small"}
    assert ("allocation", 0, 2, "none") in small
    assert ("allocation", 3, 3, "2 x any") in small
    assert ("placement", 3, 3, "placed") in small
    assert ("ordering", 0, 2, "rank 2") in small and ("ordering", 3, 3, "rank 1") in small
    big = {(r["stage"], r["round"], r["last_round"], r["decided"]) for r in recs if r["job"] == "big"}
    assert ("placement", 0, 0, "placed") in big
    assert ("placement", 1, 2, "kept") in big  # closed when the job left, not stretched to the last round
    assert ("admission", 0, 2, "admitted") in big
    cut = next(r for r in recs if r["job"] == "small" and r["stage"] == "allocation" and r["round"] == 0)
    assert cut["summary"].endswith("behind the gang cut: the jobs ahead take 4 of 4 GPUs and small needs more "
                                   "than the 0 left")
    text = explain_paragraphs([r for r in recs if r["job"] == "small"])
    assert text[2].startswith("allocation: rounds 0-2: 'gang' allocated no GPUs (asks 2): behind the gang cut")
    assert text[3] == "placement: round 3: placed 2 x v100 on node v100-0"


def test_without_collapsing_every_round_is_recorded() -> None:
    recs = rounds(collapse=False)
    assert "last_round" not in recs[0]
    small = [(r["round"], r["decided"]) for r in recs if r["job"] == "small" and r["stage"] == "allocation"]
    assert small == [(0, "none"), (1, "none"), (2, "none"), (3, "2 x any")]
    assert sum(1 for r in recs if r["job"] == "big" and r["stage"] == "placement") == 3


def test_explanations_off_keeps_nothing() -> None:
    sched = build_scheduler("fifo")
    sched.explain = False
    sched.schedule(ClusterView(time_s=60.0, round_s=60.0, cluster=CLUSTER, jobs=[jv(BIG, 60.0)]))
    assert sched.take_explanations() == []
