"""Hops's throughput estimator against the world's truth as a job's reports accumulate (the paper's figures 6-7).

Every Table 2 model is one job (``per-GPU batch``, requirements 1, 2, 4, 8) on Table 3's cluster
(``hops-64``). On each GPU type the job is profiled on one GPU (its first report: the components and the
data-loading times it timed), then runs ``k`` rounds, each on a configuration drawn from the type's targets
(one, two and four GPUs on one server, and two plus two, four plus four GPUs over two servers, on servers of
both hosts where the type has two), and reports what it measured there exactly as the simulator's engine
records it (``World.rate`` and ``World.observation_details``). After ``k`` = 0, 1, 2, 4, 8, 16, 32 reports the
estimator predicts the iteration time of every target and is scored by its mean absolute percentage error
against the world's expected iteration time, in three variants over one store:

* **formula**: equations 1-5 over the profiled components and the mixture fitted to every data-loading time
  reported so far (``HopsThroughput.formula``; no record of any configuration is read);
* **type layer**: the store's per-type records, the formula below them (``server_layer=off``);
* **server layer**: the full estimator, per-server records first (the default), its formula scaled by how far
  the job's records of the same shape fell from it (``formula_correction=ratio``, docs/hops.md choice 25);
* **server layer, uncorrected**: the same with the formula as written below the records (``correction=off``).

A second table gives how far the formula is from the world before any report from a configuration
(``k`` = 0): per shape class (one GPU, several GPUs of one server, several servers), the median and the
10th-90th percentiles of the world's throughput over the formula's.

    python experiments/hops_estimator_error.py --seeds 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import sia_common as sc

from dlsched.clusters import load_cluster
from dlsched.core import Adaptivity, JobSpec, Placement, ThroughputObservation
from dlsched.estimators.hops_throughput import HopsThroughput, detect_pattern, shape_class
from dlsched.estimators.throughput_store import ThroughputStore
from dlsched.world.base import World
from dlsched.world.hops import GPUS, MODELS

CLUSTER = "hops-64"
KS = (0, 1, 2, 4, 8, 16, 32)
VARIANTS = ("formula", "type layer", "server layer", "server layer, uncorrected")


def job_of(model: str, seed: int) -> JobSpec:
    return JobSpec(f"{model}-{seed}", 0.0, model, 4, duration_s=3600.0, reference_gpu="1080ti",
                   adaptivity=Adaptivity.STRONG_SCALING, gpu_counts=(1, 2, 4, 8), per_gpu_batch=True)


def targets(world: World, gpu_type: str) -> list[tuple[tuple[int, int], ...]]:
    """The configurations scored on a type, as ``((node, GPUs), ...)``: one server of each host at 1, 2 and 4
    GPUs, and two servers (of different hosts where there are two) at 2 + 2 and 4 + 4."""
    nodes = world.cluster.nodes_of_type[gpu_type]
    by_host: dict[str, list[int]] = {}
    for n in nodes:
        by_host.setdefault(world.cluster.nodes[n].host, []).append(int(n))
    firsts = [ids[0] for ids in by_host.values()]
    out: list[tuple[tuple[int, int], ...]] = [((n, k),) for n in firsts for k in (1, 2, 4)]
    pair = firsts[:2] if len(firsts) > 1 else [int(n) for n in nodes[:2]]
    if len(pair) == 2:
        a, b = sorted(pair)
        out += [((a, 2), (b, 2)), ((a, 4), (b, 4))]
    return out


def placement_of(world: World, servers: tuple[tuple[int, int], ...]) -> Placement:
    return Placement.of([g for n, k in servers for g in list(world.cluster.gpus_of_node(n))[:k]])


def observe(world: World, phys: Any, placement: Placement, t: float) -> ThroughputObservation:
    """What the engine records of a job running on ``placement`` for a round (``Engine._observe``)."""
    rate = world.rate(phys, 0.0, placement)
    cfg = placement.configuration(world.cluster)
    timing: dict[str, Any] = {"step_time_s": rate.step_time_s, "sync_time_s": rate.sync_time_s,
                              **world.observation_details(phys, placement, rate)}
    return ThroughputObservation(time_s=t, gpu_type=cfg.gpu_type, num_nodes=cfg.num_nodes, num_gpus=cfg.num_gpus,
                                 local_bsz=int(rate.local_bsz or 0), accum_steps=1, **timing)


def errors_of(world: World, model: str, gpu_type: str,
              seed: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per variant, the MAPE over the type's targets after each ``k`` of :data:`KS` reports; and per
    :func:`shape_class`, the world's throughput over the formula's for each target at ``k`` = 0."""
    phys = world.physics(job_of(model, seed))
    job = phys.spec.job_id
    store = ThroughputStore("sqlite:///")
    full = HopsThroughput(store)
    typed = HopsThroughput(store, server_layer=False)
    plain = HopsThroughput(store, correction="off")
    goals = targets(world, gpu_type)
    truth = [world.rate(phys, 0.0, placement_of(world, s)).step_time_s for s in goals]
    _, profile = world.profile(phys, placement_of(world, ((goals[0][0][0], 1),)), 0.0)
    for obs in profile:
        store.record(job, obs, detect_pattern)
    rng = np.random.default_rng(seed * 7919 + sum(map(ord, model + gpu_type)))
    out: dict[str, list[float]] = {v: [] for v in VARIANTS}
    ratios: dict[str, list[float]] = {}
    done = 0
    for k in KS:
        while done < k:
            s = goals[int(rng.integers(len(goals)))]
            store.record(job, observe(world, phys, placement_of(world, s), 60.0 * (done + 1)), detect_pattern)
            done += 1
        per: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for s, true_step in zip(goals, truth, strict=True):
            gpus, nodes = sum(g for _, g in s), len(s)
            batch = phys.hops.batch
            answers = {"formula": full.formula(job, gpu_type, gpus, nodes) * gpus,
                       "type layer": typed.config_throughput(job, gpu_type, s),
                       "server layer": full.config_throughput(job, gpu_type, s),
                       "server layer, uncorrected": plain.config_throughput(job, gpu_type, s)}
            if k == 0 and answers["formula"] > 0:
                ratios.setdefault(shape_class(gpus, nodes), []).append(batch * gpus / true_step / answers["formula"])
            for v, tput in answers.items():
                predicted = batch * gpus / tput if tput > 0 else float("inf")
                per[v].append(abs(predicted - true_step) / true_step)
        for v in VARIANTS:
            out[v].append(float(np.mean(per[v])))
    store.close()
    return out, ratios


def tables(data: dict) -> dict[str, str]:
    """From ``experiments/results/hops_estimator_error.json``: ``summary`` (MAPE of the predicted iteration
    time per variant after k reports, mean over every job, GPU type and seed), ``by_type`` (the full
    estimator's, per GPU type) and ``bias`` (the world's throughput over the formula's at k = 0, per shape
    class)."""
    runs = data["runs"]
    header = ["variant", *[f"k={k}" for k in data["ks"]]]
    rows = []
    for v in VARIANTS:
        curves = np.array([r["summary"]["mape"][v] for r in runs])
        rows.append([v, *[f"{x:.1%}" for x in curves.mean(axis=0)]])
    by_type = []
    for t in GPUS:
        curves = np.array([r["summary"]["mape"]["server layer"] for r in runs if r["summary"]["gpu_type"] == t])
        if len(curves):
            by_type.append([t, *[f"{x:.1%}" for x in curves.mean(axis=0)]])
    bias = []
    for shape, label in (("one", "one GPU"), ("server", "several GPUs, one server"), ("spread", "several servers")):
        got = [x for r in runs for x in r["summary"].get("formula_ratio", {}).get(shape, [])]
        if got:
            p10, p50, p90 = np.percentile(got, [10, 50, 90])
            bias.append([label, str(len(got)), f"{p50:.2f}", f"{p10:.2f} - {p90:.2f}"])
    return {"summary": sc.table(header, rows), "by_type": sc.table(["GPU type (server layer)", *header[1:]], by_type),
            "bias": sc.table(["shape (k = 0)", "targets", "world / formula, median", "10th - 90th percentile"],
                             bias)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3, help="jobs per model and GPU type (default 3)")
    p.add_argument("--json", type=Path, default=sc.RESULTS_DIR / "hops_estimator_error.json",
                   help="result file (default experiments/results/hops_estimator_error.json)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    world = World(load_cluster(CLUSTER))
    configs, runs = [], []
    for seed in range(1, args.seeds + 1):
        for model in MODELS:
            for gpu_type in GPUS:
                mape, ratios = errors_of(world, model, gpu_type, seed)
                configs.append({"policy": "hops", "cluster": CLUSTER, "model": model, "gpu_type": gpu_type,
                                "seed": seed, "ks": list(KS), "targets": [list(map(list, s)) for s in
                                                                           targets(world, gpu_type)]})
                runs.append({"tag": f"{model} on {gpu_type}", "summary": {"model": model, "gpu_type": gpu_type,
                                                                          "seed": seed, "mape": mape,
                                                                          "formula_ratio": ratios}})
        print(f"seed {seed}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    from dlsched.sim.about import provenance

    arguments = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    payload = {**provenance(configs), "experiment": "hops_estimator_error", "args": arguments, "ks": list(KS),
               "wall_s": time.perf_counter() - t0, "runs": runs}
    sc.write_json(args.json, payload)
    for text in tables(payload).values():
        print(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
