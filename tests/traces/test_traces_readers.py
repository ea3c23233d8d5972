"""Each reader on small hand-written files, on bad input, and on the real published traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from dlsched.core import Adaptivity, InputError
from dlsched.traces import (
    detect_format,
    read_gavel_trace,
    read_pal_trace,
    read_philly_log,
    read_sia_workload,
    read_tiresias_trace,
    read_trace,
)
from dlsched.traces.gavel import gavel_model

SIA = "name,time,application,num_replicas,batch_size\nb-1,20.0,bert,2,96\nc-0,10,cifar10,4,2048\n"
PAL = "job_id,num_gpus,submit_time,duration,model\n0,2,30,1500.0,vgg19\n1,1,5,200,GPT2\n"
PHILLY_ISO = ("timestamp,duration,num_gpus,gpu_time,cluster\n"
              "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n")
TIRESIAS = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,164,30\n"
GAVEL10 = ("ResNet-50 (batch size 64)\tpython3 main.py\timagenet\t--num_minibatches\t1\t2000\t2\t1\t-1.000000\t50\n"
           "A3C\tpython3 main.py\ta3c\t--max-steps\t1\t500\t1\t2\t3.0\t10\n")
GAVEL7 = ("Transformer (batch size 128)\tcd x && python3 train.py\t-step\t1\t1000\t0.000000\t8\n"
          "LM (batch size 20)\tcd y && python main.py\t--steps\t1\t400\t6.000000\t1\n")
THROUGHPUTS = {"v100": {
    "('ResNet-50 (batch size 64)', 2)": {"null": 8.0, "('A3C', 1)": [0.0, 0.0]},
    "('A3C', 1)": {"null": 5.0},
    "('Transformer (batch size 128)', 1)": {"null": 10.0},
    "('Transformer (batch size 128)', 8)": {"null": 50.0},
    "('LM (batch size 20)', 1)": {"null": 4.0},
}}


def need(base: Path, rel: str) -> Path:
    path = base / rel
    if not path.exists():
        pytest.skip(f"{path} not found in the data directory")
    return path


@pytest.fixture
def tputs(tmp_path):
    path = tmp_path / "throughputs.json"
    path.write_text(json.dumps(THROUGHPUTS))
    return path


# -- small files -----------------------------------------------------------------------------------------------

def test_sia_workload(write):
    path = write("w.csv", SIA)
    jobs = read_sia_workload(path)
    assert [j.job_id for j in jobs] == ["c-0", "b-1"]  # sorted by submit time
    c = jobs[0]
    assert (c.model, c.num_gpus, c.batch_size, c.min_gpus, c.max_gpus) == ("cifar10", 4, 2048, 1, None)
    assert c.adaptivity is Adaptivity.ADAPTIVE and c.duration_s is None and c.iterations is None
    assert c.origin == f"{path}:3" and jobs[1].origin == f"{path}:2"
    assert all(j.adaptivity is Adaptivity.RIGID for j in read_sia_workload(path, adaptivity="rigid"))
    assert read_trace(path, adaptivity="strong-scaling")[0].adaptivity is Adaptivity.STRONG_SCALING
    with pytest.raises(InputError, match="unknown adaptivity"):
        read_sia_workload(path, adaptivity="elastic")


def test_pal_duration_is_iterations(write):
    path = write("p.csv", PAL)
    jobs = read_pal_trace(path)
    assert [(j.job_id, j.iterations, j.duration_s, j.num_gpus) for j in jobs] == [
        ("1", 200.0, None, 1), ("0", 1500.0, None, 2)]
    assert all(j.adaptivity is Adaptivity.RIGID for j in jobs)
    with_bs = write("pb.csv", "job_id,num_gpus,submit_time,duration,model,batch_size\n7,1,0,10,vgg19,32\n")
    assert read_trace(with_bs)[0].batch_size == 32


def test_philly_iso_and_numeric(write):
    path = write("ph.csv", PHILLY_ISO)
    jobs = read_philly_log(path)
    assert [j.submit_time_s for j in jobs] == [0.0, 48 * 60 + 52.0]
    first = jobs[0]
    assert (first.job_id, first.duration_s, first.num_gpus, first.model, first.user) == (
        "1", 2951.0, 2, "philly", "6214e9")
    assert first.reference_gpu == "v100" and first.adaptivity is Adaptivity.RIGID
    assert first.origin == f"{path}:3"
    numeric = write("pn.csv", "timestamp,duration,num_gpus\n100,5,1\n40,7,4\n")
    assert [(j.submit_time_s, j.duration_s) for j in read_trace(numeric)] == [(0.0, 7.0), (60.0, 5.0)]
    mixed = write("pm.csv", "timestamp,duration,num_gpus\n100,5,1\n2017-10-09 07:01:55,7,4\n")
    with pytest.raises(InputError, match="mixes") as err:
        read_philly_log(mixed)
    assert err.value.line == 3


def test_tiresias(write):
    (job,) = read_tiresias_trace(write("t.csv", TIRESIAS))
    assert (job.model, job.duration_s, job.iterations, job.num_gpus) == ("vgg19", 164.0, None, 1)


def test_gavel_10_field(write, tputs):
    path = write("g.trace", GAVEL10)
    jobs = read_gavel_trace(path, throughputs=tputs)
    a3c, resnet = jobs  # A3C arrives first
    assert (resnet.job_id, resnet.model, resnet.batch_size, resnet.num_gpus) == ("0", "resnet50", 64, 2)
    assert resnet.duration_s == pytest.approx(2000 / 8.0) and resnet.deadline_s is None
    assert resnet.origin == f"{path}:1" and resnet.reference_gpu == "v100"
    assert (a3c.model, a3c.batch_size, a3c.priority) == ("a3c", None, 2.0)
    assert a3c.deadline_s == pytest.approx(10 + 3.0 * 100.0)  # arrival + SLO x duration


def test_gavel_7_field_plain_and_gzip(tmp_path, tputs):
    plain = tmp_path / "vc.trace"
    plain.write_text(GAVEL7)
    gz = tmp_path / "vc.trace.gz"
    gz.write_bytes(gzip.compress(GAVEL7.encode()))
    for path in (plain, gz):
        assert detect_format(path) == "gavel"
        t, lm = read_gavel_trace(path, throughputs=tputs)
        # msr traces: steps / single-GPU throughput, whatever the scale factor
        assert (t.model, t.num_gpus, t.duration_s) == ("transformer", 8, pytest.approx(100.0))
        assert (lm.model, lm.submit_time_s, lm.duration_s) == ("lm", 6.0, pytest.approx(100.0))
    t = read_gavel_trace(plain, throughputs=tputs, steps_basis="scale-factor")[0]
    assert t.duration_s == pytest.approx(1000 / 50.0)


def test_gavel_model_labels():
    assert gavel_model("ResNet-18 (batch size 256)") == ("resnet18", 256)
    assert gavel_model("Recommendation (batch size 8192)") == ("recommendation", 8192)
    assert gavel_model("CycleGAN") == ("cyclegan", None)
    with pytest.raises(KeyError):
        gavel_model("VGG-16 (batch size 8)")


def test_gavel_missing_throughputs(write, tmp_path, monkeypatch):
    path = write("g.trace", GAVEL10)
    with pytest.raises(InputError, match="throughput") as err:
        read_gavel_trace(path, throughputs=tmp_path / "nope.json")
    assert "nope.json" in str(err.value)
    monkeypatch.setenv("DLSCHED_DATA", str(tmp_path / "no-data-dir"))
    with pytest.raises(InputError, match="DLSCHED_DATA"):
        read_gavel_trace(path)


# -- bad input -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("reader", "header", "row", "field"), [
    (read_sia_workload, "name,time,application,num_replicas,batch_size", "x,,bert,1,12", "time"),
    (read_sia_workload, "name,time,application,num_replicas,batch_size", "x,ten,bert,1,12", "time"),
    (read_sia_workload, "name,time,application,num_replicas,batch_size", "x,-3,bert,1,12", "time"),
    (read_sia_workload, "name,time,application,num_replicas,batch_size", "x,3,bert,0,12", "num_replicas"),
    (read_pal_trace, "job_id,num_gpus,submit_time,duration,model", "9,1,-1,10,vgg19", "submit_time"),
    (read_pal_trace, "job_id,num_gpus,submit_time,duration,model", "9,0,1,10,vgg19", "num_gpus"),
    (read_pal_trace, "job_id,num_gpus,submit_time,duration,model", "9,1,1,abc,vgg19", "duration"),
    (read_philly_log, "timestamp,duration,num_gpus", "yesterday,10,1", "timestamp"),
    (read_philly_log, "timestamp,duration,num_gpus", ",10,1", "timestamp"),
    (read_philly_log, "timestamp,duration,num_gpus", "-5,10,1", "timestamp"),
    (read_philly_log, "timestamp,duration,num_gpus", "5,10,0", "num_gpus"),
    (read_tiresias_trace, "job_id,num_gpu,submit_time,iterations,model_name,duration,interval",
     "1,1,x,5,vgg19,10,1", "submit_time"),
])
def test_bad_rows_name_file_and_line(write, reader, header, row, field):
    ok = {read_sia_workload: "a,0,bert,1,12", read_pal_trace: "0,1,0,10,vgg19",
          read_philly_log: "0,10,1", read_tiresias_trace: "0,1,0,5,vgg19,10,1"}[reader]
    path = write("bad.csv", f"{header}\n{ok}\n{row}\n")
    with pytest.raises(InputError) as err:
        reader(path)
    assert (err.value.source, err.value.line, err.value.field) == (str(path), 3, field)
    assert str(err.value).startswith(f"{path}:3 field '{field}'")


@pytest.mark.parametrize("reader", [read_sia_workload, read_pal_trace, read_philly_log])
def test_malformed_line(write, reader):
    text = {read_sia_workload: SIA, read_pal_trace: PAL, read_philly_log: PHILLY_ISO}[reader]
    path = write("m.csv", text + "1,2\n")
    with pytest.raises(InputError, match="malformed line") as err:
        reader(path)
    assert err.value.line == 4


def test_missing_column(write):
    path = write("mc.csv", "name,time,application\na,1,bert\n")
    with pytest.raises(InputError, match="missing column 'num_replicas'") as err:
        read_sia_workload(path)
    assert (err.value.line, err.value.field) == (1, "num_replicas")
    path = write("mp.csv", "job_id,num_gpus,submit_time,model\n0,1,1,vgg19\n")
    with pytest.raises(InputError, match="missing column 'duration'"):
        read_pal_trace(path)


def test_gavel_bad_lines(write, tputs):
    bad_width = write("g1.trace", GAVEL10 + "A3C\tcmd\t1\t2\n")
    with pytest.raises(InputError, match="malformed line") as err:
        read_gavel_trace(bad_width, throughputs=tputs)
    assert err.value.line == 3
    unknown = write("g2.trace", "VGG (batch size 8)\tcmd\tdir\targ\t1\t100\t1\t1\t-1\t0\n")
    with pytest.raises(InputError, match="unknown Gavel job type") as err:
        read_gavel_trace(unknown, throughputs=tputs)
    assert (err.value.line, err.value.field) == (1, "job_type")
    negative = write("g3.trace", GAVEL7.replace("6.000000", "-6"))
    with pytest.raises(InputError) as err:
        read_gavel_trace(negative, throughputs=tputs)
    assert (err.value.line, err.value.field) == (2, "arrival_time")
    unmeasured = write("g4.trace", GAVEL10.replace("\t2000\t2\t", "\t2000\t4\t"))
    with pytest.raises(InputError, match="no measured V100 throughput") as err:
        read_gavel_trace(unmeasured, throughputs=tputs)
    assert err.value.line == 1


def test_unknown_header_lists_formats(write):
    path = write("u.csv", "a,b,c\n1,2,3\n")
    with pytest.raises(InputError, match="unrecognised trace header") as err:
        read_trace(path)
    for fmt in ("canonical", "sia", "pal", "philly", "gavel"):
        assert fmt in str(err.value)
    with pytest.raises(InputError, match="empty"):
        read_trace(write("e.csv", "\n\n"))
    with pytest.raises(InputError, match="not found"):
        read_trace(path.parent / "missing.csv")


def test_detect_format(write):
    assert detect_format(write("1.csv", SIA)) == "sia"
    assert detect_format(write("2.csv", PAL)) == "pal"
    assert detect_format(write("3.csv", PHILLY_ISO)) == "philly"
    assert detect_format(write("4.csv", TIRESIAS)) == "tiresias"
    assert detect_format(write("5.trace", GAVEL10)) == "gavel"
    assert detect_format(write("6.csv", "job_id,submit_time_s,model,num_gpus\n")) == "canonical"


# -- real published traces -----------------------------------------------------------------------------------

def test_real_sia_and_pollux_workloads(data):
    for rel in ("sia/workloads/philly/workload-1.csv", "sia/workloads/saturn/workload-10.csv",
                "pollux/workloads/workload-6.csv", "pollux/workloads-realistic/workload-1.csv"):
        jobs = read_trace(need(data, rel))
        assert len(jobs) == 160 and all(j.adaptivity is Adaptivity.ADAPTIVE for j in jobs)
        assert {j.model for j in jobs} <= {"cifar10", "bert", "deepspeech2", "imagenet", "ncf", "yolov3"}
        assert jobs[-1].submit_time_s <= 8 * 3600
    scaled = read_trace(need(data, "sia/workloads/scale/scale_4x/workload-1.csv"))
    assert len(scaled) == 640 and len({j.job_id for j in scaled}) == 640


def test_real_pal_traces(data):
    jobs = read_trace(need(data, "pal/workload-traces/philly/workload-1.csv"))
    assert len(jobs) == 160 and all(j.iterations and j.duration_s is None for j in jobs)
    assert {j.model for j in jobs} == {"vgg19", "DCGAN", "BERT", "GPT2", "PointNet", "resnet50"}
    blox = read_trace(need(data, "pal/blox_exp/workload/sia-160job-trace.csv"))
    assert len(blox) == 160 and all(j.batch_size for j in blox)


def test_real_gavel_traces(data):
    need(data, "gavel/simulation_throughputs.json")
    plain = read_trace(need(data, "gavel/traces/msr/seed=0/0e4a51.trace"))
    gz = read_trace(need(data, "gavel/traces/msr/seed=1/0e4a51.trace.gz"))
    assert len(plain) == len(gz) == 1181
    assert all(j.duration_s > 0 and j.reference_gpu == "v100" for j in plain)
    physical = read_trace(need(data, "gavel/traces/physical_cluster/artifact_evaluation.trace"))
    assert physical[0].model == "resnet50" and physical[0].duration_s == pytest.approx(2931 / 4.394, rel=0.01)


def test_real_philly_and_tiresias(data):
    jobs = read_trace(need(data, "sia/traces/philly.csv"))
    assert len(jobs) == 82247 and jobs[0].submit_time_s == 0.0
    assert all(a.submit_time_s <= b.submit_time_s for a, b in zip(jobs, jobs[1:], strict=False))
    assert len({j.user for j in jobs}) == 15
    assert len(read_trace(need(data, "tiresias/60_job.csv"))) == 60


def test_adaptivity_override_only_for_sia(write):
    with pytest.raises(InputError, match="only to Sia/Pollux"):
        read_trace(write("p.csv", PAL), adaptivity="adaptive")
