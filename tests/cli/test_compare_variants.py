"""``compare`` as papers report comparisons: variants, several traces, seeds with their spread, the window.

Every check runs the real command (typer's runner, real simulations); the few that replay a named trace
read the measured data and are skipped without it (CI sets ``DLSCHED_DATA``).
"""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.cli.compare import expand_traces
from dlsched.cli.variants import load_variants, parse_variant
from dlsched.core import InputError
from testkit import needs_data

runner = CliRunner()
#: A trace file no seed changes (a file is fixed): three rigid jobs of a model every GPU type runs.
FIXED_TRACE = ("job_id,submit_time_s,model,num_gpus,batch_size,min_gpus,max_gpus,adaptivity,duration_s,iterations\n"
               "a,0,philly,2,,,,rigid,600,\nb,30,philly,4,,,,rigid,900,\nc,60,philly,1,,,,rigid,300,\n")


def json_rows(*args: str) -> tuple[list[dict], str]:
    res = runner.invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()], res.stderr


def refused(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 2, res.output
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in res.output, res.output
    return errors[0]


# -- variants -----------------------------------------------------------------------------------------------

def test_a_variant_names_policy_stages_tunables_world_options_and_run_fields():
    v = parse_variant("gimbal:policy=lucid,coordinator=gimbal,set.objective=jct,world.locality_penalty=1.5,"
                      "round_s=360,trace=synthetic:rate=20,hours=2")
    assert v.name == "gimbal"
    assert v.fields == {"policy": "lucid", "coordination": "gimbal", "round_s": "360",
                        "trace": "synthetic:rate=20,hours=2"}
    assert v.sets == ["objective=jct", "world.locality_penalty=1.5"]


def test_a_misspelt_variant_key_gets_did_you_mean():
    with pytest.raises(InputError) as err:
        parse_variant("x:polcy=fifo")
    assert "did you mean 'policy'" in str(err.value) and err.value.field == "variant"


def test_variants_file_nests_set_and_world(tmp_path):
    path = tmp_path / "variants.yaml"
    path.write_text("variants:\n  base: {policy: lucid}\n  tuned:\n    policy: lucid\n    coordinator: gimbal\n"
                    "    set: {objective: jct}\n    world: {locality_penalty: 1.5}\n")
    base, tuned = load_variants(path)
    assert (base.name, base.fields, base.sets) == ("base", {"policy": "lucid"}, [])
    assert tuned.fields == {"policy": "lucid", "coordination": "gimbal"}
    assert tuned.sets == ["objective=jct", "world.locality_penalty=1.5"]


def test_a_missing_variants_file_is_not_found(tmp_path):
    line = refused("compare", "--variants", str(tmp_path / "nope.yaml"), "--jobs", "2")
    assert "not found" in line and "nope.yaml" in line


def test_trace_ranges_expand_and_bad_ranges_are_refused():
    assert expand_traces(["sia-philly:1..3"]) == ["sia-philly:1", "sia-philly:2", "sia-philly:3"]
    assert expand_traces(["pollux:2..3@rigid"]) == ["pollux:2@rigid", "pollux:3@rigid"]
    assert expand_traces(None) == [None]
    for bad in (["sia-philly:3..1"], ["sia-philly:1..500"], ["tiresias", "tiresias"]):
        with pytest.raises(InputError):
            expand_traces(bad)


@needs_data("sia", "traces", "philly.csv")
def test_gimbal_with_and_without_its_coordinator_prints_both_rows_with_their_spread():
    """The issue's own line: a scheduler with and without a coordinator, three seeds, one table."""
    args = ["compare", "--variant", "base:policy=lucid", "--variant", "gimbal:policy=lucid,coordinator=gimbal",
            "--cluster", "gimbal-32", "--trace", "gimbal-philly:seed=1", "--seeds", "3", "--workers", "2"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    body = [ln for ln in res.stdout.splitlines() if ln.startswith("│")]
    assert [ln.split("│")[1].strip() for ln in body] == ["base", "gimbal"]
    assert all("±" in ln for ln in body)
    rows, _ = json_rows(*args)
    assert [r["policy"] for r in rows] == ["base", "gimbal"]
    assert all(r["runs"] == 3 and r["seeds"] == 3 for r in rows)
    # the drawn trace moves its seed with the run's, so the three runs differ and the spread is real
    assert all(r["avg_jct_s_std"] > 0 and not r["seeds_changed_nothing"] for r in rows)
    assert all(r["trace_seed_values"] == [1, 2, 3] and "trace_seed" in r["seeds_varied"] for r in rows)
    assert rows[0]["scheduler"] != rows[1]["scheduler"]  # the coordinator is the difference


def test_seeds_that_change_nothing_are_said(tmp_path):
    trace = tmp_path / "fixed.csv"
    trace.write_text(FIXED_TRACE)
    rows, err = json_rows("compare", "--policies", "fifo", "--cluster", "sia-homo-64", "--trace", str(trace),
                          "--seeds", "2", "--workers", "1")
    assert "--seeds 2 changed nothing for fifo" in err
    (row,) = rows
    assert row["seeds_changed_nothing"] is True and row["avg_jct_s_std"] == 0.0 and row["runs"] == 2


def test_seeds_that_change_the_trace_show_a_spread_in_the_table_and_the_report(tmp_path):
    args = ["compare", "--policies", "fifo", "--trace", "synthetic:rate=40,hours=1,seed=3", "--jobs", "12",
            "--seeds", "3", "--workers", "2"]
    rows, err = json_rows(*args)
    (row,) = rows
    assert "changed nothing" not in err
    assert row["avg_jct_s_std"] > 0 and row["trace_seed_values"] == [3, 4, 5]
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    shown = f"{row['avg_jct_s'] / 3600:.2f}±{row['avg_jct_s_std'] / 3600:.2f}"
    assert shown in res.stdout
    report = (tmp_path / "out" / "report.html").read_text()
    assert "mean &plusmn; standard deviation" in report and "&plusmn;" in report.split("First run")[0]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())[0]["avg_jct_s_std"] == row["avg_jct_s_std"]


@needs_data("sia", "workloads", "philly")
def test_several_traces_give_mean_std_and_range_over_workloads():
    rows, err = json_rows("compare", "--policies", "fifo,tiresias", "--trace", "sia-philly:1..3", "--jobs", "8",
                          "--workers", "2")
    assert [r["policy"] for r in rows] == ["fifo", "tiresias"]
    for r in rows:
        assert r["workloads"] == 3 and r["trace"] == ["sia-philly:1", "sia-philly:2", "sia-philly:3"]
        assert r["avg_jct_s_min"] <= r["avg_jct_s"] <= r["avg_jct_s_max"]
        assert r["avg_jct_s_std"] > 0
    res = runner.invoke(app, ["compare", "--policies", "fifo", "--trace", "sia-philly:1..2", "--jobs", "8",
                              "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert any(ln.split("│")[1].strip() == "range" for ln in res.stdout.splitlines() if ln.startswith("│"))


# -- the measurement window ---------------------------------------------------------------------------------

def test_the_window_narrows_the_summary_to_the_jobs_submitted_inside_it():
    (full,), _ = json_rows("simulate", "--jobs", "12")
    (cut,), _ = json_rows("simulate", "--jobs", "12", "--window-start", "2j", "--window-end", "8j")
    assert full["jobs"] == 12 and cut["jobs"] == 6 and cut["window"] == "window 2j-8j"
    (hours,), _ = json_rows("simulate", "--jobs", "12", "--window-end", "0h")
    assert hours["jobs"] == 0


def test_the_window_is_on_compare_too():
    rows, _ = json_rows("compare", "--policies", "fifo,sjf", "--jobs", "10", "--window-start", "3j", "--workers", "1")
    assert [r["jobs"] for r in rows] == [7, 7]


@pytest.mark.parametrize(("args", "field"), [
    (("--window-start", "ten"), "window_start"),
    (("--window-end", "2.5j"), "window_end"),
    (("--window-start", "8j", "--window-end", "2j"), "window_end"),
])
def test_a_bad_window_is_refused_naming_the_flag(args, field):
    line = refused("simulate", "--jobs", "5", *args)
    assert f"field '{field}'" in line


# -- headers, summary.json and report.html say what ran -----------------------------------------------------

def test_headers_summary_and_report_name_set_overrides_world_options_and_window(tmp_path):
    args = ["simulate", "--policy", "tiresias", "--set", "starvation_factor=2", "--set",
            "world.locality_penalty=1.5", "--jobs", "10", "--window-start", "1j", "--window-end", "9j"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    header = " ".join(res.stdout.split("┏")[0].split())
    assert "set starvation_factor=2" in header and "world locality_penalty=1.5" in header
    assert "window 1j-9j" in header
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["settings"] == {"starvation_factor": "2"}
    assert summary["world_options"] == {"locality_penalty": 1.5} and summary["window"] == "window 1j-9j"
    report = (tmp_path / "out" / "report.html").read_text()
    assert "set starvation_factor=2" in report and "world locality_penalty=1.5" in report
    assert "window 1j-9j" in report


def test_two_runs_that_differ_only_by_set_print_different_headers():
    def header(*extra: str) -> str:
        res = runner.invoke(app, ["simulate", "--policy", "tiresias", "--jobs", "5", *extra])
        assert res.exit_code == 0, res.output
        return res.stdout.split("┏")[0]

    assert header() != header("--set", "starvation_factor=3")


def test_a_compare_header_names_each_variants_tunables():
    res = runner.invoke(app, ["compare", "--variant", "a:policy=tiresias", "--variant",
                              "b:policy=tiresias,set.starvation_factor=3", "--jobs", "5", "--workers", "1"])
    assert res.exit_code == 0, res.output
    header = " ".join(res.stdout.split("┏")[0].split())
    assert "policy b all/tiresias-2dlas/gang/packed-sticky/none set starvation_factor=3" in header


def test_wide_shows_every_numeric_column_without_cutting_titles():
    (row,), _ = json_rows("simulate", "--jobs", "6")
    res = runner.invoke(app, ["simulate", "--jobs", "6", "--wide"])
    assert res.exit_code == 0, res.output
    assert "…" not in res.stdout
    titles = next(ln for ln in res.stdout.splitlines() if "policy" in ln and "┃" in ln)
    shown = {t.strip() for t in titles.split("┃")}
    extra = {"checkpoint_restores_per_job", "latency_ratio_avg", "fragments_waiting_per_round", "policy_time_p99_s"}
    assert extra <= shown
    assert all(k in row and (row[k] is None or not math.isnan(row[k])) for k in extra)
