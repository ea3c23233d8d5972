"""The `dlsched` command as a user meets it: output formats, files written, and one-line errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dlsched.cli import app
from dlsched.sim.metrics import SUMMARY_KEYS
from testkit import needs_data

runner = CliRunner()
SMALL = ["--trace", "synthetic:rate=6,hours=2,seed=3", "--cluster", "sia-hetero-64"]


def invoke(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_simulate_json_prints_exactly_one_object_with_every_summary_key():
    res = invoke("simulate", *SMALL, "--format", "json")
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1
    summary = json.loads(lines[0])
    for key in (*SUMMARY_KEYS, "policy", "cluster", "trace"):
        assert key in summary
    assert summary["jobs"] == summary["completed"] > 0
    assert summary["deadline_met_frac"] is None


def test_simulate_out_writes_every_file(tmp_path):
    out = tmp_path / "run"
    res = invoke("simulate", *SMALL, "--policy", "tiresias", "--out", str(out), "--format", "json")
    assert res.exit_code == 0, res.output
    for name in ("jobs.csv", "rounds.csv", "summary.json", "config.json", "report.html"):
        assert (out / name).stat().st_size > 0, name
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["policy"] == "tiresias"
    assert json.loads((out / "summary.json").read_text())["policy"] == "tiresias"


def test_same_config_same_summary():
    a = json.loads(invoke("simulate", *SMALL, "--policy", "random-sticky", "--seed", "4", "--format", "json").stdout)
    b = json.loads(invoke("simulate", *SMALL, "--policy", "random-sticky", "--seed", "4", "--format", "json").stdout)
    a.pop("sim_wall_s"), b.pop("sim_wall_s")
    a.pop("policy_time_median_s"), b.pop("policy_time_median_s")
    a.pop("policy_time_p99_s"), b.pop("policy_time_p99_s")
    assert a == b


def test_compare_prints_one_json_line_per_policy(tmp_path):
    res = invoke("compare", "--policies", "fifo,las", *SMALL, "--workers", "1", "--out", str(tmp_path / "cmp"),
                 "--format", "json")
    assert res.exit_code == 0, res.output
    rows = [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]
    assert [r["policy"] for r in rows] == ["fifo", "las"]
    assert (tmp_path / "cmp" / "report.html").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--policy", "nope"], "unknown policy 'nope'"),
    (["--set", "no_such_knob=1"], "no tunable 'no_such_knob'"),
    (["--set", "garbage"], "--set expects key=value"),
    (["--cluster", "no-such-cluster"], "unknown cluster"),
    (["--placement", "sideways"], "unknown placement 'sideways'"),
    (["--round-s", "-5"], "field 'round_s'"),
    (["--round-s", "0.5"], "field 'round_s'"),
    (["--round-s", "inf"], "field 'round_s'"),
    (["--seed", "-1"], "field 'seed'"),
    (["--jobs", "0"], "field 'jobs'"),
    (["--set", "world.nope=1"], "field 'world.nope': unknown world option"),
    (["--set", "locality_penalty=abc"], "field 'world.locality_penalty'"),
    (["--set", "max_time_s=-3"], "field 'max_time_s'"),
    (["--set", "ftf.share=bogus"], "field 'ftf.share'"),
    (["--set", "ftf.nope=1"], "field 'ftf.nope': unknown finish-time fairness option"),
    (["--config", "/no/such/config.json"], "/no/such/config.json"),
    (["--trace", "synthetic:rate=5,colour=blue"], "colour"),
])
def test_bad_flags_fail_with_one_line_and_exit_2(tmp_path, args, message):
    out = tmp_path / "out"
    res = invoke("simulate", *SMALL, *args, "--out", str(out))
    assert res.exit_code == 2
    err_lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(err_lines) == 1 and err_lines[0].startswith("error:"), res.stderr
    assert message in err_lines[0]
    assert "Traceback" not in res.output
    assert not out.exists()  # nothing half-written


def _write(path, text):
    path.write_text(text)
    return str(path)


def test_malformed_trace_line_names_file_and_line(tmp_path):
    trace = _write(tmp_path / "t.csv", "name,time,application,num_replicas,batch_size\n"
                                       "a,0,cifar10,1,128\nb,notanumber,cifar10,1,128\n")
    res = invoke("simulate", "--trace", trace)
    assert res.exit_code == 2
    assert f"{trace}:3" in res.stderr


def test_negative_time_is_rejected(tmp_path):
    trace = _write(tmp_path / "t.csv", "name,time,application,num_replicas,batch_size\na,-5,cifar10,1,128\n")
    res = invoke("simulate", "--trace", trace)
    assert res.exit_code == 2 and "time" in res.stderr


def test_unknown_model_is_rejected(tmp_path):
    trace = _write(tmp_path / "t.csv", "name,time,application,num_replicas,batch_size\na,5,alexnet,1,128\n")
    res = invoke("simulate", "--trace", trace)
    assert res.exit_code == 2 and "alexnet" in res.stderr


def test_unknown_gpu_type_in_cluster_file_names_the_field(tmp_path):
    cluster = _write(tmp_path / "c.yaml", "name: mine\nnodes:\n  - {gpu_type: h900, count: 2, gpus_per_node: 8}\n")
    res = invoke("simulate", "--cluster", cluster, *SMALL[:2])
    assert res.exit_code == 2
    assert "nodes.0.gpu_type" in res.stderr and "h900" in res.stderr


def test_job_larger_than_cluster_under_rigid_policy_is_rejected(tmp_path):
    cluster = _write(tmp_path / "c.yaml", "name: tiny\nnodes:\n  - {gpu_type: t4, count: 1, gpus_per_node: 4}\n")
    trace = _write(tmp_path / "t.csv", "name,time,application,num_replicas,batch_size\na,5,cifar10,8,512\n")
    out = tmp_path / "out"
    res = invoke("simulate", "--cluster", cluster, "--trace", trace, "--policy", "fifo", "--out", str(out))
    assert res.exit_code == 2
    assert f"{trace}:2" in res.stderr and "needs 8 GPUs" in res.stderr
    assert not out.exists()


def test_user_cluster_file_runs(tmp_path):
    cluster = _write(tmp_path / "c.yaml", "name: mine\nnodes:\n  - {gpu_type: v100, count: 4, gpus_per_node: 8, "
                                          "speed_factor: 1.2}\n  - {gpu_type: t4, count: 2, gpus_per_node: 4}\n")
    res = invoke("simulate", "--cluster", cluster, *SMALL[:2], "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["cluster"] == cluster


def test_clusters_and_policies_list_what_exists():
    res = invoke("clusters", "--format", "json")
    names = {json.loads(ln)["name"] for ln in res.stdout.splitlines()}
    assert {"sia-hetero-64", "sia-homo-64", "sia-physical-44", "pal-64", "pal-256"} <= names
    res = invoke("policies", "--format", "json")
    rows = {json.loads(ln)["name"]: json.loads(ln) for ln in res.stdout.splitlines()}
    assert {"fifo", "srtf", "sjf", "las", "tiresias", "fifo-packed", "gandiva", "random", "random-sticky"} <= set(rows)
    assert rows["tiresias"]["tunables"]["ordering.queue_limits_gpu_s"] == [3600.0, 36000.0]
    kinds = ("admission", "ordering", "allocation", "placement", "coordination")
    for name in ("sia", "pollux", "gavel", "pal", "pm-first", "fifo"):
        assert all(rows[name]["stages"][k]["name"] for k in kinds), name  # five stages, none null
    assert rows["sia"]["stages"]["allocation"]["tunables"]["p"] == -0.5
    assert rows["gavel"]["round_s"] == 360.0 and rows["sia"]["round_s"] == 60.0


@needs_data("pal", "workload-traces", "philly")
def test_packed_sticky_beats_random_on_pal64_under_a_locality_penalty():
    def avg_jct(placement):
        res = invoke("simulate", "--cluster", "pal-64", "--trace", "pal-philly:1", "--policy", "fifo",
                     "--placement", placement, "--set", "locality_penalty=1.5", "--round-s", "360",
                     "--format", "json")
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)["avg_jct_s"]

    assert avg_jct("packed-sticky") < avg_jct("random")


WALL_KEYS = ("sim_wall_s", "policy_time_median_s", "policy_time_p99_s")


def _summary(folder):
    return {k: v for k, v in json.loads((folder / "summary.json").read_text()).items() if k not in WALL_KEYS}


def test_saved_config_is_resolved_and_replays_the_same_summary(tmp_path):
    first, replay = tmp_path / "first", tmp_path / "replay"
    res = invoke("simulate", *SMALL, "--policy", "random-sticky", "--seed", "4", "--set", "locality_penalty=1.5",
                 "--out", str(first), "--format", "json")
    assert res.exit_code == 0, res.output
    cfg = json.loads((first / "config.json").read_text())
    assert cfg["round_s"] == 60.0 and cfg["placement"] == "random-sticky" and cfg["world_seed"] == 4
    assert cfg["world"]["locality_penalty"] == 1.5 and "restart_delay_scale" in cfg["world"]
    assert cfg["settings"] == {} and cfg["dlsched_version"] and "random-sticky" in cfg["scheduler"]
    res = invoke("simulate", "--config", str(first / "config.json"), "--out", str(replay), "--format", "json")
    assert res.exit_code == 0, res.output
    assert _summary(replay) == _summary(first)
    assert json.loads((replay / "config.json").read_text()) == cfg


def test_flags_override_a_saved_config(tmp_path):
    first = tmp_path / "first"
    assert invoke("simulate", *SMALL, "--policy", "las", "--out", str(first)).exit_code == 0
    res = invoke("simulate", "--config", str(first / "config.json"), "--policy", "tiresias", "--jobs", "5",
                 "--format", "json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["policy"] == "tiresias" and summary["jobs"] == 5
    assert summary["trace"] == "synthetic:rate=6,hours=2,seed=3"


def test_a_broken_config_file_is_one_error_line(tmp_path):
    bad = _write(tmp_path / "config.json", '{"policy": "fifo", "round_s": 0}')
    out = tmp_path / "out"
    res = invoke("simulate", "--config", bad, "--out", str(out))
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert bad in res.stderr and "round_s" in res.stderr and not out.exists()
    res = invoke("simulate", "--config", _write(tmp_path / "x.json", "{not json"))
    assert res.exit_code == 2 and "not JSON" in res.stderr


def test_python_dash_m_runs_the_command():
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "dlsched", "clusters", "--format", "json"], capture_output=True,
                         text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert "sia-hetero-64" in res.stdout


def test_set_ftf_on_a_replayed_config_keeps_its_other_ftf_options(tmp_path):
    from dlsched.cli.run_options import build_config

    saved = tmp_path / "config.json"
    saved.write_text('{"policy": "fifo", "ftf": {"share": "cluster"}}')
    cfg = build_config(saved, ["ftf.isolated=started"])
    assert (cfg.ftf.share, cfg.ftf.combine, cfg.ftf.isolated) == ("cluster", "ratio", "started")
