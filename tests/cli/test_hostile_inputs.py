"""A corpus of hostile inputs, each as a new user might type it.

Every row must end the same way: exit code 2, exactly one ``error:`` line that names the field, file or
value at fault, no traceback, nothing written to ``--out``, and within a bounded time (never a hang).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest
from typer.testing import CliRunner

from dlsched.cli import app

runner = CliRunner()
#: Seconds after which a hostile input counts as hanging (pytest-timeout; the checks run before any simulation,
#: but a loaded machine may take long, and a time bound here guards against a hang only).
HANG_S = 300
SMALL = ["--trace", "synthetic:rate=6,hours=1,seed=3", "--cluster", "sia-hetero-64"]

HEADER = "job_id,submit_time_s,model,num_gpus,batch_size,min_gpus,max_gpus,adaptivity,duration_s,iterations\n"
GOOD_ROW = "a,0,philly,2,,,,rigid,600,\n"


def trace_file(*rows: str, header: str = HEADER) -> dict[str, str]:
    return {"trace.csv": header + "".join(rows)}


def cluster_file(body: str) -> dict[str, str]:
    return {"cluster.yaml": body}


GOOD_CLUSTER = "name: tiny\nnodes:\n  - gpu_type: t4\n    count: 2\n    gpus_per_node: 4\n"


@dataclass(frozen=True)
class Case:
    """One hostile input: the command line (``{tmp}`` is the test's folder), files to create there, and words
    the error line must contain (the field or file it names)."""

    name: str
    args: tuple[str, ...]
    names: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)


def sim(*args: str) -> tuple[str, ...]:
    return ("simulate", *SMALL, *args, "--out", "{tmp}/out")


def sim_trace(*args: str) -> tuple[str, ...]:
    return ("simulate", "--trace", "{tmp}/trace.csv", "--cluster", "sia-hetero-64", *args, "--out", "{tmp}/out")


CASES = [
    # -- the round and the run ----------------------------------------------------------------------------
    Case("round nan", sim("--round-s", "nan"), ("round_s",)),
    Case("round inf", sim("--round-s", "inf"), ("round_s",)),
    Case("round 1e-9", sim("--round-s", "1e-9"), ("round_s",)),
    Case("round zero", sim("--round-s", "0"), ("round_s",)),
    Case("round negative", sim("--round-s", "-5"), ("round_s",)),
    Case("round over a day", sim("--round-s", "100000"), ("round_s",)),
    Case("round not a number", sim("--round-s", "abc"), ("round",)),
    Case("seed negative", sim("--seed", "-1"), ("seed",)),
    Case("seed fractional", sim("--seed", "1.5"), ("seed",)),
    Case("jobs zero", sim("--jobs", "0"), ("jobs",)),
    Case("jobs fractional", sim("--jobs", "2.5"), ("jobs",)),
    Case("max_time_s zero", sim("--set", "max_time_s=0"), ("max_time_s",)),
    Case("max_time_s negative", sim("--set", "max_time_s=-5"), ("max_time_s",)),
    Case("stall_rounds zero", sim("--set", "stall_rounds=0"), ("stall_rounds",)),
    # -- world options --------------------------------------------------------------------------------------
    Case("locality penalty text", sim("--set", "locality_penalty=abc"), ("locality_penalty",)),
    Case("locality penalty nan", sim("--set", "locality_penalty=nan"), ("locality_penalty",)),
    Case("locality penalty zero", sim("--set", "locality_penalty=0"), ("locality_penalty",)),
    Case("locality penalty negative", sim("--set", "locality_penalty=-1"), ("locality_penalty",)),
    Case("locality penalty inf", sim("--set", "locality_penalty=inf"), ("locality_penalty",)),
    Case("restart delay scale negative", sim("--set", "restart_delay_scale=-1"), ("restart_delay_scale",)),
    Case("restart delay scale nan", sim("--set", "world.restart_delay_scale=nan"), ("restart_delay_scale",)),
    Case("gpu speeds unknown", sim("--set", "world.gpu_speeds=fastest"), ("gpu_speeds",)),
    # -- policy tunables -------------------------------------------------------------------------------------
    Case("sia p zero", sim("--policy", "sia", "--set", "p=0"), ("p",)),
    Case("sia p nan", sim("--policy", "sia", "--set", "p=nan"), ("p",)),
    Case("sia lambda negative", sim("--policy", "sia", "--set", "lambda_=-1"), ("lambda_",)),
    Case("sia tau negative", sim("--policy", "sia", "--set", "tau=-5"), ("tau",)),
    Case("sia time limit zero", sim("--policy", "sia", "--set", "time_limit_s=0"), ("time_limit_s",)),
    Case("sia milp options negative", sim("--policy", "sia", "--set", "milp_max_options=-1"),
         ("milp_max_options",)),
    Case("sia profiling unknown", sim("--policy", "sia", "--set", "profiling=magic"), ("profiling",)),
    Case("sia reservation malformed", sim("--policy", "sia", "--set", "reserve=a100"), ("reserve",)),
    Case("sia restart penalty zero", sim("--policy", "sia", "--set", "restart_penalty_s=0"),
         ("restart_penalty_s",)),
    Case("gavel lease zero", sim("--policy", "gavel", "--set", "lease_s=0"), ("lease_s",)),
    Case("gavel lease inf", sim("--policy", "gavel", "--set", "lease_s=inf"), ("lease_s",)),
    Case("gavel objective unknown", sim("--policy", "gavel", "--set", "objective=fastest"), ("objective",)),
    Case("pollux population one", sim("--policy", "pollux", "--set", "population=1"), ("population",)),
    Case("pollux generations negative", sim("--policy", "pollux", "--set", "generations=-1"), ("generations",)),
    Case("pollux restart delay negative", sim("--policy", "pollux", "--set", "restart_delay_s=-1"),
         ("restart_delay_s",)),
    Case("tiresias threshold negative", sim("--policy", "tiresias", "--set", "queue_limits_gpu_s=-1,5"),
         ("queue_limits_gpu_s",)),
    Case("tiresias thresholds decreasing", sim("--policy", "tiresias", "--set", "queue_limits_gpu_s=3600,100"),
         ("queue_limits_gpu_s",)),
    Case("pal l_across zero", sim("--policy", "pal", "--set", "l_across=0"), ("l_across",)),
    Case("pal l_across nan", sim("--policy", "pal", "--set", "l_across=nan"), ("l_across",)),
    Case("pal k_min above k_max", sim("--policy", "pal", "--set", "k_min=5", "--set", "k_max=2"), ("k_",)),
    Case("unknown tunable", sim("--set", "bogus=1"), ("bogus",)),
    Case("set without equals", sim("--set", "noequals"), ("set",)),
    # -- names ----------------------------------------------------------------------------------------------
    Case("unknown policy", sim("--policy", "nosuch"), ("policy", "nosuch")),
    Case("unknown placement", sim("--placement", "nosuch"), ("placement", "nosuch")),
    Case("ordering that cannot steer sia", sim("--policy", "sia", "--ordering", "las"), ("ordering", "sia")),
    Case("placement that cannot follow gang", sim("--placement", "sia"), ("placement", "gang")),
    Case("unknown cluster", ("simulate", "--cluster", "nosuch", "--out", "{tmp}/out"), ("nosuch",)),
    Case("unknown named trace", ("simulate", "--trace", "nosuch:1", "--out", "{tmp}/out"), ("nosuch",)),
    # -- generated and named traces ------------------------------------------------------------------------
    Case("synthetic fractional seed", ("simulate", "--trace", "synthetic:rate=20,hours=8,seed=1.5",
                                       "--out", "{tmp}/out"), ("seed",)),
    Case("synthetic negative rate", ("simulate", "--trace", "synthetic:rate=-1", "--out", "{tmp}/out"),
         ("rate",)),
    Case("synthetic nan rate", ("simulate", "--trace", "synthetic:rate=nan", "--out", "{tmp}/out"), ("rate",)),
    Case("synthetic endless hours", ("simulate", "--trace", "synthetic:hours=1e300", "--out", "{tmp}/out"),
         ("hours",)),
    Case("named trace fractional index", ("simulate", "--trace", "sia-philly:1.5", "--out", "{tmp}/out"),
         ("sia-philly",)),
    # -- trace files -----------------------------------------------------------------------------------------
    Case("submit time 1e300", sim_trace(), ("trace.csv:2", "submit_time_s"), trace_file("a,1e300,philly,2,,,,rigid,600,\n")),
    Case("submit time 1e17", sim_trace(), ("trace.csv:2", "submit_time_s"), trace_file("a,1e17,philly,2,,,,rigid,600,\n")),
    Case("submit time negative", sim_trace(), ("trace.csv:2", "submit_time_s"),
         trace_file("a,-5,philly,2,,,,rigid,600,\n")),
    Case("duration 1e18", sim_trace(), ("trace.csv:2", "duration_s"), trace_file("a,0,philly,2,,,,rigid,1e18,\n")),
    Case("duration zero", sim_trace(), ("trace.csv:2", "duration_s"), trace_file("a,0,philly,2,,,,rigid,0,\n")),
    Case("gpus zero", sim_trace(), ("trace.csv:2", "num_gpus"), trace_file("a,0,philly,0,,,,rigid,600,\n")),
    Case("batch size 1e9", sim_trace("--policy", "sia"), ("trace.csv:2", "batch_size"),
         trace_file("a,0,cifar10,2,1000000000,,,adaptive,,\n")),
    Case("unknown model", sim_trace("--policy", "sia"), ("trace.csv:2", "model"),
         trace_file("a,0,no-such-model,2,,,,adaptive,,\n")),
    Case("header only", sim_trace(), ("trace.csv",), trace_file()),
    Case("empty file", sim_trace(), ("trace.csv",), {"trace.csv": ""}),
    Case("missing required column", sim_trace(), ("trace.csv", "num_gpus"),
         trace_file("a,0,philly,600\n", header="job_id,submit_time_s,model,duration_s\n")),
    Case("duration and iterations", sim_trace(), ("trace.csv:2",), trace_file("a,0,philly,2,,,,rigid,600,100\n")),
    Case("row with too many fields", sim_trace(), ("trace.csv:2",), trace_file("a,0,philly,2,,,,rigid,600,,x,y\n")),
    Case("job larger than the cluster", sim_trace(), ("trace.csv:2", "num_gpus"),
         trace_file("a,0,philly,4096,,,,rigid,600,\n")),
    # -- cluster files ---------------------------------------------------------------------------------------
    Case("gpus_per_node true", ("simulate", "--cluster", "{tmp}/cluster.yaml", *SMALL[:2], "--out", "{tmp}/out"),
         ("gpus_per_node",), cluster_file("name: x\nnodes:\n  - gpu_type: t4\n    count: 2\n    gpus_per_node: true\n")),
    Case("speed factor inf", ("simulate", "--cluster", "{tmp}/cluster.yaml", *SMALL[:2], "--out", "{tmp}/out"),
         ("speed_factor",), cluster_file(GOOD_CLUSTER + "    speed_factor: .inf\n")),
    Case("speed factor 1e-300", ("simulate", "--cluster", "{tmp}/cluster.yaml", *SMALL[:2], "--out", "{tmp}/out"),
         ("speed_factor",), cluster_file(GOOD_CLUSTER + "    speed_factor: 1.0e-300\n")),
    Case("cluster unknown gpu type", ("simulate", "--cluster", "{tmp}/cluster.yaml", *SMALL[:2], "--out",
                                      "{tmp}/out"), ("gpu_type",), cluster_file(GOOD_CLUSTER.replace("t4", "h9000"))),
    Case("cluster negative count", ("simulate", "--cluster", "{tmp}/cluster.yaml", *SMALL[:2], "--out", "{tmp}/out"),
         ("count",), cluster_file(GOOD_CLUSTER.replace("count: 2", "count: -2"))),
    Case("cluster not yaml", ("simulate", "--cluster", "{tmp}/cluster.yaml", *SMALL[:2], "--out", "{tmp}/out"),
         ("cluster.yaml",), cluster_file("nodes: [unclosed\n")),
    # -- outputs ---------------------------------------------------------------------------------------------
    Case("out empty", ("simulate", *SMALL, "--out", ""), ("out",)),
    Case("out is a regular file", ("simulate", *SMALL, "--out", "{tmp}/file"), ("file",), {"file": "keep me\n"}),
    Case("out under a regular file", ("simulate", *SMALL, "--out", "{tmp}/file/run"), ("file",),
         {"file": "keep me\n"}),
    # -- compare ---------------------------------------------------------------------------------------------
    Case("compare workers zero", ("compare", *SMALL, "--policies", "fifo,las", "--workers", "0"), ("workers",)),
    Case("compare workers negative", ("compare", *SMALL, "--policies", "fifo,las", "--workers", "-1"),
         ("workers",)),
    Case("compare same policy twice", ("compare", *SMALL, "--policies", "fifo,fifo"), ("fifo",)),
    Case("compare zero seeds", ("compare", *SMALL, "--policies", "fifo,las", "--seeds", "0"), ("seeds",)),
    # -- trace commands ----------------------------------------------------------------------------------------
    Case("validate header only", ("trace", "validate", "{tmp}/trace.csv"), ("trace.csv",), trace_file()),
    Case("validate unknown model", ("trace", "validate", "{tmp}/trace.csv"), ("trace.csv:2", "model"),
         trace_file("a,0,no-such-model,2,,,,adaptive,,\n")),
    Case("convert onto a directory", ("trace", "convert", "{tmp}/trace.csv", "{tmp}/adir"), ("adir",),
         {**trace_file(GOOD_ROW), "adir/keep": "x\n"}),
]


def test_the_corpus_is_large_and_names_are_unique():
    assert len(CASES) >= 60
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.timeout(HANG_S)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input_is_refused_cleanly(case: Case, tmp_path):
    for rel, text in case.files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    args = [a.replace("{tmp}", str(tmp_path)) for a in case.args]
    res = runner.invoke(app, args)
    text = res.output
    assert res.exit_code == 2, text
    assert "Traceback" not in text and res.exception is None or isinstance(res.exception, SystemExit), text
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, text
    for word in case.names:
        assert word in errors[0], (word, errors[0])
    assert not (tmp_path / "out").exists()  # nothing written
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before  # no file touched, none added


def test_no_stray_temporary_files_are_left_next_to_the_targets(tmp_path):
    (tmp_path / "file").write_text("keep me\n")
    runner.invoke(app, ["simulate", *SMALL, "--out", str(tmp_path / "file")])
    assert sorted(os.listdir(tmp_path)) == ["file"]
