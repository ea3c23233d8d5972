"""The dashboard's data for a finished simulation: read from the files ``simulate --out`` wrote.

The cluster and the queue are shown at one moment of the run (``at_s``; by default the round with the
longest queue, where there is most to see), the timeline over the whole run, and a page per job. The
simulator keeps no per-job throughput series, so a job's page draws what it does keep: the GPUs it held
and its restarts over time, and the facts of ``jobs.csv``. Explanations come from ``explanations.jsonl``
(per job and round: ``round``, ``time_s``, ``job``, ``stage``, ``decided``, ``summary``, ``facts``) when the
run wrote it.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from dlsched.core import InputError

#: The timeline draws the jobs with the most GPU time, at most this many (as report.html does).
MAX_TIMELINE_JOBS = 80
REQUIRED = ("jobs.csv", "rounds.csv", "allocations.csv", "cluster.json")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _float(value: str | None) -> float | None:
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def read_explanations(path: Path) -> dict[str, list[dict[str, Any]]]:
    """``explanations.jsonl`` by job, oldest round first (empty when the run wrote none)."""
    found: dict[str, list[dict[str, Any]]] = {}
    if not path.is_file():
        return found
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            found.setdefault(str(record["job"]), []).append(record)
        except (ValueError, KeyError, TypeError):
            raise InputError(f"{path}: line {n} is not an explanation record", field="RUN_DIR") from None
    for records in found.values():
        records.sort(key=lambda r: (r.get("round", 0), r.get("time_s", 0.0)))
    return found


def load_run(run_dir: Path, at_s: float | None = None) -> dict[str, Any]:
    """``{"snapshot": ..., "jobs": {id: detail}}`` of the run in ``run_dir`` (see :mod:`dlsched.dashboard`)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"{run_dir} is not a folder", field="RUN_DIR")
    missing = [n for n in REQUIRED if not (run_dir / n).is_file()]
    if missing:
        hint = (" (a comparison's folder: report one run of it with 'dlsched simulate --config')"
                if (run_dir / "report.html").is_file() and not (run_dir / "jobs.csv").is_file() else
                " (written by 'dlsched simulate --out' of this version)")
        raise InputError(f"{run_dir} lacks {', '.join(missing)}{hint}", field="RUN_DIR")
    try:
        jobs = _rows(run_dir / "jobs.csv")
        rounds = _rows(run_dir / "rounds.csv")
        segments = [{"job": r["job_id"], "start_s": float(r["start_s"]), "end_s": float(r["end_s"]),
                     "gpus": int(r["num_gpus"]), "gpu_type": r["gpu_type"],
                     "restart": float(r["restarting_until_s"]) > float(r["start_s"]),
                     "ids": [int(g) for g in r["gpus"].split()]} for r in _rows(run_dir / "allocations.csv")]
        cluster = json.loads((run_dir / "cluster.json").read_text())
    except (KeyError, ValueError, OSError) as exc:
        raise InputError(f"{run_dir}: cannot read the run's files: {exc}", field="RUN_DIR") from None
    config = _json_or_empty(run_dir / "config.json")
    explanations = read_explanations(run_dir / "explanations.jsonl")
    if at_s is None:
        at_s = _busiest(rounds)
    snapshot = _snapshot(jobs, rounds, segments, cluster, explanations, at_s)
    snapshot["title"] = (f"dlsched report · {cluster.get('name', '')} · "
                         f"{config.get('label') or config.get('policy') or config.get('scheduler', '')}")
    details = {row["job_id"]: _detail(row, segments, explanations.get(row["job_id"], []), snapshot)
               for row in jobs}
    return {"snapshot": snapshot, "jobs": details}


def _json_or_empty(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _busiest(rounds: list[dict[str, str]]) -> float:
    """The time of the first round with the longest queue (with GPUs in use), else the last round's."""
    best: tuple[float, float] | None = None
    for r in rounds:
        key = (_float(r.get("queue_len")) or 0.0, _float(r.get("allocated_gpus")) or 0.0)
        if best is None or key > best:
            best, at = key, _float(r.get("time_s")) or 0.0
    return at if best is not None else 0.0


def _snapshot(jobs: list[dict[str, str]], rounds: list[dict[str, str]], segments: list[dict[str, Any]],
              cluster: dict[str, Any], explanations: dict[str, list[dict[str, Any]]], at_s: float) -> dict[str, Any]:
    nodes = [{"name": n["name"], "gpu_type": n["gpu_type"], "gpus": [[] for _ in range(int(n["gpus"]))]}
             for n in cluster.get("nodes", [])]
    slots = [(node, i) for node in nodes for i in range(len(node["gpus"]))]  # GPU ids in node order
    holding: dict[str, dict[str, Any]] = {}
    for s in segments:
        if s["start_s"] <= at_s < s["end_s"]:
            holding[s["job"]] = s
            for g in s["ids"]:
                if 0 <= g < len(slots):
                    node, i = slots[g]
                    node["gpus"][i].append(s["job"])
    present = [r for r in jobs if (_float(r.get("submit_s")) or 0.0) <= at_s
               and ((_float(r.get("finish_s")) is None) or (_float(r.get("finish_s")) or 0.0) > at_s)]
    waiting = [r for r in present if r["job_id"] not in holding]
    ranks = _ranks(waiting, explanations, at_s)
    served = _served_before(segments, at_s)
    rows = []
    for r in present:
        job = r["job_id"]
        seg = holding.get(job)
        rows.append({"id": job, "name": r.get("model", ""), "user": r.get("user", ""),
                     "status": "running" if seg else "queued", "gpus": seg["gpus"] if seg else 0,
                     "gpu_type": seg["gpu_type"] if seg else None,
                     "gpus_requested": int(_float(r.get("requested_gpus")) or 0), "priority": None,
                     "wait_s": max(0.0, at_s - (_float(r.get("submit_s")) or 0.0) - served.get(job, 0.0)),
                     "latency_ratio": _float(r.get("latency_ratio")), "rank": ranks.get(job),
                     "restarts": sum(1 for s in segments if s["job"] == job and s["restart"] and s["start_s"] <= at_s)})
    usage: dict[str, int] = {}
    for r in present:
        usage[r.get("user", "")] = usage.get(r.get("user", ""), 0) + (holding[r["job_id"]]["gpus"]
                                                                    if r["job_id"] in holding else 0)
    round_no = None
    for r in rounds:
        if (_float(r.get("time_s")) or 0.0) <= at_s:
            round_no = int(_float(r.get("round")) or 0)
    end_s = max([s["end_s"] for s in segments] + [_float(r.get("time_s")) or 0.0 for r in rounds] + [0.0])
    return {"title": "", "source": "simulation", "live": False, "time_s": end_s, "at_s": at_s, "round": round_no,
            "nodes": nodes, "jobs": rows,
            "rank_note": (f"the cluster and the queue at {at_s:.0f} s (the round with the longest queue unless "
                          "--at names another time); rank: the ordering stage's where the run recorded it, "
                          "else submission order; latency ratio: the job's at its end"),
            "timeline": {"end_s": end_s, "segments": _timeline(segments)},
            "usage": [{"kind": "user", "name": k, "gpus": v, "quota": None} for k, v in sorted(usage.items())]}


def _ranks(waiting: list[dict[str, str]], explanations: dict[str, list[dict[str, Any]]],
           at_s: float) -> dict[str, int]:
    """Rank of each waiting job: the ordering stage's rank at the last round before ``at_s`` where recorded,
    the submission order among the rest after those."""
    recorded: dict[str, float] = {}
    for r in waiting:
        for e in reversed(explanations.get(r["job_id"], [])):
            rank = (e.get("facts") or {}).get("rank") if isinstance(e.get("facts"), dict) else None
            if e.get("stage") == "ordering" and (e.get("time_s") or 0.0) <= at_s and isinstance(rank, int | float):
                recorded[r["job_id"]] = float(rank)
                break
    order = sorted(waiting, key=lambda r: (recorded.get(r["job_id"], math.inf),
                                           _float(r.get("submit_s")) or 0.0, r["job_id"]))
    return {r["job_id"]: i + 1 for i, r in enumerate(order)}


def _served_before(segments: list[dict[str, Any]], at_s: float) -> dict[str, float]:
    served: dict[str, float] = {}
    for s in segments:
        if s["start_s"] < at_s:
            served[s["job"]] = served.get(s["job"], 0.0) + min(s["end_s"], at_s) - s["start_s"]
    return served


def _timeline(segments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    gpu_s: dict[str, float] = {}
    for s in segments:
        gpu_s[s["job"]] = gpu_s.get(s["job"], 0.0) + s["gpus"] * (s["end_s"] - s["start_s"])
    keep = set(sorted(gpu_s, key=lambda j: -gpu_s[j])[:MAX_TIMELINE_JOBS])
    return [{k: s[k] for k in ("job", "start_s", "end_s", "gpus", "gpu_type")} for s in segments if s["job"] in keep]


def _detail(row: dict[str, str], segments: list[dict[str, Any]], explanations: list[dict[str, Any]],
            snapshot: dict[str, Any]) -> dict[str, Any]:
    job = row["job_id"]
    listed = next((j for j in snapshot["jobs"] if j["id"] == job), None)
    own = sorted((s for s in segments if s["job"] == job), key=lambda s: s["start_s"])
    series: list[dict[str, Any]] = []
    restarts = 0
    for s in own:
        restarts += 1 if s["restart"] else 0
        series.append({"t": s["start_s"], "gpus_held": s["gpus"], "restarts": restarts})
        series.append({"t": s["end_s"], "gpus_held": s["gpus"], "restarts": restarts})
        series.append({"t": s["end_s"], "gpus_held": 0, "restarts": restarts})
    if listed is not None:  # its row at the moment the cluster is shown, said so
        listed = {**listed, "status": f"{listed['status']} at {snapshot['at_s']:.0f} s"}
    base = listed or {"id": job, "name": row.get("model", ""), "user": row.get("user", ""),
                      "status": "finished" if _float(row.get("finish_s")) is not None else "unfinished",
                      "gpus": 0, "gpu_type": None, "gpus_requested": int(_float(row.get("requested_gpus")) or 0),
                      "priority": None, "wait_s": _float(row.get("wait_s")),
                      "latency_ratio": _float(row.get("latency_ratio")), "rank": None,
                      "restarts": int(_float(row.get("restarts")) or 0)}
    facts = [[k, v] for k, v in row.items() if k not in ("job_id", "user", "restarts") and v not in ("", None)]
    return {"job": base, "facts": facts, "series": series, "explanations": explanations,
            "charts": [["GPUs held", "gpus_held"], ["restarts", "restarts"]],
            "series_note": "the simulator keeps no per-job throughput or batch-size series; seconds from trace start"}
