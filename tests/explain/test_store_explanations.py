"""The store keeps each round's explanation records in the round's transaction, and hands back one job's."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from dlsched.service.spec import JobSubmission
from dlsched.service.store import Store


def rec(job: str, round_no: int, stage: str, decided: str) -> dict:
    return {"round": round_no, "time_s": 10.0 * round_no, "job": job, "stage": stage, "decided": decided,
            "summary": f"{stage} {decided}", "facts": {"n": round_no}}


def test_explanations_are_committed_with_their_round(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "state")
    store.add_user("alice")
    a = store.add_job("alice", JobSubmission(name="a", command="true", working_dir=str(tmp_path), gpus=2), 1.0)
    b = store.add_job("alice", JobSubmission(name="b", command="true", working_dir=str(tmp_path), gpus=2), 1.0)
    store.commit_round(0, 10.0, {}, 0.0, {}, {}, [], [rec(a.id, 0, "ordering", "rank 1"),
                                                    rec(b.id, 0, "ordering", "rank 2"),
                                                    rec(a.id, 0, "allocation", "2 x any")])
    store.commit_round(1, 20.0, {}, 0.0, {}, {}, [], [rec(a.id, 1, "ordering", "rank 1")])
    assert [(r["round"], r["stage"]) for r in store.explanations(a.id)] == [(0, "ordering"), (0, "allocation"),
                                                                          (1, "ordering")]
    assert store.explanations(a.id, 1) == [rec(a.id, 1, "ordering", "rank 1")]
    assert store.explanations(b.id, 1) == []
    # a round that fails to commit leaves no explanations behind
    with pytest.raises(sa.exc.IntegrityError):
        store.commit_round(1, 30.0, {}, 0.0, {}, {}, [], [rec(b.id, 1, "ordering", "rank 1")])
    assert store.explanations(b.id) == [rec(b.id, 0, "ordering", "rank 2")]
    store.close()
