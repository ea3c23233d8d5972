"""report.html for a paper: figures as SVG and PDF, one time axis for every run, utilisation stacked by GPU
type, the JCT CDF on one log scale, the default summary columns first, and seed spread."""

from __future__ import annotations

import dataclasses
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from dlsched.core import InputError
from dlsched.sim.report import SECTION_TITLES, _jct_cdf, _timeline, _type_colors, write_report
from dlsched.sim.report_figures import (
    DEFAULT_SUMMARY_KEYS,
    figure_stem,
    parse_figure_formats,
    run_end_s,
    seed_spread,
    utilisation_by_type,
)
from sim.test_report import NUM_GPUS, make_run


def test_figures_are_written_as_svg_and_pdf_beside_the_report(tmp_path: Path):
    runs = [make_run("sia"), make_run("gavel", seed=1)]
    write_report(tmp_path / "report.html", runs, figures=("svg", "pdf"))
    stems = [figure_stem(t) for t in SECTION_TITLES[1:-1]] + [f"{figure_stem(SECTION_TITLES[-1])}-{i}" for i in (1, 2)]
    for stem in stems:
        svg, pdf = tmp_path / f"{stem}.svg", tmp_path / f"{stem}.pdf"
        assert ET.parse(svg).getroot().tag.endswith("svg"), stem
        assert pdf.read_bytes().startswith(b"%PDF"), stem
    assert len(list(tmp_path.glob("figure-*"))) == 2 * len(stems)


def test_no_figure_files_unless_asked(tmp_path: Path):
    write_report(tmp_path / "report.html", [make_run("sia")])
    assert list(tmp_path.glob("figure-*")) == []


@pytest.mark.parametrize("text, expected", [("svg,pdf", ("svg", "pdf")), (" PDF ", ("pdf",)),
                                            ("svg,svg", ("svg",)), (None, ())])
def test_figure_formats_are_parsed(text: str | None, expected: tuple[str, ...]):
    assert parse_figure_formats(text) == expected


@pytest.mark.parametrize("text", ["gif", "svg,eps", ","])
def test_an_unknown_figure_format_names_the_flag(text: str):
    with pytest.raises(InputError) as info:
        parse_figure_formats(text)
    assert info.value.field == "--figures"


def test_every_timeline_shares_one_time_axis():
    short = make_run("short")
    long_ = make_run("long", seed=3)
    long_.segments.append(dataclasses.replace(long_.segments[0], start_s=20_000.0, end_s=30_000.0))
    end = run_end_s([short, long_])
    assert end == 30_000.0
    colors = _type_colors([short, long_])
    limits = {_timeline(r, colors, end)[0].axes[0].get_xlim() for r in (short, long_)}
    assert limits == {(0.0, end / 3600)}


def test_the_jct_cdf_uses_one_log_scale_of_whole_decades():
    for runs in ([make_run("sia")], [make_run("sia"), make_run("gavel", seed=1)]):
        ax = _jct_cdf(runs).axes[0]
        assert ax.get_xscale() == "log"
        lo, hi = ax.get_xlim()
        assert math.log10(lo).is_integer() and math.log10(hi).is_integer()
        jct = [(j.finish_s - j.submit_s) / 3600 for r in runs for j in r.jobs if j.finish_s is not None]
        assert lo <= min(jct) and max(jct) <= hi


def test_utilisation_is_stacked_by_gpu_type_and_adds_up_to_the_gpus_in_use():
    run = make_run("sia")
    fig = utilisation_by_type([run], run_end_s([run]), _type_colors([run]), lambda t, y: (t, y))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a100", "t4"]
    top = ax.collections[-1].get_paths()[0].vertices[:, 1].max()
    assert top == pytest.approx(max(r.allocated_gpus for r in run.rounds))
    assert ax.get_ylim()[1] == pytest.approx(NUM_GPUS * 1.08)


def test_the_summary_shows_default_columns_and_hides_the_rest_behind_a_toggle(tmp_path: Path):
    page = write_report(tmp_path / "r.html", [make_run("sia")]).read_text()
    first, rest = page.split("<details><summary>all columns</summary>", 1)
    shown = re.findall(r"<th title='([a-z0-9_]+)'>", first)
    assert shown == list(DEFAULT_SUMMARY_KEYS)
    assert "ftf_max" in re.findall(r"<th title='([a-z0-9_]+)'>", rest)


def test_a_policy_averaged_over_seeds_shows_mean_and_standard_deviation(tmp_path: Path):
    seeds = [make_run("sia", seed=s).summary for s in range(3)]
    run = make_run("sia")
    run.seed_summaries = seeds
    mean, std, n = seed_spread(seeds, "avg_jct_s") or (0.0, 0.0, 0)
    values = [s["avg_jct_s"] for s in seeds]
    assert (mean, n) == (pytest.approx(np.mean(values)), 3) and std == pytest.approx(np.std(values, ddof=1))
    page = write_report(tmp_path / "r.html", [run]).read_text()
    assert "(n = 3)" in page
    assert f"{mean / 3600:.4g} &plusmn; {std / 3600:.4g}" in page
    assert seed_spread(seeds[:1], "avg_jct_s") is None
