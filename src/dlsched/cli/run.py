"""``dlsched run``: a scheduler preset driving real PyTorch training jobs on Ray, round by round."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import Format, FormatOpt, WideOpt, app, fail, guard, note, print_summaries
from dlsched.cli.run_options import ForceOpt, SetOpt, parse_set
from dlsched.core import InputError


@app.command("run")
def run_jobs(
    cluster: Annotated[str, typer.Option("--cluster", help="ray-local-4 (built in: 4 emulated nodes), a "
                                         "cluster preset or a cluster file.")] = "ray-local-4",
    trace: Annotated[str, typer.Option("--trace", help="runtime-demo (built in) or a runtime trace YAML "
                                       "(jobs: [...]).")] = "runtime-demo",
    policy: Annotated[str, typer.Option("--policy", help="Scheduler preset (see 'dlsched policies').")] = "fifo",
    set_: SetOpt = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the scheduler's random choices.")] = 0,
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster to run on, whose nodes carry "
                                                "the dlsched_node_* resources [default: start Ray here].")] = None,
    round_s: Annotated[float, typer.Option("--round-s", help="Scheduling round, wall-clock seconds.")] = 20.0,
    round_start: Annotated[str, typer.Option("--round-start", help="When a round starts: 'boundary' (round_s "
                                             "after the last one, as the simulator) or 'early' (once every job "
                                             "of the last round has reported).")] = "boundary",
    max_time_s: Annotated[float | None, typer.Option("--max-time-s", help="Stop after this many wall-clock "
                                                     "seconds even if jobs remain.")] = None,
    checkpoint_dir: Annotated[Path, typer.Option("--checkpoint-dir", help="Shared folder for the jobs' "
                                                 "checkpoints (every Ray node must see it).")] =
        Path("dlsched-checkpoints"),
    out_dir: Annotated[str | None, typer.Option("--out", help="Write jobs.csv, rounds.csv, summary.json, "
                                                "config.json and reports.json (every report and observation "
                                                "of every job) here.")] = None,
    force: ForceOpt = False,
    wide: WideOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Run real training jobs on Ray under a scheduler preset and print the run's summary."""

    def go() -> None:
        from dlsched.outputs import check_output_dir
        from dlsched.runtime.driver import RuntimeJobFailed, RuntimeOptions
        from dlsched.runtime.session import config_record, run, write_run_outputs

        if not 1.0 <= round_s <= 86400.0:
            raise InputError(f"--round-s must lie in [1, 86400], got {round_s:g}", field="round_s")
        if round_start not in ("boundary", "early"):
            raise InputError(f"--round-start must be 'boundary' or 'early', got {round_start!r}", field="round_start")
        if max_time_s is not None and not 0 < max_time_s <= 30 * 86400.0:
            raise InputError(f"--max-time-s must lie in (0, 2592000], got {max_time_s:g}", field="max_time_s")
        if out_dir is not None:  # a bad folder fails now, not after the run
            check_output_dir(out_dir, force=force)
        options = RuntimeOptions(round_s=round_s, round_start="early" if round_start == "early" else "boundary",
                                 checkpoint_dir=checkpoint_dir, max_time_s=max_time_s)
        settings = parse_set(set_)
        try:
            summary, result = run(cluster, trace, policy, settings=settings, seed=seed, address=address,
                                  options=options)
        except RuntimeJobFailed as exc:
            raise fail(exc, 1) from None
        if out_dir is not None:
            config = config_record(cluster, trace, policy, settings=settings, seed=seed, address=address,
                                   options=options, summary=summary)
            folder = write_run_outputs(out_dir, summary, result, config, force=force)
            note(f"wrote {folder}/ (jobs.csv, rounds.csv, summary.json, config.json, reports.json)")
        restarts = sum(r.restarts for r in result.jobs)
        note(f"{summary['completed']}/{summary['jobs']} jobs done in {result.wall_s:.0f} s wall clock, "
             f"{len(result.rounds)} rounds, {restarts} restarts; GPUs {summary['gpu_emulation']}")
        header = f"runtime: {policy} on {summary['cluster']} ({trace})"
        if settings:
            header += " | set " + ",".join(f"{k}={v}" for k, v in settings.items())
        print_summaries([summary], fmt, header=header, wide=wide)

    guard(go)
