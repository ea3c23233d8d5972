"""The HTML report: written, self-contained, every section present, one <img> per figure."""

from __future__ import annotations

import random
from pathlib import Path

from dlsched.sim.metrics import SUMMARY_KEYS, summarize
from dlsched.sim.records import JobRecord, RoundRecord, Segment
from dlsched.sim.report import MAX_TIMELINE_RUNS, SECTION_TITLES, RunArtifacts, write_report

NUM_GPUS = 16
#: JCT CDF, FTF CDF, GPUs in use, GPUs in use by type, queue length; timelines come on top.
SHARED_FIGURES = 5


def make_run(label: str, n_jobs: int = 30, seed: int = 0, round_s: float = 60.0) -> RunArtifacts:
    """A plausible synthetic run: jobs with one or two placements on a100/t4, some restarts."""
    rng = random.Random(seed)
    jobs: list[JobRecord] = []
    segments: list[Segment] = []
    horizon = 0.0
    for i in range(n_jobs):
        submit = rng.uniform(0, 3600)
        start = submit + rng.uniform(0, 600)
        mid = start + rng.uniform(300, 3000)
        finish = mid + rng.uniform(300, 3000) if i % 7 else None
        g1, g2 = rng.choice([1, 2, 4]), rng.choice([1, 2, 4, 8])
        t1, t2 = rng.choice(["a100", "t4"]), rng.choice(["a100", "t4", "v100"])
        segments.append(Segment(f"j{i}", start, mid, t1, g1, start + 30))
        end2 = finish if finish is not None else mid + 1000
        segments.append(Segment(f"j{i}", mid, end2, t2, g2, mid + 60))
        horizon = max(horizon, end2)
        gpu_s = (mid - start) * g1 + (end2 - mid) * g2
        jobs.append(JobRecord(
            job_id=f"j{i}", model="bert", user="u", adaptivity="adaptive", requested_gpus=g1, submit_s=submit,
            start_s=start, finish_s=finish, wait_s=start - submit, gpu_s=gpu_s, restarts=1,
            restart_gpu_s=30 * g1 + 60 * g2, deadline_s=None, ideal_runtime_s=1000.0,
            ftf=rng.uniform(0.3, 2.0) if finish is not None else None,
            latency_ratio=rng.uniform(1.0, 3.0) if finish is not None else None,
            gpu_s_by_type={t1: (mid - start) * g1} if t1 == t2 else {t1: (mid - start) * g1,
                                                                   t2: (end2 - mid) * g2},
        ))
    rounds = []
    t, k = 0.0, 0
    while t <= horizon:
        alloc = rng.randint(0, NUM_GPUS)
        rounds.append(RoundRecord(round=k, time_s=t, allocated_gpus=alloc, idle_gpus=NUM_GPUS - alloc,
                                  fragments=rng.randint(0, 2), queue_len=rng.randint(0, 10),
                                  running_jobs=rng.randint(0, 8), active_jobs=rng.randint(1, 15),
                                  policy_s=rng.uniform(0.001, 0.01), restarts=0,
                                  gpus_by_type={"a100": alloc // 2, "t4": alloc - alloc // 2}))
        t += round_s
        k += 1
    summary = summarize(jobs, rounds, num_gpus=NUM_GPUS, sim_wall_s=0.5)
    return RunArtifacts(label=label, jobs=jobs, rounds=rounds, segments=segments, summary=summary,
                        num_gpus=NUM_GPUS)


def check(html: str, n_runs_with_timeline: int) -> None:
    assert html.startswith("<!DOCTYPE html>")
    for title in SECTION_TITLES:
        assert f"<h2>{title}</h2>" in html
    for key in SUMMARY_KEYS:
        assert f"<th title='{key}'>" in html
    assert html.count("<img ") == SHARED_FIGURES + n_runs_with_timeline
    assert html.count('src="data:image/png;base64,') == html.count("<img ")
    assert "http://" not in html and "https://" not in html and "<script" not in html


def test_single_run_report(tmp_path: Path) -> None:
    out = write_report(tmp_path / "report.html", [make_run("sia")])
    assert out == tmp_path / "report.html"
    assert out.stat().st_size > 10_000
    check(out.read_text(encoding="utf-8"), 1)


def test_three_runs_overlaid_and_labels_escaped(tmp_path: Path) -> None:
    runs = [make_run("sia", seed=1), make_run("gavel", seed=2), make_run("<b>pollux & co</b>", seed=3)]
    out = write_report(tmp_path, runs)     # a directory: report.html goes inside
    assert out.name == "report.html"
    html = out.read_text(encoding="utf-8")
    check(html, 3)
    assert "<b>pollux" not in html
    assert "&lt;b&gt;pollux &amp; co&lt;/b&gt;" in html
    # one row per run in the default table and in the one with every column
    assert html.count("<td class='label'>") == 2 * 3


def test_many_runs_show_one_timeline(tmp_path: Path) -> None:
    runs = [make_run(f"r{i}", n_jobs=5, seed=i) for i in range(MAX_TIMELINE_RUNS + 1)]
    check(write_report(tmp_path / "r.html", runs).read_text(encoding="utf-8"), 1)


def test_empty_run_still_renders(tmp_path: Path) -> None:
    empty = RunArtifacts(label="empty", jobs=[], rounds=[], segments=[], summary=summarize(
        [], [], num_gpus=4, sim_wall_s=0.0), num_gpus=4)
    check(write_report(tmp_path / "e.html", [empty]).read_text(encoding="utf-8"), 1)


def test_large_run_report_caps_the_timeline(tmp_path: Path) -> None:
    big = make_run("big", n_jobs=10_000, seed=7, round_s=1.0)   # ~10k jobs, ~8k rounds, 20k segments
    html = write_report(tmp_path / "big.html", [big]).read_text(encoding="utf-8")
    check(html, 1)
    assert "80 of 10000 jobs shown" in html
