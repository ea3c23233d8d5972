"""A single self-contained HTML report comparing one or more simulation runs.

The report is one file (figures are base64 PNGs, no scripts, no network) so it can be attached to an
issue, mailed, or opened from a results folder on an air-gapped machine. Figures are drawn with
matplotlib's Agg canvas through :class:`matplotlib.figure.Figure` directly, never ``pyplot``, so writing a
report does not touch global plotting state and works headless and from threads.

Large runs (10,000 jobs, 100,000 rounds) must render in seconds: time series are bin-averaged to at most
:data:`MAX_SERIES_POINTS` points, CDFs to :data:`MAX_CDF_POINTS`, and the allocation timeline shows at most
:data:`MAX_TIMELINE_JOBS` jobs (those with the most GPU time).
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from dlsched.sim.metrics import SUMMARY_KEYS
from dlsched.sim.records import JobRecord, RoundRecord, Segment
from dlsched.sim.report_figures import (
    decade_limits,
    figure_stem,
    run_end_s,
    save_figure,
    summary_tables,
    utilisation_by_type,
)

__all__ = [
    "MAX_CDF_POINTS",
    "MAX_SERIES_POINTS",
    "MAX_TIMELINE_JOBS",
    "MAX_TIMELINE_RUNS",
    "SECTION_TITLES",
    "RunArtifacts",
    "write_report",
]

MAX_SERIES_POINTS = 1500
MAX_CDF_POINTS = 2000
MAX_TIMELINE_JOBS = 80
#: With more runs than this only the first run's timeline is drawn (one timeline each would bury the rest).
MAX_TIMELINE_RUNS = 4

#: Section headings, in order; tests and readers can rely on them.
SECTION_TITLES: tuple[str, ...] = (
    "Summary",
    "JCT CDF",
    "Finish-time fairness CDF",
    "GPUs in use over time",
    "GPUs in use by type",
    "Queue length over time",
    "Allocation timeline",
)

_DPI = 100


@dataclass
class RunArtifacts:
    """Everything the report needs about one run; ``label`` names it in tables and legends."""

    label: str
    jobs: list[JobRecord]
    rounds: list[RoundRecord]
    segments: list[Segment] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    num_gpus: int = 0
    #: Every seed's summary where the policy was averaged over several (the table shows mean and std).
    seed_summaries: list[dict[str, Any]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------- helpers


def _legend_label(label: str) -> str:
    """Make a run label safe for matplotlib: '_'-prefixed labels are hidden and '$' starts mathtext."""
    safe = label.replace("$", r"\$")
    return " " + safe if safe.startswith("_") else safe


def _fig_to_img(fig: Figure, alt: str) -> str:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _no_data(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes, color="0.4")


def _cdf_points(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their empirical CDF, thinned to quantiles when there are many points."""
    v = np.sort(values)
    n = len(v)
    if n > MAX_CDF_POINTS:
        idx = np.unique(np.linspace(0, n - 1, MAX_CDF_POINTS).round().astype(np.int64))
        return v[idx], (idx + 1) / n
    return v, np.arange(1, n + 1) / n


def _bin_series(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bin-average a time series to at most MAX_SERIES_POINTS points (means keep the area, unlike striding)."""
    if len(t) <= MAX_SERIES_POINTS:
        return t, y
    edges = np.linspace(t[0], t[-1], MAX_SERIES_POINTS + 1)
    which = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, MAX_SERIES_POINTS - 1)
    counts = np.bincount(which, minlength=MAX_SERIES_POINTS)
    sums = np.bincount(which, weights=y, minlength=MAX_SERIES_POINTS)
    keep = counts > 0
    # Left edges, because the series is drawn as a post-step: each bin's mean holds from where the bin starts.
    return edges[:-1][keep], sums[keep] / counts[keep]


def _fmt(x: Any) -> str:
    if x is None:
        return "&mdash;"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
            return f"{x:.3e}"
        return f"{x:.4g}"
    return html.escape(str(x))


# --------------------------------------------------------------------------------------------- figures


#: How the report shows a summary key people read as a time: (unit shown, divisor of the seconds).
_TIME_UNITS: dict[str, tuple[str, float]] = {
    "avg_jct_s": ("h", 3600.0), "p50_jct_s": ("h", 3600.0), "p99_jct_s": ("h", 3600.0),
    "makespan_s": ("h", 3600.0), "avg_wait_s": ("min", 60.0), "avg_queue_wait_s": ("min", 60.0),
    "policy_time_median_s": ("ms", 1e-3), "policy_time_p99_s": ("ms", 1e-3), "sim_wall_s": ("s", 1.0),
}


def _column(key: str) -> tuple[str, float]:
    """Heading and divisor of a summary key: ``avg_jct_s`` is shown in hours as ``avg_jct (h)``."""
    if key in _TIME_UNITS:
        unit, div = _TIME_UNITS[key]
        return f"{key.removesuffix('_s')} ({unit})", div
    return key, 1.0


def _summary_table(runs: Sequence[RunArtifacts]) -> str:
    return summary_tables(runs, SUMMARY_KEYS, _column, _fmt)


def _jct_cdf(runs: Sequence[RunArtifacts]) -> Figure:
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    lo, hi, drawn = math.inf, 0.0, False
    for r in runs:
        jct = np.array([j.finish_s - j.submit_s for j in r.jobs if j.finish_s is not None], dtype=float) / 3600
        if len(jct) == 0:
            continue
        x, y = _cdf_points(jct)
        ax.step(x, y, where="post", label=_legend_label(r.label))
        lo, hi, drawn = min(lo, float(x[0])), max(hi, float(x[-1])), True
    if not drawn:
        _no_data(ax, "completed jobs")
    else:
        # JCTs span minutes to days: always a log axis over whole decades, so one run's report and a
        # comparison's draw on the same scale and can be set side by side.
        ax.set_xscale("log")
        ax.set_xlim(*decade_limits(lo, hi))
        ax.legend(loc="lower right", fontsize="small")
    ax.set_xlabel("job completion time (hours)")
    ax.set_ylabel("fraction of completed jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    return fig


def _ftf_cdf(runs: Sequence[RunArtifacts]) -> Figure:
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    lo, hi, drawn = math.inf, 0.0, False
    for r in runs:
        rho = np.array([j.ftf for j in r.jobs if j.finish_s is not None and j.ftf is not None], dtype=float)
        rho = rho[np.isfinite(rho)]
        if len(rho) == 0:
            continue
        x, y = _cdf_points(rho)
        ax.step(x, y, where="post", label=_legend_label(r.label))
        lo, hi, drawn = min(lo, float(x[0])), max(hi, float(x[-1])), True
    ax.axvline(1.0, color="k", linestyle="--", linewidth=1, label="rho = 1 (fair)")
    if not drawn:
        _no_data(ax, "finish-time fairness values")
    elif lo > 0 and hi / lo > 100:
        ax.set_xscale("log")
    ax.legend(loc="lower right", fontsize="small")
    ax.set_xlabel("finish-time fairness rho (> 1 is unfair)")
    ax.set_ylabel("fraction of completed jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    return fig


def _round_series(runs: Sequence[RunArtifacts], attr: str, ylabel: str, capacity: bool, end_s: float) -> Figure:
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    drawn, top = False, 1.0
    for i, r in enumerate(runs):
        if not r.rounds:
            continue
        t = np.array([x.time_s for x in r.rounds], dtype=float)
        y = np.array([getattr(x, attr) for x in r.rounds], dtype=float)
        order = np.argsort(t, kind="stable")
        tb, yb = _bin_series(t[order], y[order])
        line = ax.step(tb / 3600, yb, where="post", label=_legend_label(r.label), linewidth=1)[0]
        drawn, top = True, max(top, float(yb.max()))
        if capacity and r.num_gpus > 0 and (i == 0 or r.num_gpus != runs[0].num_gpus):
            ax.axhline(r.num_gpus, color=line.get_color(), linestyle=":", linewidth=1)
            top = max(top, float(r.num_gpus))
    if not drawn:
        _no_data(ax, "rounds")
    else:
        ax.legend(loc="best", fontsize="small", framealpha=0.8)
    ax.set_xlabel("time (hours)")
    ax.set_xlim(0, max(end_s, 1.0) / 3600)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, top * 1.08)
    ax.grid(alpha=0.3)
    return fig


def _type_colors(runs: Sequence[RunArtifacts]) -> dict[str, Any]:
    """One colour per GPU type, shared by every run's timeline and the stacked utilisation, so colours mean
    the same thing throughout."""
    import matplotlib as mpl

    types = sorted({s.gpu_type for r in runs for s in r.segments} | {t for r in runs for x in r.rounds
                                                                    for t in x.gpus_by_type})
    cmap = mpl.colormaps["tab10"]
    return {t: cmap(i % 10) for i, t in enumerate(types)}


def _timeline(run: RunArtifacts, colors: dict[str, Any], end_s: float) -> tuple[Figure, str]:
    """Per-job allocation lanes in the style of Sia figures 3.4 / 3.8.

    One lane per job, ordered by submit time: a pale band from submit to finish (waiting / in system), a
    bar per placement coloured by GPU type with height proportional to its GPU count, and the
    checkpoint-restore part of each placement hatched (GPUs held but no progress).
    """
    gpu_time = {j.job_id: j.gpu_s for j in run.jobs}
    by_job: dict[str, list[Segment]] = {}
    for s in run.segments:
        by_job.setdefault(s.job_id, []).append(s)
    for jid, segs in by_job.items():
        gpu_time.setdefault(jid, sum((s.end_s - s.start_s) * s.num_gpus for s in segs))
    chosen = sorted(gpu_time, key=lambda jid: -gpu_time[jid])[:MAX_TIMELINE_JOBS]
    jobs = {j.job_id: j for j in run.jobs}
    chosen.sort(key=lambda jid: (jobs[jid].submit_s if jid in jobs else math.inf, jid))
    lane = {jid: i for i, jid in enumerate(chosen)}
    note = (f"{len(chosen)} of {len(gpu_time)} jobs shown (most GPU time)." if len(gpu_time) > len(chosen)
            else f"{len(chosen)} jobs.")

    height = max(3.0, min(14.0, 0.16 * len(chosen) + 1.5))
    fig = Figure(figsize=(10, height), layout="constrained")
    ax = fig.add_subplot()
    if not chosen:
        _no_data(ax, "allocations")
        return fig, note

    segs = [s for jid in chosen for s in by_job.get(jid, ())]
    max_gpus = max((s.num_gpus for s in segs), default=1) or 1
    end_of_run = max([s.end_s for s in segs] + [j.finish_s or 0.0 for j in run.jobs], default=0.0)

    # In-system band (submit to finish, or to the end for unfinished jobs): where no bar covers it the job waits.
    band_y, band_l, band_w = [], [], []
    for jid in chosen:
        j = jobs.get(jid)
        if j is None:
            continue
        end = j.finish_s if j.finish_s is not None else end_of_run
        band_y.append(lane[jid])
        band_l.append(j.submit_s / 3600)
        band_w.append(max(end - j.submit_s, 0.0) / 3600)
    ax.barh(band_y, band_w, left=band_l, height=0.9, color="#f3e9b5", linewidth=0)

    if segs:
        y = np.array([lane[s.job_id] for s in segs], dtype=float)
        start = np.array([s.start_s for s in segs], dtype=float)
        seg_end = np.array([s.end_s for s in segs], dtype=float)
        restart_end = np.clip(np.array([s.restarting_until_s for s in segs], dtype=float), start, seg_end)
        heights = 0.25 + 0.65 * np.array([s.num_gpus for s in segs], dtype=float) / max_gpus
        col = [colors.get(s.gpu_type, "0.5") for s in segs]
        run_w = seg_end - restart_end
        ax.barh(y, run_w / 3600, left=restart_end / 3600, height=heights, color=col, linewidth=0)
        rs = restart_end > start
        if rs.any():
            ax.barh(y[rs], (restart_end - start)[rs] / 3600, left=start[rs] / 3600, height=heights[rs],
                    color="white", edgecolor=[c for c, k in zip(col, rs, strict=True) if k], hatch="////",
                    linewidth=0)

    ax.set_yticks(range(len(chosen)))
    ax.set_yticklabels(chosen, fontsize=6 if len(chosen) > 30 else 8)
    ax.set_ylim(len(chosen) - 0.5, -0.5)
    ax.set_xlabel("time (hours)")
    ax.set_xlim(0, max(end_s, 1.0) / 3600)  # every run's timeline on one time axis
    ax.set_ylabel("job (by submit time)")
    ax.grid(axis="x", alpha=0.3)
    used_types = sorted({s.gpu_type for s in segs})
    handles = [Patch(color=colors.get(t, "0.5"), label=t) for t in used_types]
    handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="////", label="checkpoint-restore"))
    handles.append(Patch(color="#f3e9b5", label="waiting"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig, note + " Bar height is proportional to the number of GPUs."


# --------------------------------------------------------------------------------------------- report

_CSS = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th { background: #f0f0f0; }
td.label { text-align: left; font-weight: bold; }
.scroll { overflow-x: auto; }
img { max-width: 100%; }
p.note { color: #555; font-size: 13px; }
p.about { font-family: monospace; font-size: 13px; }
"""


def write_report(path: str | Path, runs: list[RunArtifacts], *, title: str = "dlsched report",
                 about: str | None = None, spread: str | None = None, figures: Sequence[str] = (),
                 figure_path: Callable[[str], Path] | None = None) -> Path:
    """Write one self-contained ``report.html`` comparing ``runs`` and return its path.

    ``path`` is the file to write, or an existing directory to write ``report.html`` into. Sections (see
    :data:`SECTION_TITLES`): a summary table (the default columns, every column behind a toggle, mean and
    standard deviation where a policy ran with several seeds); JCT and finish-time fairness CDFs with all
    runs overlaid (JCT on a log scale of whole decades); GPUs in use, stacked by GPU type, and queue length
    over time; and allocation timelines, one per run, or only the first run's when there are more than
    :data:`MAX_TIMELINE_RUNS`. Every time axis runs from 0 to the latest run's end, so runs line up. Every
    figure is present even without data (it then says so), so the layout is predictable. ``about`` (what
    was run: cluster, trace, policies and their stages, seeds, version) heads the page. ``figures``
    (``svg``, ``pdf``, ``png``) also writes each figure as ``figure-<section>.<format>`` at
    ``figure_path(name)`` (default: beside the report).
    """
    out = Path(path)
    if out.is_dir() and not out.is_symlink():
        out = out / "report.html"
    end_s = run_end_s(runs)
    exported: list[tuple[Figure, str]] = []

    def figure(fig: Figure, alt: str, stem: str) -> str:
        if figures:
            exported.append((fig, stem))
        return _fig_to_img(fig, alt)

    s_summary, s_jct, s_ftf, s_gpus, s_types, s_queue, s_timeline = SECTION_TITLES
    timeline_runs = runs if len(runs) <= MAX_TIMELINE_RUNS else runs[:1]
    colors = _type_colors(runs)
    parts: list[str] = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        *([f"<p class='about'>{html.escape(about)}</p>"] if about else []),
        f"<p class='note'>Runs: {', '.join(html.escape(r.label) for r in runs) or 'none'}.</p>",
        f"<h2>{s_summary}</h2>",
        *([("<p class='note'>Each row over its runs: mean &plusmn; standard deviation (over seeds; over "
            "workloads with several traces, their range below); the figures show each row's first run.</p>"),
           f"<div class='scroll'>{spread}</div>", "<p class='note'>First run of each row:</p>"] if spread else []),
        "<div class='scroll'>",
        _summary_table(runs),
        "</div>",
        f"<h2>{s_jct}</h2>",
        figure(_jct_cdf(runs), s_jct, figure_stem(s_jct)),
        f"<h2>{s_ftf}</h2>",
        "<p class='note'>Sia eq. 3.6; rho &gt; 1 means the job finished later than on its fair share alone.</p>",
        figure(_ftf_cdf(runs), s_ftf, figure_stem(s_ftf)),
        f"<h2>{s_gpus}</h2>",
        "<p class='note'>Allocated GPUs per round (bin-averaged for long runs); dotted line: cluster size.</p>",
        figure(_round_series(runs, "allocated_gpus", "GPUs in use", capacity=True, end_s=end_s), s_gpus,
               figure_stem(s_gpus)),
        f"<h2>{s_types}</h2>",
        "<p class='note'>The same, stacked by GPU type, one panel per run on shared axes.</p>",
        figure(utilisation_by_type(timeline_runs, end_s, colors, _bin_series), s_types, figure_stem(s_types)),
        f"<h2>{s_queue}</h2>",
        figure(_round_series(runs, "queue_len", "queued jobs", capacity=False, end_s=end_s), s_queue,
               figure_stem(s_queue)),
        f"<h2>{s_timeline}</h2>",
    ]
    if len(runs) > MAX_TIMELINE_RUNS:
        parts.append(f"<p class='note'>Only the first run is shown ({len(runs)} runs).</p>")
    for i, r in enumerate(timeline_runs):
        fig, note = _timeline(r, colors, end_s)
        parts.append(f"<h3>{html.escape(r.label)}</h3><p class='note'>{html.escape(note)}</p>")
        parts.append(figure(fig, f"{s_timeline}: {r.label}", f"{figure_stem(s_timeline)}-{i + 1}"))
    parts.append("</body></html>")
    from dlsched.outputs import atomic_file

    with atomic_file(out) as tmp:  # never half a report, never over a device or a link
        tmp.write_text("\n".join(parts), encoding="utf-8")
    if figures:
        folder = out.parent
        for fig, stem in exported:
            save_figure(fig, stem, figures, figure_path or (lambda name: folder / name))
    return out
