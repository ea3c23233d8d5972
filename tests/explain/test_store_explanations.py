"""The store keeps explanations as changes in the round's transaction: a record opens when a decision
changes and stands for every round committed until it closes; a restart closes what was open; retention
deletes what closed long ago and never a job's current record."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from dlsched.service.explanation_store import ExplanationChanges
from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store


def rec(job: str, round_no: int, stage: str, decided: str) -> dict:
    return {"round": round_no, "time_s": 10.0 * round_no, "job": job, "stage": stage, "decided": decided,
            "summary": f"{stage} {decided}", "facts": {"n": round_no}}


def opened(*records: dict) -> ExplanationChanges:
    return ExplanationChanges(opened=[(r["stage"], r) for r in records])


def spans(store: Store, job: str, round_no: int | None = None) -> list[tuple[str, str, int, int]]:
    return [(r["stage"], r["decided"], r["round"], r["last_round"]) for r in store.explanations(job, round_no)]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.open(tmp_path / "state")
    s.add_user("alice")
    for name in ("a", "b"):
        s.add_job("alice", JobSubmission(name=name, command="true", working_dir=str(tmp_path), gpus=2), 1.0)
    return s


def test_an_open_record_stands_for_every_round_committed_until_it_closes(store: Store) -> None:
    a, b = "job-1", "job-2"
    store.commit_round(0, 10.0, {}, 0.0, {}, {}, [], opened(rec(a, 0, "ordering", "rank 1"),
                                                            rec(b, 0, "ordering", "rank 2"),
                                                            rec(a, 0, "allocation", "2 x any")))
    assert spans(store, a) == [("ordering", "rank 1", 0, 0), ("allocation", "2 x any", 0, 0)]
    store.commit_round(1, 20.0, {}, 0.0, {}, {}, [], ExplanationChanges())
    store.commit_round(2, 30.0, {}, 0.0, {}, {}, [], ExplanationChanges())
    assert spans(store, a) == [("ordering", "rank 1", 0, 2), ("allocation", "2 x any", 0, 2)]
    # round 3: b moves up (its rank 2 closes at round 2, rank 1 opens), a left the ordering (it runs)
    store.commit_round(3, 40.0, {}, 0.0, {}, {}, [], ExplanationChanges(
        opened=[("ordering", rec(b, 3, "ordering", "rank 1"))], closed=[(b, "ordering", 2), (a, "ordering", 2)]))
    assert spans(store, b) == [("ordering", "rank 2", 0, 2), ("ordering", "rank 1", 3, 3)]
    assert spans(store, a, 1) == [("ordering", "rank 1", 0, 2), ("allocation", "2 x any", 0, 3)]
    assert spans(store, a, 3) == [("allocation", "2 x any", 0, 3)]
    assert spans(store, b, 2) == [("ordering", "rank 2", 0, 2)]
    assert spans(store, b, 4) == []  # not committed yet
    # a round that fails to commit leaves nothing behind: neither its new records nor its closings
    with pytest.raises(sa.exc.IntegrityError):
        store.commit_round(3, 50.0, {}, 0.0, {}, {}, [], ExplanationChanges(
            opened=[("ordering", rec(b, 3, "ordering", "rank 9"))], closed=[(b, "ordering", 2)]))
    assert spans(store, b) == [("ordering", "rank 2", 0, 2), ("ordering", "rank 1", 3, 3)]
    # a fresh recorder (a restart): every open record closes where the last round left it
    store.commit_round(4, 50.0, {}, 0.0, {}, {}, [], ExplanationChanges(
        opened=[("ordering", rec(b, 4, "ordering", "rank 1"))], close_open_at=3))
    assert spans(store, b) == [("ordering", "rank 2", 0, 2), ("ordering", "rank 1", 3, 3),
                               ("ordering", "rank 1", 4, 4)]
    assert spans(store, a) == [("ordering", "rank 1", 0, 2), ("allocation", "2 x any", 0, 3)]
    store.close()


def test_retention_deletes_what_closed_long_ago_and_keeps_current_records(store: Store) -> None:
    a, b = "job-1", "job-2"
    store.commit_round(0, 10.0, {}, 0.0, {}, {}, [], opened(rec(a, 0, "ordering", "rank 1"),
                                                            rec(b, 0, "ordering", "rank 2")))
    store.commit_round(1, 20.0, {}, 0.0, {}, {}, [], ExplanationChanges(
        opened=[("ordering", rec(b, 1, "ordering", "rank 1"))], closed=[(b, "ordering", 0), (a, "ordering", 0)]))
    for n in range(2, 12):
        store.commit_round(n, 10.0 * n, {}, 0.0, {}, {}, [], ExplanationChanges(keep_rounds=5))
    # b's first record closed at round 0, a's too: more than 5 rounds before round 11, gone; b's current
    # record opened at round 1 and still holds: kept
    assert spans(store, a) == []
    assert spans(store, b) == [("ordering", "rank 1", 1, 11)]
    store.close()
