"""What report.html adds for a paper: the summary table with its default columns first and seed spread,
utilisation stacked by GPU type, a time axis shared by every run, and the figures as SVG or PDF files.

Kept apart from :mod:`dlsched.sim.report` so that module stays the page's layout; the figures here are
drawn the same way (matplotlib's ``Figure`` on the Agg canvas, never ``pyplot``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dlsched.core import InputError
from dlsched.sim.records import RoundRecord

#: The summary columns shown at first, the ones ``dlsched simulate`` prints by default; the rest are behind
#: a toggle ("all columns").
DEFAULT_SUMMARY_KEYS: tuple[str, ...] = ("completed", "avg_jct_s", "p99_jct_s", "makespan_s", "avg_wait_s",
                                         "utilization", "restarts_per_job")
#: Formats ``--figures`` accepts (report.html itself always embeds PNGs).
FIGURE_FORMATS: tuple[str, ...] = ("svg", "pdf", "png")


class _Run(Protocol):
    label: str
    num_gpus: int
    rounds: list[RoundRecord]
    summary: dict[str, Any]
    seed_summaries: list[dict[str, Any]]


def parse_figure_formats(text: str | None) -> tuple[str, ...]:
    """``--figures svg,pdf`` as a tuple of formats (empty for None); an unknown one is an input error."""
    if text is None:
        return ()
    formats = tuple(dict.fromkeys(f.strip().lower() for f in text.split(",") if f.strip()))
    bad = [f for f in formats if f not in FIGURE_FORMATS]
    if bad or not formats:
        raise InputError(f"unknown figure format {', '.join(bad) or repr(text)} (choose from "
                         f"{', '.join(FIGURE_FORMATS)})", field="--figures")
    return formats


def figure_stem(title: str) -> str:
    """``figure-<slug>``: the file name (without suffix) of a section's figure."""
    slug = "".join(c if c.isalnum() else "-" for c in title.lower())
    return "figure-" + "-".join(p for p in slug.split("-") if p)


def save_figure(fig: Figure, stem: str, formats: Iterable[str], path_for: Callable[[str], Path]) -> list[Path]:
    """Write ``fig`` as ``<stem>.<format>`` for each format, at the paths ``path_for(name)`` gives."""
    FigureCanvasAgg(fig)
    written = []
    for fmt in formats:
        target = path_for(f"{stem}.{fmt}")
        fig.savefig(target, format=fmt, dpi=150)
        written.append(target)
    return written


def run_end_s(runs: Sequence[Any]) -> float:
    """The latest time any run reached (its last round, segment or finish): the shared time axis's end."""
    end = 0.0
    for r in runs:
        end = max([end] + [x.time_s for x in r.rounds[-1:]] + [s.end_s for s in r.segments]
                  + [j.finish_s for j in r.jobs if j.finish_s is not None])
    return end


def seed_spread(summaries: Sequence[dict[str, Any]], key: str) -> tuple[float, float, int] | None:
    """Mean, sample standard deviation and count of ``key`` over a policy's seeds (None below two)."""
    values = [float(s[key]) for s in summaries
              if isinstance(s.get(key), int | float) and not isinstance(s.get(key), bool)
              and math.isfinite(float(s[key]))]
    if len(values) < 2:
        return None
    return float(np.mean(values)), float(np.std(values, ddof=1)), len(values)


def summary_tables(runs: Sequence[_Run], keys: Sequence[str], column: Callable[[str], tuple[str, float]],
                   fmt: Callable[[Any], str]) -> str:
    """The default columns as a table, every column behind a toggle; a policy averaged over seeds shows
    ``mean ± std`` (and how many seeds) in each numeric cell."""
    default = [k for k in DEFAULT_SUMMARY_KEYS if k in keys]
    spread = any(len(r.seed_summaries) > 1 for r in runs)
    note = ("<p class='note'>Policies run with several seeds show the mean &plusmn; standard deviation over "
            "their seeds (n = seeds).</p>" if spread else "")
    return (note + _table(runs, default, column, fmt) + "<details><summary>all columns</summary>"
            "<div class='scroll'>" + _table(runs, list(keys), column, fmt) + "</div></details>")


def _table(runs: Sequence[_Run], keys: Sequence[str], column: Callable[[str], tuple[str, float]],
           fmt: Callable[[Any], str]) -> str:
    cols = [(k, *column(k)) for k in keys]
    head = "<th>run</th><th>num_gpus</th>" + "".join(
        f"<th title='{html.escape(k)}'>{html.escape(name)}</th>" for k, name, _ in cols)
    rows = []
    for r in runs:
        seeds = len(r.seed_summaries)
        label = html.escape(r.label) + (f" <small>(n = {seeds})</small>" if seeds > 1 else "")
        cells = [f"<td class='label'>{label}</td>", f"<td>{r.num_gpus}</td>"]
        for k, _, div in cols:
            stats = seed_spread(r.seed_summaries, k) if seeds > 1 else None
            if stats is not None:
                mean, std, _n = stats
                cells.append(f"<td>{fmt(mean / div)} &plusmn; {fmt(std / div)}</td>")
                continue
            v = r.summary.get(k)
            shown = v / div if isinstance(v, int | float) and not isinstance(v, bool) and div != 1.0 else v
            cells.append(f"<td>{fmt(shown)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def utilisation_by_type(runs: Sequence[_Run], end_s: float, colors: dict[str, Any],
                        bin_series: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]) -> Figure:
    """GPUs in use stacked by GPU type (the rounds' ``gpus_<type>``), one panel per run on shared axes."""
    n = max(1, len(runs))
    fig = Figure(figsize=(9, 1.2 + 2.2 * n), layout="constrained")
    axes = fig.subplots(n, 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    types = sorted({t for r in runs for x in r.rounds for t in x.gpus_by_type})
    top = max([float(r.num_gpus) for r in runs] + [1.0])
    for ax, r in zip(axes, runs, strict=False):
        ax.set_title(r.label, fontsize="small", loc="left")
        ax.set_ylabel("GPUs in use")
        ax.grid(alpha=0.3)
        if not r.rounds or not types:
            ax.text(0.5, 0.5, "no rounds", ha="center", va="center", transform=ax.transAxes, color="0.4")
            continue
        t = np.array([x.time_s for x in r.rounds], dtype=float)
        order = np.argsort(t, kind="stable")
        stacks = []
        for gtype in types:
            y = np.array([x.gpus_by_type.get(gtype, 0) for x in r.rounds], dtype=float)[order]
            tb, yb = bin_series(t[order], y)
            stacks.append(yb)
        # a step-wise stack: each round's allocation holds until the next round
        ax.stackplot(tb / 3600, *stacks, labels=types, colors=[colors.get(g, "0.5") for g in types], step="post")
        if r.num_gpus > 0:
            ax.axhline(r.num_gpus, color="k", linestyle=":", linewidth=1)
    if runs and types:
        axes[0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", title="GPU type")
    axes[-1].set_xlabel("time (hours)")
    axes[-1].set_xlim(0, max(end_s, 1.0) / 3600)
    axes[-1].set_ylim(0, top * 1.08)
    return fig


def decade_limits(lo: float, hi: float) -> tuple[float, float]:
    """Powers of ten around [lo, hi]: the JCT CDF's fixed log scale, the same rule for one run or many."""
    lo = max(lo, 1e-4)
    hi = max(hi, lo)
    return 10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi) + 1e-12)
