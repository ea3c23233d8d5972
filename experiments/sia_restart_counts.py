"""Restarts per job on thesis table 3.3's workloads, counted our way and the Sia artifact's way, and where they come from.

    python experiments/sia_restart_counts.py                      # sia-philly:1,2 and sia-saturn:1..4
    python experiments/sia_restart_counts.py --policies gavel     # the Gavel rows only (seconds)

On ``sia-hetero-64`` under the ``sia-artifact`` world calibration, one process, every run watched round by
round (:func:`dlsched.sim.run.simulate` with a decision observer). Each placement change a job goes through
is sorted into: a resume (placed again after being preempted), a change of GPU type, a change of per-node
GPU counts (as a multiset), a reorder (same counts on other nodes, in another node order), a move (same
counts in the same node order, other GPUs). ``restarts_per_job`` counts resumes, type changes and shape
changes; the Sia artifact (``Job.reallocate`` and ``Job.migrate`` in ``sia-simulator/job.py``) counts
those and reorders too, since it compares per-node counts as a tuple in the order its allocation lists the
nodes (Gavel's allocation lists them in node order).

The Gavel rows: Gavel+TJ as table 3.3 runs it (our TunedJobs, ``@tuned``), with Gavel's in-order worker
assignment (``placement.assign=in-order``), and both again with the workload file's own ``num_replicas`` and
``batch_size``, which are the TunedJobs the artifact's Gavel runs (``sia-simulator/cluster.py`` builds its
Gavel jobs from those columns).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import sia_common as sc
from sia_table33 import THESIS

CLUSTER = "sia-hetero-64"
CALIBRATION = "sia-artifact"
#: Row name -> (policy, our TunedJobs?, settings). Sia and Pollux run the workloads as adaptive jobs.
ROWS: dict[str, tuple[str, bool, dict[str, str]]] = {
    "Sia": ("sia", False, {}),
    "Pollux": ("pollux", False, {}),
    "Gavel+TJ": ("gavel", True, {}),
    "Gavel+TJ, in-order": ("gavel", True, {"placement.assign": "in-order"}),
    "Gavel, workload's TJ": ("gavel", False, {}),
    "Gavel, workload's TJ, in-order": ("gavel", False, {"placement.assign": "in-order"}),
}
#: What ``--policies`` picks: a policy name selects its rows.
POLICIES = ("sia", "pollux", "gavel")
#: The kinds of placement change, in table order (see the module docstring).
KINDS = ("resume", "type", "shape", "reorder", "move")


class PlacementChanges:
    """Sorts every placement change a run's decisions make, per kind; :meth:`summary` gives them per job.

    Given to :func:`~dlsched.sim.run.simulate` as its decision observer: it sees each round's view (where
    every job is) and the decision (where each will be).
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.started: set[str] = set()
        self.jobs: set[str] = set()
        self.requested: dict[str, int] = {}

    def __call__(self, view: Any, decision: Any) -> None:
        cluster = view.cluster
        for job in view.jobs:
            self.jobs.add(job.job_id)
            self.requested[job.job_id] = job.spec.num_gpus
            alloc = decision.allocations.get(job.job_id)
            new = alloc.placement if alloc is not None else None
            old = job.placement
            if not new:
                if old:
                    self.counts["preempt"] += 1
                continue
            if job.job_id not in self.started:
                self.started.add(job.job_id)
                continue
            kind = self.kind(cluster, old, new)
            if kind is not None:
                self.counts[kind] += 1

    @staticmethod
    def kind(cluster: Any, old: Any, new: Any) -> str | None:
        """The kind of change from ``old`` to ``new`` (a placement of a job that has run before), None if
        it keeps its GPUs."""
        if not old:
            return "resume"
        if new == old:
            return None
        if cluster.gpu_type_of[old.gpus[0]] != cluster.gpu_type_of[new.gpus[0]]:
            return "type"
        if old.node_counts(cluster) != new.node_counts(cluster):
            return "shape"
        if node_ordered_counts(cluster, old) != node_ordered_counts(cluster, new):
            return "reorder"
        return "move"

    def summary(self, records: Any) -> dict[str, Any]:
        """Per job (over the run's jobs): each kind, the artifact's count, and GPUs requested."""
        n = len(records.jobs) or 1
        out: dict[str, Any] = {f"{k}_per_job": self.counts[k] / n for k in (*KINDS, "preempt")}
        out["artifact_restarts_per_job"] = sum(self.counts[k] for k in ("resume", "type", "shape", "reorder")) / n
        out["requested_gpus_per_job"] = sum(j.requested_gpus for j in records.jobs) / n
        return out


def node_ordered_counts(cluster: Any, placement: Any) -> tuple[int, ...]:
    """GPUs per node the placement touches, in node order (the artifact's placement tuple for Gavel)."""
    per_node = Counter(int(cluster.gpu_node[g]) for g in placement.gpus)
    return tuple(per_node[n] for n in sorted(per_node))


def specs(philly: int, saturn: int, rows: tuple[str, ...] = tuple(ROWS)) -> list[dict]:
    """Every (family, workload, row) on the calibrated heterogeneous cluster."""
    out = []
    for family, n in (("philly", philly), ("saturn", saturn)):
        for w in range(1, n + 1):
            for name in rows:
                policy, tuned, settings = ROWS[name]
                out.append(sc.spec(policy, CLUSTER, f"sia-{family}:{w}", tuned=tuned, settings=dict(settings),
                                   world={"calibration": CALIBRATION}, tag=f"{family}/{name}",
                                   extract=PlacementChanges.summary))
    return out


def run(specs_: list[dict], force: bool = False) -> list[dict | None]:
    """Run each spec in this process with a :class:`PlacementChanges` watching (cached like the other Sia
    experiments' runs)."""
    from dlsched.sim.about import code_state
    from dlsched.sim.run import simulate

    code_state()
    out: list[dict | None] = []
    for i, s in enumerate(specs_, 1):
        rec = None if force else sc.load_cached(s)
        if rec is None:
            watch = PlacementChanges()
            records = simulate(s["config"], on_decision=watch)
            rec = sc._record({**s, "extract": watch.summary}, records)
            rec["extract"] = sc._extract_name(s)
            sc._save(s, rec)
            print(f"  [{i}/{len(specs_)}] {s['tag']} {s['config'].trace}: restarts/job "
                  f"{rec['summary']['restarts_per_job']:.2f} ({rec['summary']['wall_s']:.0f}s)", flush=True)
        out.append({**rec, "tag": s["tag"], "spec": {"tag": s["tag"], "config": rec["configs"][0]}})
    return out


#: The table's columns: (summary key, column name, scale, format).
METRICS = [("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}"), ("p99_jct_s", "p99 JCT (h)", 3600.0, "{:.1f}"),
           ("makespan_s", "makespan (h)", 3600.0, "{:.1f}"), ("restarts_per_job", "restarts/job", 1.0, "{:.1f}"),
           ("artifact_restarts_per_job", "artifact's count", 1.0, "{:.1f}"),
           ("resume_per_job", "resumes", 1.0, "{:.2f}"), ("type_per_job", "type changes", 1.0, "{:.2f}"),
           ("shape_per_job", "shape changes", 1.0, "{:.2f}"), ("reorder_per_job", "reorders", 1.0, "{:.2f}"),
           ("move_per_job", "moves", 1.0, "{:.2f}"), ("requested_gpus_per_job", "GPUs requested", 1.0, "{:.1f}"),
           ("gpu_hours_per_job", "GPU-h/job", 1.0, "{:.2f}")]
#: Which thesis row each of ours is compared with.
THESIS_ROW = {"Sia": "sia", "Pollux": "pollux"}


def tables(data: dict) -> dict[str, str]:
    """The table (mean ± std over workloads, per family and row) with the thesis's figures of the row."""
    records = sc.records_of(data)
    header, rows = sc.group_rows(records, metrics=METRICS)
    header = [*header, "thesis (avg / p99 / makespan / GPU-h / restarts)"]
    for row in rows:
        family, name = row[0].split("/", 1)
        row.append(" / ".join(THESIS[(family, THESIS_ROW.get(name, "gavel"))]))
    return {"table": sc.table(header, rows)}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=2, name="sia_restart_counts")
    p.add_argument("--saturn", type=int, default=4, help="number of Saturn workloads (default 4)")
    p.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES,
                   help="policies whose rows to run (default: all)")
    args = p.parse_args()
    rows = tuple(name for name, (policy, _, _) in ROWS.items() if policy in args.policies)
    records = run(specs(args.workloads, args.saturn, rows), force=args.force)
    sc.finish("sia_restart_counts", args, records, tables)


if __name__ == "__main__":
    main()
