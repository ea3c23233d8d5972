"""The scenario table: for short runs of each preset on small hand-made workloads, some round's explanation
names the fact that decided it (the gang cut, Sia's type choice, Gavel's time fractions, PAL's locality
against variability, Hops's service-window boundary, Gimbal's packing set)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from dlsched.explain import explain, explain_paragraphs
from dlsched.sim.config import RunConfig
from dlsched.sim.run import simulate

pytestmark = pytest.mark.timeout(120)

#: (case, run fields, stage, pattern the deciding record's summary matches, facts it must carry)
SCENARIOS: list[tuple[str, dict[str, Any], str, str, tuple[str, ...]]] = [
    ("fifo gang cut",
     {"policy": "fifo", "cluster": "sia-homo-64", "extra_jobs": (
         {"job_id": "big-a", "submit_time_s": 0, "num_gpus": 48, "duration_s": 3600, "model": "philly"},
         {"job_id": "big-b", "submit_time_s": 1, "num_gpus": 32, "duration_s": 3600, "model": "philly"},
         {"job_id": "small-c", "submit_time_s": 2, "num_gpus": 1, "duration_s": 3600, "model": "philly"})},
     "allocation", r"behind the gang cut: the jobs ahead take 48 of 64 GPUs and big-b needs more than the 16 left",
     ("cut_used_gpus", "capacity", "cut_at")),
    ("sia chooses a type",
     {"policy": "sia", "cluster": "sia-hetero-64"},
     "allocation", r"Sia chose \d+ x (\w+) \(normalised goodput [\d.]+, value [\d.]+\) over \d+ x (?!\1)\w+",
     ("configs", "p", "restart_factor")),
    ("gavel time fractions",
     {"policy": "gavel", "cluster": "sia-hetero-64"},
     "allocation", r"Gavel's max-sum-throughput time fractions \w+ [\d.]+, .*; lease on \w+",
     ("time_fractions", "lease")),
    ("pal locality against variability",
     {"policy": "pal", "cluster": "pal-64"},
     "placement", r"PAL took (within a node|across nodes) at PM-score bin \d+ \(locality [\d.]+ x variability [\d.]+",
     ("node_bin", "across_bin", "penalties", "bin_values", "product")),
    ("hops window boundary",
     {"policy": "hops", "cluster": "sia-homo-64", "extra_jobs": tuple(
         {"job_id": f"gang-{i}", "submit_time_s": i, "num_gpus": 16, "duration_s": 3600, "model": "philly"}
         for i in range(6))},
     "allocation", r"outside the service window of \d+ GPUs: the \d+ jobs ahead up to the boundary \S+ already need",
     ("in_window", "boundary", "window_need", "priority", "weight")),
    ("gimbal packing set",
     {"policy": "lucid", "coordination": "gimbal", "cluster": "gimbal-16", "extra_jobs": tuple(
         {"job_id": f"{m}-{i}", "submit_time_s": i, "num_gpus": 1, "duration_s": 1800, "model": m,
          "reference_gpu": "a40"} for i in range(12) for m in ("resnet50", "efficientnet"))},
     "coordination", r"shares its GPUs with .*: packing set \{.*\} around J_max \S+",
     ("packing_set", "center", "packed_with")),
]


@pytest.mark.parametrize(("case", "fields", "stage", "pattern", "facts"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_the_explanation_names_the_deciding_fact(case: str, fields: dict[str, Any], stage: str, pattern: str,
                                                  facts: tuple[str, ...]) -> None:
    base = {"trace": "synthetic:rate=300,hours=0.1,seed=1,jobs=12", "max_time_s": 1800.0}
    if "extra_jobs" in fields:
        base = {"trace": "synthetic:rate=1,hours=0.01,seed=1,jobs=1,kind=rigid-duration", "max_time_s": 600.0}
    res = simulate(RunConfig(**{**base, **fields}))
    hits = [r for r in res.explanations if r["stage"] == stage and re.search(pattern, r["summary"])]
    assert hits, f"{case}: no {stage} record matches {pattern!r}; e.g. " + \
        "; ".join(r["summary"] for r in res.explanations if r["stage"] == stage)[:1500]
    rec = hits[0]
    assert set(facts) <= set(rec["facts"]), rec["facts"]
    assert set(rec) >= {"round", "time_s", "job", "stage", "decided", "summary", "facts"}
    # the Python API returns the same record, and the job's paragraphs carry the deciding words
    again = explain(res, rec["job"], round=rec["round"])
    assert rec in again
    text = "\n".join(explain_paragraphs(explain(res, rec["job"])))
    assert re.search(pattern, text)


def test_quota_admission_names_the_binding_quota(tmp_path) -> None:
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text("users:\n  carol: {gpus: 4}\n")
    jobs = tuple({"job_id": f"carol-{i}", "submit_time_s": i, "num_gpus": 4, "duration_s": 3600, "model": "philly",
                  "user": "carol"} for i in range(2))
    res = simulate(RunConfig(policy="fifo", admission="quota", quotas=str(quotas), cluster="sia-homo-64",
                             trace="synthetic:rate=1,hours=0.01,seed=1,jobs=1,kind=rigid-duration",
                             extra_jobs=jobs, max_time_s=600.0))
    held = [r for r in explain(res, "carol-1") if r["stage"] == "admission"]
    assert held[0]["decided"] == "held"
    assert held[0]["summary"] == "held: user carol at 4/4 GPUs, no team to borrow from (needs 4)"
    assert held[0]["facts"]["admission"] == "quota"
    assert "admission: round" in explain_paragraphs(explain(res, "carol-1"))[0]
