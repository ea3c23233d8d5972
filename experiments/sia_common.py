"""Shared runner for the Sia (thesis chapter 3) experiments: cached, parallel runs, result files and tables.

Each experiment is a list of run specs: a :class:`~dlsched.sim.config.RunConfig`, a ``tag`` naming the row it
belongs to, and optionally an ``extract`` function that adds experiment-specific numbers to the summary from
the run's records. Runs go through :func:`dlsched.sim.run.run_many` (at most two worker processes).

Cache. Each run's summary is cached as JSON under ``experiments/results/sia/`` (file name = a hash of the
configuration), with the provenance :func:`dlsched.sim.about.provenance` gives (commit, dirty, dlsched version,
the resolved configuration) and the requested configuration. A cached run is reused only when its requested
configuration and extract function are the current ones and it was made by the same code
(:func:`dlsched.sim.about.same_code`: same commit, same version, and for a dirty tree the same uncommitted
changes); otherwise it is run again and the file replaced. So tables never mix runs of different code.

Result file. Every experiment writes ``experiments/results/<experiment>.json`` (:func:`write_results`):
provenance, the experiment's arguments, the configuration of every run (``configs[i]`` belongs to
``runs[i]``) and each run's tag and summary. Its tables are rendered from that file alone (each script's
``tables(data)``), which is how ``experiments/make_results.py`` regenerates ``docs/results.md``. Round lengths
are the schedulers' own (60 s for Sia and Pollux, 360 s for Gavel, thesis section 3.4.3).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Experiment result files; the per-run cache is the ``sia`` folder inside.
RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS = RESULTS_DIR / "sia"
#: Gavel and other rigid schedulers run TunedJobs (thesis, section 3.4.3).
TUNED = {"gavel", "shockwave", "themis"}
NAMES = {"sia": "Sia", "pollux": "Pollux", "gavel": "Gavel+TJ", "shockwave": "Shockwave+TJ", "themis": "Themis+TJ"}
MAX_WORKERS = 2

#: Adds numbers to a run's summary from its records (runs in this process, after the run).
Extract = Callable[[Any], dict[str, Any]]


def spec(policy: str, cluster: str, trace: str, *, settings: dict[str, Any] | None = None,
         round_s: float | None = None, seed: int = 0, tuned: bool | None = None, tag: str = "",
         extract: Extract | None = None, **fields: Any) -> dict[str, Any]:
    """One run; Gavel gets TunedJobs (``@tuned``) unless told otherwise. ``fields`` are more RunConfig fields."""
    from dlsched.sim.config import RunConfig

    tuned = policy in TUNED if tuned is None else tuned
    if tuned and not trace.endswith("@tuned"):
        trace = f"{trace}@tuned"
    config = RunConfig(policy=policy, cluster=cluster, trace=trace, round_s=round_s, settings=settings or {},
                       seed=seed, trace_seed=seed, **fields)
    return {"config": config, "tag": tag, "extract": extract}


def key(s: dict[str, Any]) -> str:
    extract = s.get("extract")
    body = s["config"].model_dump_json() + (f"|{extract.__module__}.{extract.__qualname__}" if extract else "")
    return hashlib.sha1(body.encode()).hexdigest()[:16]


def cache_path(s: dict[str, Any]) -> Path:
    cfg = s["config"]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{cfg.policy}-{cfg.trace}")
    return RESULTS / f"{safe}-{key(s)}.json"


def _extract_name(s: dict[str, Any]) -> str | None:
    extract = s.get("extract")
    return f"{extract.__module__}.{extract.__qualname__}" if extract else None


def _record(s: dict[str, Any], records: Any) -> dict[str, Any]:
    """The cached form of one finished run: provenance with its resolved configuration, the requested
    configuration (what the cache is checked against), its tag and summary."""
    from dlsched.sim.about import provenance
    from dlsched.sim.metrics import ftf_readings
    from dlsched.sim.run import window_jobs

    summary = dict(records.summary)
    summary.update(contention(records.rounds))
    summary["ftf_readings"] = ftf_readings(window_jobs(records.jobs, records.config.summary_jobs))
    if s.get("extract"):
        summary.update(s["extract"](records))
    summary["wall_s"] = records.wall_s
    return {**provenance([_jsonable(records.config_record())]),
            "requested": _jsonable(s["config"].model_dump(mode="json")), "extract": _extract_name(s),
            "tag": s["tag"], "summary": _jsonable(summary)}


def _save(s: dict[str, Any], rec: dict[str, Any]) -> None:
    from dlsched.outputs import atomic_file

    with atomic_file(cache_path(s)) as tmp:
        tmp.write_text(json.dumps(rec, indent=1) + "\n")


def valid(s: dict[str, Any], rec: Any) -> bool:
    """Whether a cached record may stand for spec ``s`` now: same requested configuration and extract
    function, made by the same code (commit, dlsched version, uncommitted changes)."""
    from dlsched.sim.about import same_code

    return (isinstance(rec, dict) and isinstance(rec.get("summary"), dict) and isinstance(rec.get("configs"), list)
            and len(rec["configs"]) == 1 and same_code(rec)
            and rec.get("requested") == _jsonable(s["config"].model_dump(mode="json"))
            and rec.get("extract") == _extract_name(s))


def contention(rounds: list) -> dict[str, float | None]:
    """Jobs contending for GPUs (active jobs per round, thesis table 3.3 "Contention"): average and max."""
    act = [r.active_jobs for r in rounds if r.active_jobs > 0]
    return {"contention_avg": sum(act) / len(act) if act else None,
            "contention_max": float(max(act)) if act else None}


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "item"):
        return x.item()
    return x


def load_cached(s: dict[str, Any]) -> dict[str, Any] | None:
    """The cached record of ``s`` when there is one and it is :func:`valid`, else None (the run is re-run)."""
    path = cache_path(s)
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return rec if valid(s, rec) else None


def run_all(specs: list[dict[str, Any]], workers: int = MAX_WORKERS, force: bool = False) -> list[dict | None]:
    """Run the specs not validly cached (at most ``workers`` processes); records in spec order.

    A record is the cached form (:func:`_record`) plus ``spec``: ``{"tag", "config"}`` (the spec's tag and
    the resolved configuration). A run that raises is reported on stderr and its slot is ``None``.
    """
    from dlsched.progress import progress_bar
    from dlsched.sim.about import code_state
    from dlsched.sim.run import run_many

    code_state()  # the code as it is at the start is what the runs run, whatever happens to the checkout later
    out: list[dict | None] = [None if force else load_cached(s) for s in specs]
    for s, r in zip(specs, out, strict=True):  # a cached run may come from another experiment: use our tag
        if r is not None:
            r["tag"] = s["tag"]
            r["spec"] = {"tag": s["tag"], "config": r["configs"][0]}
    todo = [i for i, r in enumerate(out) if r is None]
    cached = len(specs) - len(todo)
    print(f"{len(specs)} runs: {cached} cached, {len(todo)} to run ({workers} workers)", file=sys.stderr)
    if not todo:
        return out
    t0 = time.perf_counter()
    finished = 0

    def report(j: int, result: Any) -> None:
        nonlocal finished
        finished += 1
        i = todo[j]
        s, cfg = specs[i], specs[i]["config"]
        where = f"[{finished}/{len(todo)}] {cfg.policy} {cfg.trace} {s['tag']}"
        if isinstance(result, BaseException):
            print(f"  {where} FAILED: {result!r}", file=sys.stderr, flush=True)
            return
        rec = _record(s, result)
        _save(s, rec)
        out[i] = rec = {**rec, "spec": {"tag": s["tag"], "config": rec["configs"][0]}}
        print(f"  {where} avg_jct={hours(rec['summary']['avg_jct_s'])} ({rec['summary']['wall_s']:.0f}s, "
              f"total {time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)

    with progress_bar(len(todo), "runs") as advance:
        def step(j: int, result: Any) -> None:
            report(j, result)
            advance()

        run_many([specs[i]["config"] for i in todo], max(1, min(workers, MAX_WORKERS)), on_result=step,
                 return_exceptions=True)
    return out


def hours(x: float | None) -> str:
    return "-" if x is None else f"{x / 3600:.2f}h"


def mean_std(xs: Iterable[float | None], scale: float = 1.0, fmt: str = "{:.2f}") -> str:
    vals = [x / scale for x in xs if x is not None]
    if not vals:
        return "-"
    m = sum(vals) / len(vals)
    if len(vals) == 1:
        return fmt.format(m)
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
    return f"{fmt.format(m)} ± {fmt.format(sd)}"


def mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


#: The metrics of the thesis's tables: (summary key, column name, scale, format).
METRICS = [("avg_jct_s", "avg JCT (h)", 3600.0, "{:.2f}"), ("p99_jct_s", "p99 JCT (h)", 3600.0, "{:.1f}"),
           ("makespan_s", "makespan (h)", 3600.0, "{:.1f}"),
           ("gpu_hours_per_job", "GPU-h/job", 1.0, "{:.2f}"), ("restarts_per_job", "restarts/job", 1.0, "{:.1f}")]


def group_rows(records: list[dict | None], group: str = "tag",
               metrics: list[tuple[str, str, float, str]] = METRICS) -> tuple[list[str], list[list[str]]]:
    """One row per distinct ``spec[group]`` (in first-seen order): mean ± std over its runs."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        if r is None:
            continue
        groups.setdefault(str(r["spec"][group]), []).append(r["summary"])
    header = [group, "runs", *(m[1] for m in metrics)]
    rows = []
    for g, sums in groups.items():
        row = [g, str(len(sums))]
        for k, _, scale, fmt in metrics:
            row.append(mean_std([s.get(k) for s in sums], scale, fmt))
        rows.append(row)
    return header, rows


def table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-markdown table."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]

    def fmt(r: list) -> str:
        return "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([fmt(header), sep, *(fmt(r) for r in rows)])


def parser(description: str, default_workloads: int, name: str = "") -> argparse.ArgumentParser:
    """The common options; ``name`` is the experiment's (its result file is ``experiments/results/NAME.json``)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--workloads", "--seeds", dest="workloads", type=int, default=default_workloads,
                   help=f"number of workloads (trace seeds) per trace family (default {default_workloads}); "
                        f"tables give the mean and standard deviation over them")
    p.add_argument("--workers", type=int, default=MAX_WORKERS, help="worker processes (at most 2)")
    p.add_argument("--force", action="store_true", help="re-run even cached runs")
    default = f"experiments/results/{name}.json" if name else "none"
    p.add_argument("--json", type=_json_target, default=None,
                   help=f"result file: provenance, every run's configuration and summary (default {default})")
    return p


def _json_target(text: str) -> Path:
    """``--json``: checked when the arguments are read, so a bad path fails before hours of runs."""
    from dlsched.core import InputError
    from dlsched.outputs import check_output_file

    try:
        return check_output_file(text, "--json")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def total_wall(records: Sequence[dict | None]) -> float:
    return sum(r["summary"].get("wall_s", 0.0) for r in records if r is not None)


def write_json(path: Path | None, payload: Any) -> None:
    from dlsched.outputs import atomic_file

    if path is not None:
        with atomic_file(path) as tmp:
            tmp.write_text(json.dumps(_jsonable(payload), indent=1) + "\n")


def write_results(name: str, args: argparse.Namespace, records: list[dict | None]) -> dict[str, Any]:
    """Write the experiment's result file (``--json``, default ``experiments/results/NAME.json``) and return
    its content: provenance, ``experiment``, ``args``, ``configs`` and ``runs`` (tag and summary; ``configs[i]``
    is the configuration of ``runs[i]``), ``failed`` (runs that raised) and ``wall_s`` (simulation time summed
    over the runs, cached ones included)."""
    from dlsched.sim.about import provenance

    done = [r for r in records if r is not None]
    arguments = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    payload = {**provenance([r["spec"]["config"] for r in done]), "experiment": name, "args": arguments,
               "failed": len(records) - len(done), "wall_s": total_wall(done),
               "runs": [{"tag": r["spec"]["tag"], "summary": r["summary"]} for r in done]}
    write_json(args.json or RESULTS_DIR / f"{name}.json", payload)
    return payload


def records_of(data: dict[str, Any]) -> list[dict | None]:
    """A result file's runs in the form :func:`run_all` returns (``spec`` with tag and configuration)."""
    return [{"spec": {"tag": run["tag"], "config": cfg}, "summary": run["summary"]}
            for run, cfg in zip(data["runs"], data["configs"], strict=True)]


#: Metrics :func:`comparison` puts side by side: (summary key, name).
RATIO_METRICS = (("avg_jct_s", "avg JCT"), ("makespan_s", "makespan"), ("restarts_per_job", "restarts/job"))


def comparison(records: list[dict | None], pairs: Mapping[tuple[str, str], tuple[float | None, ...]],
               metrics: tuple[tuple[str, str], ...] = RATIO_METRICS) -> str:
    """A table of ratios between rows (means over their runs), ours next to the thesis's: one row per
    (tag A, tag B) of ``pairs``, whose value gives the thesis's A / B ratio per metric (None: not published)."""
    by: dict[str, list[dict]] = {}
    for r in records:
        if r is not None:
            by.setdefault(str(r["spec"]["tag"]), []).append(r["summary"])
    header = ["ratio"]
    for _, name in metrics:
        header += [f"{name}, ours", "thesis"]
    rows = []
    for (a, b), thesis in pairs.items():
        if a not in by or b not in by:
            continue
        row = [f"{a} / {b}"]
        for (k, _), t in zip(metrics, thesis, strict=True):
            ma, mb = mean(s.get(k) for s in by[a]), mean(s.get(k) for s in by[b])
            row += [f"{ma / mb:.2f}" if ma is not None and mb else "-", "-" if t is None else f"{t:.2f}"]
        rows.append(row)
    return table(header, rows)


def best(records: list[dict | None], metrics: list[tuple[str, str, float, str]] = METRICS) -> str:
    """A table naming, per metric and workload family (the tag's part before ``/``; per world too when the tag
    ends in `` [world]``), the row with the lowest mean: who wins on what, computed rather than read off by eye."""
    by: dict[str, dict[str, list[dict]]] = {}
    for r in records:
        if r is not None:
            base, bracket, world = str(r["spec"]["tag"]).partition(" [")  # "family/name [world]": per world
            family, _, name = base.rpartition("/")
            by.setdefault((family or "all") + (f" [{world}" if bracket else ""), {}).setdefault(
                name, []).append(r["summary"])
    rows = []
    for k, label, _, _ in metrics:
        row = [f"{label}, lowest"]
        for rows_of in by.values():
            means: dict[str, float] = {}
            for name, sums in rows_of.items():
                if (m := mean(s.get(k) for s in sums)) is not None:
                    means[name] = m
            row.append(min(means, key=means.__getitem__) if means else "-")
        rows.append(row)
    return table(["metric", *by], rows)


def paper_number(text: str) -> float | None:
    """The number a thesis cell states (``"0.6 ± 0.1"`` -> 0.6); None for ``-``, ranges and bounds."""
    head = text.split("±")[0].strip().rstrip("%")
    try:
        return float(head)
    except ValueError:
        return None


def paper_vs_ours(records: list[dict | None], items: list[tuple[str, str, str, str]],
                  metrics: list[tuple[str, str, float, str]] = METRICS, threshold: float = 0.15) -> str:
    """The thesis's figure beside ours under every world the runs used, and our difference from it.

    ``items`` are (row name, tag without its `` [world]`` suffix, summary key, the thesis's cell as printed).
    Worlds are the tags' `` [world]`` suffixes (one unnamed world when there are none). A difference beyond
    ``threshold`` is marked ``**``; docs/fidelity.md gives the reason for every one of them.
    """
    fmt = {k: (label, scale, f) for k, label, scale, f in metrics}
    by: dict[tuple[str, str], list[dict]] = {}
    worlds: dict[str, None] = {}
    for r in records:
        if r is None:
            continue
        base, bracket, world = str(r["spec"]["tag"]).partition(" [")
        world = world.rstrip("]") if bracket else ""
        worlds.setdefault(world)
        by.setdefault((base, world), []).append(r["summary"])
    header = ["row", "metric", "thesis", *[f"ours, {w or 'this world'}" for w in worlds],
              *[f"vs thesis, {w or 'this world'}" for w in worlds]]
    rows = []
    for name, base, key, paper in items:
        label, scale, f = fmt[key]
        p = paper_number(paper)
        ours, diffs = [], []
        for w in worlds:
            v = mean(s.get(key) for s in by.get((base, w), []))
            ours.append("-" if v is None else f.format(v / scale))
            if v is None or p is None or p == 0:
                diffs.append("-")
            else:
                d = v / scale / p - 1.0
                diffs.append(f"{d:+.0%}" + (" **" if abs(d) > threshold else ""))
        rows.append([name, label, paper, *ours, *diffs])
    return table(header, rows)


def finish(name: str, args: argparse.Namespace, records: list[dict | None],
           tables: Callable[[dict], dict[str, str]]) -> None:
    """Write the experiment's result file and print the tables rendered from it (the ones ``make results``
    puts in the docs), then the simulation time."""
    for text in tables(write_results(name, args, records)).values():
        print(text + "\n")
    print(f"simulation time (sum over runs): {total_wall(records) / 60:.1f} min")
