"""``dlsched whatif`` and ``dlsched world fit``: a service's own jobs replayed under other policies, and the
world fitted to their reports (docs/whatif.md). Both read the service without writing to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dlsched.cli.common import Format, FormatOpt, app, guard, note, out, warn
from dlsched.cli.plugin_options import PluginOpt, load_plugin_options
from dlsched.cli.run_options import ForceOpt, SetOpt
from dlsched.core import InputError

StateOpt = Annotated[Path | None, typer.Option("--state", help="The service's state folder (its dlsched.db is "
                                               "opened read-only).")]
ServerOpt = Annotated[str | None, typer.Option("--server", help="A running service's URL (an admin's token in "
                                               "--token or DLSCHED_TOKEN).")]
TokenOpt = Annotated[str | None, typer.Option("--token", envvar="DLSCHED_TOKEN", help="An admin's API token.")]
SinceOpt = Annotated[str | None, typer.Option("--since", help="Only jobs submitted from then on (Unix s or ISO "
                                              "8601).")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="Only jobs submitted before then.")]
UserOpt = Annotated[str | None, typer.Option("--user", help="Only this user's jobs.")]
ByOpt = Annotated[str, typer.Option("--by", help="Fit step times per distinct command (command: the spec's "
                                    "model, else its command) or per job (job).")]

TypesOpt = Annotated[str, typer.Option("--type-factors", help="The GPU types' step-time factors: the catalog's "
                                       "relative speeds (catalog: what an emulated cluster stretches steps by) "
                                       "or fitted to the reports (fitted).")]

world_app = typer.Typer(help="Fit a simulator world to a service's reports.", no_args_is_help=True)

#: The table's columns: (title, key, divisor).
_COLUMNS = (("policy", "policy", None), ("done", "completed", None), ("avg JCT s", "avg_jct_s", 1.0),
            ("p99 JCT s", "p99_jct_s", 1.0), ("makespan s", "makespan_s", 1.0), ("wait s", "avg_wait_s", 1.0),
            ("util", "utilization", 1.0), ("restarts/job", "restarts_per_job", 1.0), ("FTF max", "ftf_max", 1.0),
            ("unfair", "ftf_unfair_frac", 1.0))


@world_app.command("fit")
def world_fit(out_file: Annotated[Path, typer.Argument(metavar="OUT.json", help="The fitted world (a profiles "
                                                       "file with a per-job section).")],
              state: StateOpt = None, server: ServerOpt = None, token: TokenOpt = None, since: SinceOpt = None,
              until: UntilOpt = None, user: UserOpt = None, by: ByOpt = "command",
              type_factors: TypesOpt = "catalog",
              cluster: Annotated[str | None, typer.Option("--cluster", help="The cluster the service ran "
                                                          "[default: what it recorded].")] = None) -> None:
    """Fit step times, start-up costs and statistical efficiency to what the service's jobs reported."""

    def go() -> None:
        from dlsched.outputs import check_output_file
        from dlsched.replay.export import parse_time, select_jobs
        from dlsched.replay.fit import fit_world
        from dlsched.replay.history import load_history
        from dlsched.runtime.workload import load_cluster

        check_output_file(out_file, "OUT.json")
        history = load_history(state, server, token)
        name = cluster or history.service.get("cluster")
        selection = select_jobs(history, since=parse_time(since, "since"), until=parse_time(until, "until"),
                                user=user)
        world = fit_world(history, selection, load_cluster(name) if name else None, by=by,
                           type_factors=type_factors)
        tmp = out_file.with_name(f".{out_file.name}.tmp")
        tmp.write_text(json.dumps(world, indent=1))
        tmp.replace(out_file)
        silent = [k for k, v in world["jobs"].items() if not v["reported"]]
        if silent:
            warn(f"{', '.join(silent)} reported nothing: their time held is kept (marked reported: false)")
        note(f"fitted {len(world['jobs'])} jobs ({len(world['jobs']) - len(silent)} from their reports); "
             f"wrote {out_file}")

    guard(go)


def _cell(row: dict[str, Any], key: str, scale: float | None) -> str:
    value = row.get(key)
    if value is None:
        return "-"
    if scale is None:
        return f"{value:g}" if isinstance(value, float) else str(value)
    text = f"{value / scale:.2f}"
    std = row.get(f"{key}_std")
    return f"{text}±{std / scale:.2f}" if std is not None and int(row.get("runs", 1) or 1) > 1 else text


def _where(worst: dict[str, Any]) -> str:
    """Where the worst job ran: measured and replayed JCT and GPU type."""
    if not worst.get("job"):
        return ""
    types = (f"on {worst['measured_gpu_type']}" if worst.get("measured_gpu_type") == worst.get("replayed_gpu_type")
             else f"on {worst.get('measured_gpu_type') or '-'}, replayed on {worst.get('replayed_gpu_type') or '-'}")
    return f" ({worst['replayed_jct_s']:.1f} s vs {worst['measured_jct_s']:.1f} s, {types})"


def _elsewhere(f: dict[str, Any]) -> str:
    other = f.get("other_type") or []
    if not other:
        return "every job replayed on the GPU type it ran on"
    return f"{len(other)} jobs replayed on another GPU type than they ran on: {', '.join(other[:8])}"


def print_tables(result: Any) -> None:
    """The measured row, each policy's row (mean±std over seeds), the fidelity line and the notes."""
    table = Table(show_lines=False)
    for title, _, _ in _COLUMNS:
        table.add_column(title, justify="left" if title == "policy" else "right")
    for row in [result.measured, *result.rows]:
        if row.get("error") and row.get("avg_jct_s") is None:
            table.add_row(f"{row['policy']} (not run)", *["-"] * (len(_COLUMNS) - 1))
            continue
        label = row["policy"] + (" *" if row.get("error") else "")
        table.add_row(label, *(_cell(row, key, scale) for _, key, scale in _COLUMNS[1:]))
    out.print(table)
    f = result.fidelity

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x * 100:+.1f}%"

    worst = f.get("job_jct_worst") or {}
    out.print(f"fidelity: {f['policy']} vs measured: avg JCT {f['replayed_avg_jct_s']:.1f} s vs "
              f"{f['measured_avg_jct_s']:.1f} s ({pct(f['avg_jct_rel_err'])}), makespan "
              f"{f['replayed_makespan_s'] or 0:.1f} s vs {f['measured_makespan_s']:.1f} s "
              f"({pct(f['makespan_rel_err'])}), per-job JCT error median "
              f"{(f['job_jct_median_abs_err'] or 0) * 100:.0f}%, worst {worst.get('job', '-')} "
              f"{pct(worst.get('rel_err'))}{_where(worst)}; {_elsewhere(f)}", markup=False, highlight=False)
    for line in result.notes:
        out.print(f"note: {line}", markup=False, highlight=False)


@app.command()
def whatif(
    state: StateOpt = None, server: ServerOpt = None, token: TokenOpt = None,
    policies: Annotated[str, typer.Option("--policies", help="Comma-separated policies to replay.")] =
    "sia,pollux,fifo,hops",
    since: SinceOpt = None, until: UntilOpt = None, user: UserOpt = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Runs per policy (seeds 0..N-1); rows show mean±std.")] = 1,
    out_dir: Annotated[str | None, typer.Option("--out", help="Write report.html (as dlsched report does), "
                                                "whatif.json and the fitted world here.")] = None,
    set_: SetOpt = None,
    variant: Annotated[list[str] | None, typer.Option("--variant", help="A row as a full run specification, as "
                                                      "in compare; repeatable.")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="The cluster the service ran [default: what "
                                                "it recorded].")] = None,
    ran: Annotated[str | None, typer.Option("--ran", help="The policy the service ran [default: what it "
                                            "recorded].")] = None,
    by: ByOpt = "command",
    type_factors: TypesOpt = "catalog",
    workers: Annotated[int | None, typer.Option("--workers", help="Worker processes (default: CPU count).")] = None,
    at: Annotated[str | None, typer.Option("--at", help="Start the replay from the cluster's state at this time "
                                           "(Unix s or ISO 8601): jobs finished by then are left out, running "
                                           "ones start on the GPUs they held with the work they had done, "
                                           "queued ones wait.")] = None,
    plugin: PluginOpt = None,
    force: ForceOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Replay the service's finished jobs under each policy in a world fitted to their reports, beside what
    the service measured and the replay of the policy it ran (the fidelity row; a service started with
    --plugin stages needs the same --plugin files here)."""

    def go() -> None:
        load_plugin_options(plugin)
        from dlsched.replay.whatif import whatif as run_whatif
        from dlsched.replay.whatif_out import write_whatif
        from dlsched.sim.output import check_out_dir

        if out_dir is not None:
            check_out_dir(out_dir, force=force)
        if workers is not None and workers < 1:
            raise InputError(f"--workers must be at least 1, got {workers}", field="workers")
        result = run_whatif(state, policies=policies, server=server, token=token, since=since, until=until,
                            user=user, seeds=seeds, settings=set_ or [], variants=variant or [], cluster=cluster,
                            ran=ran, by=by, type_factors=type_factors, workers=workers, at=at)
        if out_dir is not None:
            folder = write_whatif(out_dir, result, force=force)
            note(f"wrote {folder}/ (report.html, whatif.json, world.json, per-run tables)")
        if fmt is Format.json:
            typer.echo(json.dumps(result.tables()))
        else:
            print_tables(result)

    guard(go)
