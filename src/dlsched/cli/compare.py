"""``dlsched compare``: several run specifications on the same cluster, over one or several traces and seeds,
in parallel, in one table with each metric's spread.

Rows are policies (``--policies fifo,sia``) or full variants (``--variant gimbal:policy=lucid,coordinator=
gimbal``, ``--variants FILE.yaml``, see :mod:`dlsched.cli.variants`). Each row runs on every trace
(``--trace sia-philly:1..8`` is eight) and every seed; a row shows the mean and standard deviation over its
seeds, and over several traces the mean over the workloads with the standard deviation and range
(:mod:`dlsched.sim.spread`).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from dlsched.cli.common import Format, FormatOpt, WideOpt, app, guard, note, print_summaries, warn
from dlsched.cli.plugin_options import PluginOpt, load_plugin_options
from dlsched.cli.report import FiguresOpt, figure_formats
from dlsched.cli.run_options import (
    ClusterOpt,
    ConfigOpt,
    DataDirOpt,
    ForceOpt,
    JobsOpt,
    OrderingOpt,
    RoundOpt,
    SetOpt,
    WindowEndOpt,
    WindowStartOpt,
    build_config,
)
from dlsched.cli.variants import Variant, check_names, load_variants, parse_variant
from dlsched.core import InputError

DEFAULT_POLICIES = "fifo,tiresias,fifo-packed,gavel,sia"
#: ``NAME:1..8`` (a range of workload numbers) inside a trace spec.
_RANGE = re.compile(r"^(.*?)(\d+)\.\.(\d+)(.*)$")
#: Most traces one range may expand to (a typo like 1..1000 should not start a thousand runs).
MAX_TRACES = 100


def expand_traces(specs: list[str] | None) -> list[str | None]:
    """``--trace`` values with ``A..B`` ranges expanded (``sia-philly:1..8`` is eight traces); none given:
    the cluster's default trace."""
    out: list[str | None] = []
    for spec in specs or []:
        m = _RANGE.match(spec.strip())
        if m is None:
            out.append(spec.strip())
            continue
        lo, hi = int(m.group(2)), int(m.group(3))
        if hi < lo or hi - lo + 1 > MAX_TRACES:
            raise InputError(f"trace range {m.group(2)}..{m.group(3)} in {spec!r} must run upwards and hold at "
                             f"most {MAX_TRACES} traces", field="trace")
        out.extend(f"{m.group(1)}{n}{m.group(4)}" for n in range(lo, hi + 1))
    if len(set(out)) != len(out):
        raise InputError("a trace is named more than once", field="trace")
    return out or [None]


def _rows_of(policies: str | None, variant: list[str] | None, variants: Path | None) -> list[Variant]:
    rows: list[Variant] = []
    if policies is not None or (not variant and variants is None):
        names = [p.strip() for p in (policies or DEFAULT_POLICIES).split(",") if p.strip()]
        if not names:
            raise InputError("--policies is empty", field="policies")
        for name in names:
            pol, _, plc = name.partition("@")
            rows.append(Variant(name, {"policy": pol, **({"placement": plc} if plc else {})}, names_row=False))
    rows += [parse_variant(v) for v in variant or []]
    if variants is not None:
        rows += load_variants(variants)
    check_names(rows)
    return rows


def _seed_of(row: Variant, offset: int) -> str:
    base = row.fields.get("seed", "0")
    if not base.isdigit():
        raise InputError(f"variant {row.name}: seed must be a whole number >= 0, got {base!r}", field="seed")
    return str(int(base) + offset)


@app.command()
def compare(
    policies: Annotated[str | None, typer.Option("--policies", help="Comma-separated scheduler names; a name may "
                                                 "carry a placement as name@placement [default: "
                                                 f"{DEFAULT_POLICIES}, unless variants are given].")] = None,
    variant: Annotated[list[str] | None, typer.Option("--variant", help="A row as a full run specification: "
                                                      "NAME:policy=lucid,coordinator=gimbal,set.objective=jct,"
                                                      "world.KEY=V,round_s=360; repeatable.")] = None,
    variants: Annotated[Path | None, typer.Option("--variants", help="YAML file of variants: name -> keys "
                                                  "(set:, world: may nest).")] = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Runs per row and trace: seeds 0..N-1 of the scheduler "
                                       "and world, and for a generated or drawn trace (synthetic, synergy, "
                                       "gimbal-*, hops, copter, @tuned) its "
                                       "seed, seed+1, ... as well; tables show mean±std.")] = 1,
    config: ConfigOpt = None,
    cluster: ClusterOpt = None,
    trace: Annotated[list[str] | None, typer.Option("--trace", help="Named trace or trace file; A..B expands a "
                                                    "range (sia-philly:1..8); repeatable [default: the "
                                                    "cluster's].")] = None,
    ordering: OrderingOpt = None,
    set_: SetOpt = None,
    round_s: RoundOpt = None,
    jobs: JobsOpt = None,
    window_start: WindowStartOpt = None,
    window_end: WindowEndOpt = None,
    data_dir: DataDirOpt = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Worker processes (default: CPU count).")] = None,
    out_dir: Annotated[str | None, typer.Option("--out", help="Write the overlaid report.html, summary.json, "
                                                "config.json and per-run tables here (default: nothing is "
                                                "written).")] = None,
    force: ForceOpt = False,
    figures: FiguresOpt = None,
    plugin: PluginOpt = None,
    wide: WideOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Run several schedulers or variants on the same cluster and traces, in parallel, and print one table."""

    def go() -> None:
        load_plugin_options(plugin)  # before any name is looked up
        from dlsched.progress import progress_bar
        from dlsched.sim.about import describe_runs, header_line, row_fields
        from dlsched.sim.output import check_out_dir, write_outputs
        from dlsched.sim.run import data_notice, prepare, run_many
        from dlsched.sim.run_jobs import with_trace_seed_offset
        from dlsched.sim.sanity import restart_outliers
        from dlsched.sim.spread import identical, seed_row, workload_row

        formats = figure_formats(figures, out_dir)
        if out_dir is not None:  # a bad folder fails now, not after the simulations
            check_out_dir(out_dir, force=force)
        if seeds < 1:
            raise InputError(f"--seeds must be at least 1, got {seeds}", field="seeds")
        if workers is not None and workers < 1:
            raise InputError(f"--workers must be at least 1, got {workers}", field="workers")
        rows_spec = _rows_of(policies, variant, variants)
        traces = expand_traces(trace)
        configs = []
        trace_varied = False
        for spec in rows_spec:
            own = {k: v for k, v in spec.fields.items() if k != "seed"}
            for tr in traces:
                for s in range(seeds):
                    flags: dict[str, Any] = dict(cluster=cluster, trace=tr, ordering=ordering, round_s=round_s,
                                                 jobs=jobs, data_dir=data_dir, window_start=window_start,
                                                 window_end=window_end)
                    flags.update(own)
                    flags["seed"] = _seed_of(spec, s)
                    if spec.names_row:
                        flags["label"] = spec.name
                    cfg = build_config(config, [*(set_ or []), *spec.sets], **flags)
                    if seeds > 1:
                        moved = with_trace_seed_offset(cfg, s)
                        trace_varied = trace_varied or moved is not None
                        cfg = moved or cfg
                    configs.append(cfg)
        for cfg in configs[::seeds]:  # validate everything up front: bad input fails before any run
            prepare(cfg)
        if seeds > 1:
            what = "the scheduler, world and trace seeds" if trace_varied else (
                "the scheduler and world seeds (the trace is fixed: a file or a named trace)")
            note(f"--seeds {seeds}: each row runs {seeds} times per trace, varying {what}")
        t0 = time.perf_counter()
        with progress_bar(len(configs), "compare") as advance:
            runs = run_many(configs, workers, on_result=lambda i, r: advance())
        for line in dict.fromkeys(n for r in runs for n in (data_notice(r.data), *r.notices) if n):
            warn(line)
        rows: list[dict[str, Any]] = []
        unchanged: list[str] = []
        per_row = seeds * len(traces)
        for i in range(0, len(runs), per_row):
            group = runs[i:i + per_row]
            per_trace: list[dict[str, Any]] = []
            still: list[str] = []
            for j in range(0, per_row, seeds):
                reps = group[j:j + seeds]
                row = seed_row([r.summary for r in reps])
                same = identical(reps)
                if same:
                    still.append(reps[0].trace_name)
                row.update(policy=reps[0].label, seed=reps[0].config.seed, seeds=seeds,
                           seeds_changed_nothing=same, **row_fields(reps))
                per_trace.append(row)
            if still:  # the row's seeds changed nothing on these traces
                label = group[0].label
                unchanged.append(label if len(still) == len(per_trace) else f"{label} on {', '.join(still)}")
            if len(per_trace) == 1:
                rows.append(per_trace[0])
            else:
                row = workload_row(per_trace)
                row.update(policy=group[0].label, seed=group[0].config.seed, seeds=seeds,
                           trace=[r.trace_name for r in group[::seeds]],
                           seeds_changed_nothing=all(r["seeds_changed_nothing"] for r in per_trace),
                           **row_fields(group))
                rows.append(row)
        if unchanged:
            shown = ", ".join(unchanged[:8]) + (f" and {len(unchanged) - 8} more" if len(unchanged) > 8 else "")
            note(f"--seeds {seeds} changed nothing for {shown}: the runs are identical (a deterministic policy in "
                 f"a world without randomness), so their std of 0 is no measure of spread")
        for line in restart_outliers(rows):
            warn(line)
        took = f"{len(configs)} runs in {time.perf_counter() - t0:.1f} s"
        if out_dir is not None:
            folder = write_outputs(out_dir, runs, rows, force=force, figures=formats)
            note(f"{took}; wrote {folder}/ (report.html, summary.json, config.json, per-run tables)")
        else:
            note(f"{took}; give --out DIR to keep the report and per-run tables")
        if len(traces) > 1 and fmt is Format.table:
            note(f"each row: mean±std over {len(traces)} workloads (each the mean of its {seeds} seed"
                 f"{'s' if seeds > 1 else ''}), the range below it")
        print_summaries(rows, fmt, header=header_line(describe_runs(runs)), wide=wide)

    guard(go)
