"""Thesis section 3.5.3: Sia scaling a hybrid-parallel (pipeline + data parallel) GPT job with congestion.

A 2.8B GPT (``gpt_pmp``: 2 pipeline stages on a100, 8 on rtx, so it scales in units of 8 GPUs here) is
submitted at t=0 together with a Philly workload on ``sia-hetero-64``; Sia adapts its GPU count and type as the
other jobs come and go. The script prints, per hour, the GPUs the GPT job held and the number of active jobs.

    python experiments/sia_gpt.py --workloads 2
"""

from __future__ import annotations

import sia_common as sc

CLUSTER = "sia-hetero-64"
GPT_ID = "gpt"
#: GPU types the GPT job accepts. The thesis profiled it on a100 and rtx only, and the world has no gpt_pmp
#: model for t4 (it makes no progress there). Without this restriction the job cannot be profiled on t4 (an
#: 8-GPU worker does not fit a 4-GPU node), so Sia tries t4 once, learns the job cannot run there and stops
#: (``--any-type`` shows that).
GPT_TYPES = "a100;rtx"


def gpt_job(types: str = GPT_TYPES) -> dict:
    """The GPT job as a row of the canonical job table, submitted at t=0 in front of the workload."""
    row = {"job_id": GPT_ID, "submit_time_s": 0.0, "model": "gpt_pmp", "num_gpus": 8, "gpu_unit": 8,
           "max_gpus": 64, "adaptivity": "adaptive"}
    return {**row, "gpu_types": types} if types else row


def gpt_summary(records) -> dict:
    """The GPT job's JCT, GPU time by type and allocation timeline, and active jobs per round."""
    gpt = next((j for j in records.jobs if j.job_id == GPT_ID), None)
    return {"gpt_jct_s": gpt.jct_s if gpt is not None else None,
            "gpt_gpu_s_by_type": dict(gpt.gpu_s_by_type) if gpt is not None else {},
            "gpt_segments": [[g.start_s, g.end_s, g.num_gpus, g.gpu_type] for g in records.segments
                             if g.job_id == GPT_ID],
            "active_jobs": [[r.time_s, r.active_jobs] for r in records.rounds]}


def hourly(summary: dict, hours: int | None = None) -> list[list[str]]:
    """Per hour: GPT GPUs (time-weighted, and the types used) and mean active jobs."""
    segs = summary["gpt_segments"]
    act = summary["active_jobs"]
    end = max([s[1] for s in segs] + [0.0])
    n = hours or int(end // 3600) + 1
    rows = []
    for h in range(n):
        lo, hi = h * 3600.0, (h + 1) * 3600.0
        gpu_s, types = 0.0, set()
        for a, b, k, t in segs:
            ov = max(0.0, min(b, hi) - max(a, lo))
            if ov > 0 and k > 0:
                gpu_s += ov * k
                types.add(t)
        jobs = [a for t, a in act if lo <= t < hi]
        rows.append([f"{h}-{h + 1}", f"{gpu_s / 3600:.1f}", ",".join(sorted(types)) or "-",
                     f"{sum(jobs) / len(jobs):.1f}" if jobs else "-"])
        if lo >= end:
            break
    return rows


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/sia_gpt.json``: ``summary`` (one row per workload) and ``hourly-N`` (the
    GPT job's GPUs and the active jobs per hour in the N-th workload run)."""
    out: dict[str, str] = {}
    rows = []
    for i, r in enumerate(sc.records_of(data), start=1):
        sm = r["summary"]  # type: ignore[index]
        jobs, avg, gpt = sm["jobs"], sm["avg_jct_s"], sm["gpt_jct_s"]
        rest = (avg * jobs - gpt) / (jobs - 1) if None not in (avg, gpt) and jobs > 1 else None
        starts = {round(s[0], 3) for s in sm["gpt_segments"]}
        rows.append([r["spec"]["tag"], sc.hours(gpt), sc.hours(rest),  # type: ignore[index]
                     ", ".join(f"{t} {v / 3600:.1f}" for t, v in sorted(sm["gpt_gpu_s_by_type"].items())),
                     str(max(0, len(starts) - 1))])
        out[f"hourly-{i}"] = sc.table(["hour", "GPT GPUs (avg)", "GPT GPU types", "active jobs (avg)"], hourly(sm))
    summary = sc.table(["run", "GPT JCT", "avg JCT of the other jobs", "GPT GPU-hours by type",
                        "GPT allocation changes"], rows)
    return {"summary": summary, **out}


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=2, name="sia_gpt")
    p.add_argument("--any-type", action="store_true",
                   help="let the GPT job run on any GPU type (t4 included, where it cannot progress)")
    args = p.parse_args()
    types = "" if args.any_type else GPT_TYPES
    specs = [sc.spec("sia", CLUSTER, f"sia-philly:{w}", tag=f"philly:{w}+gpt", extra_jobs=[gpt_job(types)],
                     extract=gpt_summary)
             for w in range(1, args.workloads + 1)]
    records = sc.run_all(specs, workers=args.workers, force=args.force)
    for name, text in tables(sc.write_results("sia_gpt", args, records)).items():
        print(f"### {name}\n\n{text}\n")
    print(f"simulation time (sum over runs): {sc.total_wall(records) / 60:.1f} min")


if __name__ == "__main__":
    main()
