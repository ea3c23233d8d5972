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
GPT_TYPES = "a100,rtx"


def gpt_job():
    from dlsched.core import Adaptivity, JobSpec

    types = tuple(GPT_TYPES.split(",")) if GPT_TYPES else ()
    return JobSpec(job_id=GPT_ID, submit_time_s=0.0, model="gpt_pmp", num_gpus=8, gpu_unit=8,
                   max_gpus=64, adaptivity=Adaptivity.ADAPTIVE, gpu_types=types)


def _tolerate_undefined_ftf() -> None:
    """Work around an engine limitation: a job whose fair share (64 GPUs / average contention) is below its
    scale-out unit (8 GPUs for the GPT job) has no finite isolated time on any type, and
    ``finish_time_fairness`` raises instead of leaving its rho undefined; here it becomes None."""
    import dlsched.sim.metrics as metrics

    orig = metrics.finish_time_fairness
    if getattr(orig, "_tolerant", False):
        return

    def tolerant(*args, **kwargs):
        try:
            return orig(*args, **kwargs)
        except ValueError:
            return None

    tolerant._tolerant = True  # type: ignore[attr-defined]
    metrics.finish_time_fairness = tolerant


def run_gpt(s: dict) -> dict:
    """Worker: the Philly workload plus the GPT job, through the same pieces as ``dlsched.sim.runner.run``."""
    from dlsched.clusters import load_cluster
    from dlsched.policies import build_scheduler
    from dlsched.sim.engine import Engine, SimConfig
    from dlsched.sim.metrics import summarize
    from dlsched.sim.runner import load_jobs, split_settings
    from dlsched.world.base import World

    global GPT_TYPES
    GPT_TYPES = s.get("gpt_types", "")
    _tolerate_undefined_ftf()
    cluster = load_cluster(s["cluster"])
    specs, _ = load_jobs(s["trace"], None, cluster, s["seed"])
    specs = [gpt_job(), *specs]
    world_cfg, engine_kwargs, policy_settings = split_settings(s["settings"])
    scheduler = build_scheduler(s["policy"], settings=policy_settings, seed=s["seed"])
    world = World(cluster, world_cfg, seed=s["seed"])
    engine = Engine(cluster, specs, scheduler, world, SimConfig(round_s=s["round_s"], seed=s["seed"],
                                                                  **engine_kwargs))
    res = engine.run()
    summary = summarize(res.jobs, res.rounds, num_gpus=res.num_gpus, sim_wall_s=res.sim_wall_s)
    summary.update(sc.contention(res.rounds))
    gpt = next((j for j in res.jobs if j.job_id == GPT_ID), None)
    summary["gpt_jct_s"] = gpt.jct_s if gpt is not None else None
    summary["gpt_gpu_s_by_type"] = dict(gpt.gpu_s_by_type) if gpt is not None else {}
    summary["gpt_segments"] = [[g.start_s, g.end_s, g.num_gpus, g.gpu_type] for g in res.segments
                               if g.job_id == GPT_ID]
    summary["active_jobs"] = [[r.time_s, r.active_jobs] for r in res.rounds]
    return summary


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


def main() -> None:
    p = sc.parser(__doc__.splitlines()[0], default_workloads=2)
    p.add_argument("--any-type", action="store_true",
                   help="let the GPT job run on any GPU type (t4 included, where it cannot progress)")
    args = p.parse_args()
    types = "" if args.any_type else GPT_TYPES
    specs = []
    for w in range(1, args.workloads + 1):
        s = dict(sc.spec("sia", CLUSTER, f"sia-philly:{w}", tag=f"philly:{w}+gpt"), runner="sia_gpt:run_gpt")
        if types:  # key of the cache: the unrestricted runs (no key) stay cached apart
            s["gpt_types"] = types
        specs.append(s)
    records = sc.run_all(specs, workers=args.workers, force=args.force)
    for r in records:
        if r is None:
            continue
        sm = r["summary"]
        print(f"\n### {r['spec']['tag']}: GPT JCT {sc.hours(sm['gpt_jct_s'])}, GPU-hours by type "
              + ", ".join(f"{t}={v / 3600:.1f}" for t, v in sm["gpt_gpu_s_by_type"].items())
              + f"; workload avg JCT {sc.hours(sm['avg_jct_s'])}")
        print(sc.table(["hour", "GPT GPUs (avg)", "GPT GPU types", "active jobs (avg)"], hourly(sm)))
    print(f"\nsimulation time (sum over runs): {sc.total_wall(records) / 60:.1f} min")
    sc.write_json(args.json, [r for r in records if r is not None])


if __name__ == "__main__":
    main()
