"""``dlsched variability``: PAL's per-GPU variability profiles and the PM-score bins a policy would use.

``show`` prints, per application class, the profiled GPUs, the K the silhouette sweep chose, the bins
(centroid and GPU count; outliers keep their own scores) and the L x V matrix's traversal order. ``fit``
computes the same bins and writes them as JSON and, with ``--plot``, as histograms with the centroids marked
(PAL's figure 5). A PROFILE is a family (``longhorn``, ``frontera``, ``ls6``, ``testbed32``; read from the
data directory) or a profile CSV (see :func:`dlsched.estimators.pm_scores.load_profile_file`). Input problems
print one ``error:`` line on stderr and exit with status 2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from dlsched.cli.common import Format as Fmt
from dlsched.cli.common import fail as _fail_line
from dlsched.core.errors import InputError
from dlsched.estimators.kmeans_1d import K_MAX, K_MIN
from dlsched.estimators.locality import lv_matrix
from dlsched.estimators.pm_bins import OUTLIER_SIGMA, PmBins, fit_bins
from dlsched.estimators.pm_profiles import VariabilityProfile, resolve_profile, sample_cluster, sample_runs
from dlsched.outputs import atomic_file, check_output_file

app = typer.Typer(help="PAL's per-GPU variability profiles and PM-score bins.", no_args_is_help=True)

_PROFILE_HELP = "profile family (longhorn, frontera, ls6, testbed32) or a profile CSV file"


def _fail(exc: Exception) -> typer.Exit:
    return _fail_line(exc)


def _load(profile: str, gpus: int | None, seed: int, runs: bool) -> VariabilityProfile:
    if gpus is not None and gpus < 1:
        raise InputError(f"--gpus must be at least 1, got {gpus}", field="gpus")
    if runs:
        if gpus is None:
            raise InputError("--runs samples a simulated cluster: give --gpus", field="runs")
        return sample_runs(profile, gpus, seed)
    prof = resolve_profile(profile)
    return prof if gpus is None else sample_cluster(prof, gpus, seed)


def _bins(prof: VariabilityProfile, cls: str | None, k_min: int, k_max: int,
          sigma: float) -> dict[str, PmBins]:
    classes = [cls] if cls else list(prof.scores)
    unknown = [c for c in classes if c not in prof.scores]
    if unknown:
        raise InputError(f"profile '{prof.name}' has no class {unknown[0]!r} (has: {', '.join(prof.scores)})",
                         field="class")
    return {c: fit_bins(prof.scores[c], k_min=k_min, k_max=k_max, outlier_sigma=sigma) for c in classes}


def _payload(prof: VariabilityProfile, bins: dict[str, PmBins], l_across: float) -> dict:
    classes: dict[str, dict] = {}
    out = {"profile": prof.name, "l_across": l_across, "classes": classes}
    for c, b in bins.items():
        m = lv_matrix(b.levels, l_across)
        classes[c] = {**b.to_dict(), "traversal": [[m.level_names[li], round(float(m.values[vi]), 5),
                                                           round(float(m.penalties[li] * m.values[vi]), 5)]
                                                          for li, vi in m.traversal()]}
    return out


ProfileArg = typer.Argument("longhorn", help=_PROFILE_HELP)
GpusOpt = typer.Option(None, "--gpus", help="sample an N-GPU simulated cluster from the profile first")
SeedOpt = typer.Option(0, "--seed", help="seed of the sample")
RunsOpt = typer.Option(False, "--runs", help="sample single runs, as PAL's simulator does (needs --gpus)")
ClassOpt = typer.Option(None, "--class", help="only this class (classA..classD)")
LOpt = typer.Option(1.7, "--l-across", help="cross-node locality penalty of the L x V matrix")
KMinOpt = typer.Option(K_MIN, "--k-min", help="smallest K of the silhouette sweep")
KMaxOpt = typer.Option(K_MAX, "--k-max", help="largest K of the silhouette sweep")
SigmaOpt = typer.Option(OUTLIER_SIGMA, "--outlier-sigma", help="outliers beyond this many sigma keep their scores")


def _check_options(gpus: int | None, k_min: int, k_max: int, outlier_sigma: float, l_across: float) -> None:
    """The binning flags take the ranges PAL's placement stage declares for the same tunables."""
    from dlsched.core.ranges import Range, fmt_value, range_of
    from dlsched.policies.registry import STAGES

    fields = {f.name: f for f in STAGES["placement"]["pal"].tunable_fields()}
    checks: list[tuple[str, str, float | None, Range | None]] = [
        ("--gpus", "gpus", gpus, Range(1, 65536)),
        *((f"--{name.replace('_', '-')}", name, value, range_of(fields[name]))
          for name, value in (("k_min", k_min), ("k_max", k_max), ("outlier_sigma", outlier_sigma),
                              ("l_across", l_across))),
    ]
    for flag, name, value, rng in checks:
        if value is not None and rng is not None and value not in rng:
            raise InputError(f"{flag} must be {rng.phrase}, got {fmt_value(value)}", field=name)
    if k_min > k_max:
        raise InputError(f"--k-min ({k_min}) must not exceed --k-max ({k_max})", field="k_min")


def _fitted(profile: str, gpus: int | None, seed: int, runs: bool, cls: str | None, k_min: int, k_max: int,
            outlier_sigma: float, l_across: float):
    """Profile, its bins and their JSON form, or the one-line error exit (shared by show and fit)."""
    try:
        _check_options(gpus, k_min, k_max, outlier_sigma, l_across)
        prof = _load(profile, gpus, seed, runs)
        bins = _bins(prof, cls, k_min, k_max, outlier_sigma)
    except InputError as exc:
        raise _fail(exc) from None
    return prof, bins, _payload(prof, bins, l_across)


@app.command()
def show(profile: str = ProfileArg, gpus: int | None = GpusOpt, seed: int = SeedOpt, runs: bool = RunsOpt,
         cls: str | None = ClassOpt, l_across: float = LOpt, k_min: int = KMinOpt, k_max: int = KMaxOpt,
         outlier_sigma: float = SigmaOpt,
         fmt: Fmt = typer.Option(Fmt.table, "--format", help="table (human) or json (one object)")) -> None:
    """Print each class's PM-score bins (K by silhouette, centroids, outliers) and L x V traversal order."""
    prof, bins, payload = _fitted(profile, gpus, seed, runs, cls, k_min, k_max, outlier_sigma, l_across)
    if fmt is Fmt.json:
        typer.echo(json.dumps(payload))
        return
    console = Console()
    for c, b in bins.items():
        sil = "-" if math.isnan(b.silhouette) else f"{b.silhouette:.3f}"
        table = Table(title=f"{prof.name} {c}: {len(b.raw)} GPUs, K={b.k} (silhouette {sil}), "
                            f"{len(b.outliers)} outliers")
        for col in ("bin", "PM-score", "GPUs", "kind", "raw range"):
            table.add_column(col, justify="right")
        is_out = np.zeros(len(b.raw), dtype=bool)
        is_out[b.outliers] = True
        for i, (v, n) in enumerate(zip(b.levels, b.counts(), strict=True)):
            members = b.raw[b.labels == i]
            kind = "outlier" if is_out[b.labels == i].all() else "centroid"
            table.add_row(str(i), f"{v:.4f}", str(int(n)), kind, f"{members.min():.4f}-{members.max():.4f}")
        console.print(table)
        order = payload["classes"][c]["traversal"]
        shown = " -> ".join(f"({'W' if lvl.startswith('within') else 'X'},{v:.3f})" for lvl, v, _ in order[:12])
        console.print(f"L x V traversal (W within node, X across, L_across={l_across:g}): {shown}"
                      + (" ..." if len(order) > 12 else ""), highlight=False)


@app.command()
def fit(profile: str = ProfileArg, gpus: int | None = GpusOpt, seed: int = SeedOpt, runs: bool = RunsOpt,
        cls: str | None = ClassOpt, l_across: float = LOpt, k_min: int = KMinOpt, k_max: int = KMaxOpt,
        outlier_sigma: float = SigmaOpt,
        out: Path | None = typer.Option(None, "--out", help="write the bins as JSON here (default: stdout)"),
        plot: Path | None = typer.Option(None, "--plot", help="write histograms with centroids (PNG/PDF) here")
        ) -> None:
    """Fit the PM-score bins of each class; write them as JSON and optionally plot them (like figure 5)."""
    try:
        for target in (out, plot):
            if target is not None:
                check_output_file(target)
    except InputError as exc:
        raise _fail(exc) from None
    prof, bins, payload = _fitted(profile, gpus, seed, runs, cls, k_min, k_max, outlier_sigma, l_across)
    text = json.dumps(payload, indent=1)
    try:
        if out is None:
            typer.echo(text)
        else:
            with atomic_file(out) as tmp:
                tmp.write_text(text + "\n")
            typer.echo(f"wrote {out}", err=True)
        if plot is not None:
            with atomic_file(plot) as tmp:
                plot_bins(prof.name, bins, tmp, fmt=plot.suffix.lstrip(".") or None)
            typer.echo(f"wrote {plot}", err=True)
    except InputError as exc:
        raise _fail(exc) from None
    except OSError as exc:
        raise _fail(InputError(f"cannot write: {exc.strerror or exc}")) from None


def plot_bins(name: str, bins: dict[str, PmBins], path: Path, fmt: str | None = None) -> None:
    """One histogram per class of the measured PM-scores, coloured by bin, centroids marked with crosses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(bins), 1, figsize=(7, 2.4 * len(bins)), squeeze=False)
    for ax, (c, b) in zip(axes[:, 0], bins.items(), strict=True):
        edges = np.linspace(b.raw.min(), b.raw.max(), 60) if b.raw.max() > b.raw.min() else 10
        cmap = plt.get_cmap("tab20")
        for i in range(len(b.levels)):
            ax.hist(b.raw[b.labels == i], bins=edges, color=cmap(i % 20), alpha=0.85)
        ax.scatter(b.centroids, np.zeros(len(b.centroids)), marker="x", color="blue", s=60, zorder=3,
                   label="bin centroid")
        ax.set_title(f"{name} {c}: K={b.k}, {len(b.outliers)} outliers", fontsize=10)
        ax.set_ylabel("GPUs")
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("time per iteration / median GPU (PM-score)")
    fig.tight_layout()
    fig.savefig(path, format=fmt)
    plt.close(fig)
