"""Hops workloads and user-selectable requirements in the trace schema."""

from __future__ import annotations

import pytest

from dlsched.core import Adaptivity, InputError, JobSpec
from dlsched.traces import read_canonical, write_trace
from dlsched.traces.hops import CLASS_GPU_HOURS, PAIRS
from dlsched.traces.resolve import resolve_trace
from dlsched.world.hops import MODELS

HEADER = "job_id,submit_time_s,model,num_gpus,adaptivity,duration_s,min_gpus,max_gpus,gpu_counts,gpu_levels,per_gpu_batch"


def test_table3_workload_is_25_jobs_in_two_and_a_half_hours_with_requirement_sets():
    jobs, _ = resolve_trace("hops-table3:seed=1")
    assert len(jobs) == 25
    assert jobs[0].submit_time_s == 0.0 and max(j.submit_time_s for j in jobs) <= 2.5 * 3600
    classes = dict(PAIRS)
    for j in jobs:
        assert j.model in MODELS and j.reference_gpu == "1080ti" and j.per_gpu_batch
        assert 1 <= len(j.gpu_counts) <= 8 and set(j.gpu_counts) <= set(range(1, 17))
        assert j.num_gpus == j.gpu_counts[(len(j.gpu_counts) - 1) // 2]  # the median: Gavel's rigid count
        lo, hi = CLASS_GPU_HOURS[classes[j.model]]
        assert lo <= j.duration_s * j.num_gpus / 3600 <= hi  # GPU duration within the model's Table 2 class
    assert resolve_trace("hops-table3:seed=1")[0] == jobs  # seeded
    assert resolve_trace("hops-table3:seed=2")[0] != jobs


def test_table4_workload_arrives_as_poisson_at_the_given_rate():
    jobs, _ = resolve_trace("hops:jobs=500,rate=100,seed=1")
    assert len(jobs) == 500
    span_h = jobs[-1].submit_time_s / 3600
    assert 4.0 < span_h < 6.0  # 500 arrivals at 100 per hour: about 5 hours
    assert len(resolve_trace("hops:jobs=20,rate=30,seed=3")[0]) == 20


def test_each_job_can_finish_within_max_run_h_at_its_largest_requirement():
    jobs, _ = resolve_trace("hops:jobs=500,rate=100,seed=1")
    hours = [j.duration_s * j.num_gpus / 3600 / j.gpu_counts[-1] for j in jobs]  # on the 1080Ti, largest count
    assert max(hours) <= 10.0
    assert sum(len(j.gpu_counts) == 1 for j in jobs) > 20  # rigid jobs remain, of sizes they can finish
    unbounded, _ = resolve_trace("hops:jobs=500,rate=100,seed=1,max_run_h=0")
    assert max(j.duration_s * j.num_gpus / 3600 / j.gpu_counts[-1] for j in unbounded) > 30.0
    tight, _ = resolve_trace("hops-table3:seed=1,max_run_h=2")
    assert all(j.duration_s * j.num_gpus / 3600 / j.gpu_counts[-1] <= 2.0 for j in tight
               if j.duration_s * j.num_gpus / 3600 <= 2.0 * 16)


@pytest.mark.parametrize("spec, words", [
    ("hops:max_run_h=-1", "max_run_h must be"),
    ("hops:jobs=0", "jobs must be"), ("hops:rate=-5", "rate must be"), ("hops:seed=1.5", "seed must be"),
    ("hops:speed=3", "unknown key"), ("hops-table3:jobs=10", "unknown key"),
])
def test_bad_options_are_refused_with_the_range(spec, words):
    with pytest.raises(InputError, match=words):
        resolve_trace(spec)


def test_requirement_columns_round_trip(tmp_path):
    specs = [JobSpec("a", 0.0, "vgg11", 4, adaptivity=Adaptivity.STRONG_SCALING, duration_s=60.0, min_gpus=2,
                     max_gpus=8, gpu_counts=(2, 4, 8), per_gpu_batch=True, batch_size=32),
             JobSpec("b", 1.0, "philly", 2, duration_s=60.0)]
    path = write_trace(specs, tmp_path / "t.csv")
    back = read_canonical(path)
    assert back[0].gpu_counts == (2, 4, 8) and back[0].per_gpu_batch
    assert back[0].allows_gpu_count(4) and not back[0].allows_gpu_count(3)
    assert back[1].gpu_counts == () and back[1].requirement_set() == (2,)  # no requirements: rigid count


def test_bounds_with_levels_spread_evenly(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(f"{HEADER}\nj,0,vgg11,6,strong-scaling,60,1,16,,4,true\n")
    (j,) = read_canonical(p)
    assert j.gpu_counts == (1, 6, 11, 16) and j.requirement_set() == (1, 6, 11, 16)


@pytest.mark.parametrize("row, field", [
    ("j,0,vgg11,3,strong-scaling,60,,,2;4;8,,", "num_gpus"),  # request outside its own set
    ("j,0,vgg11,4,rigid,60,,,2;4,,", "gpu_counts"),  # rigid jobs run on one count
    ("j,0,vgg11,4,strong-scaling,60,,,2;x,,", "gpu_counts"),
    ("j,0,vgg11,4,strong-scaling,60,1,8,4,3,", "gpu_levels"),  # both forms at once
    ("j,0,vgg11,4,strong-scaling,60,1,,,3,", "gpu_levels"),  # levels without an upper bound
    ("j,0,vgg11,4,strong-scaling,60,,,,,maybe", "per_gpu_batch"),
])
def test_bad_requirements_name_line_and_field(tmp_path, row, field):
    p = tmp_path / "t.csv"
    p.write_text(f"{HEADER}\n{row}\n")
    with pytest.raises(InputError) as exc:
        read_canonical(p)
    assert f"{p}:2" in str(exc.value) and field in str(exc.value)
