"""The job spec: every field checked with an error naming it, and the JobSpec each adaptivity maps to."""

from __future__ import annotations

import pytest

from dlsched.core import Adaptivity, InputError
from dlsched.service.spec import JobSubmission, parse_submission

BASE = {"name": "resnet-demo", "command": "python resnet.py --epochs 2", "working_dir": "/work", "gpus": 2}


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"gpus": 0}, "gpus", "greater than or equal to 1"),
    ({"gpus": 1025}, "gpus", "less than or equal to 1024"),
    ({"gpus": "two"}, "gpus", "an integer 1..1024, a list of them, or {min"),
    ({"gpus": True}, "gpus", "an integer"),
    ({"gpus": [2, 1], "adaptivity": "per-gpu-batch", "batch_size": 32}, "gpus", "ascending"),
    ({"gpus": [1, 2]}, "gpus", "rigid job needs an integer"),
    ({"gpus": {"min": 4, "max": 2}, "adaptivity": "adaptive", "batch_size": 64}, "gpus", "must not exceed"),
    ({"gpu_types": ["a10O"]}, "gpu_types", "did you mean 'a100'"),
    ({"gpu_types": ["a100", "a100"]}, "gpu_types", "twice"),
    ({"name": "has space"}, "name", "A-Z a-z 0-9"),
    ({"name": "x" * 65}, "name", "at most 64"),
    ({"working_dir": "relative/dir"}, "working_dir", "absolute path"),
    ({"command": ""}, "command", "at least 1"),
    ({"command": "echo \x00"}, "command", "NUL"),
    ({"env": {"1BAD": "x"}}, "env", "environment variable name"),
    ({"adaptivity": "stretchy"}, "adaptivity", "rigid"),
    ({"adaptivity": "per-gpu-batch"}, "batch_size", "per-GPU batch size"),
    ({"batch_size": 0}, "batch_size", "greater than or equal to 1"),
    ({"batch_size": 64, "max_batch_size": 128}, "max_batch_size", "only an adaptive job"),
    ({"adaptivity": "adaptive", "batch_size": 64, "max_batch_size": 32}, "max_batch_size", "at least batch_size"),
    ({"deadline_s": 0}, "deadline_s", "greater than 0"),
    ({"priority": -1}, "priority", "greater than 0"),
    ({"max_failures": 101}, "max_failures", "less than or equal to 100"),
    ({"resources": {"cpus_per_worker": 0}}, "resources.cpus_per_worker", "greater than 0"),
    ({"resources": {"gpus_per_worker": 1}}, "resources.gpus_per_worker", "unknown key"),
    ({"colour": "blue"}, "colour", "unknown key"),
])
def test_a_bad_field_is_named(change, field, words):
    with pytest.raises(InputError) as err:
        parse_submission({**BASE, **change}, source="job.yaml")
    assert err.value.field == field
    assert str(err.value).startswith(f"job.yaml field '{field}': ")
    assert words in str(err.value)


def test_missing_required_fields_and_non_mappings():
    with pytest.raises(InputError, match="field 'name': required"):
        parse_submission({"command": "x", "working_dir": "/", "gpus": 1})
    with pytest.raises(InputError, match="mapping"):
        parse_submission(["name"])


def test_rigid_maps_to_a_rigid_jobspec_with_an_absolute_deadline():
    sub = parse_submission({**BASE, "batch_size": 64, "deadline_s": 600, "priority": 2.0, "gpu_types": ["a100"]})
    spec = sub.to_job_spec("job-3", 100.0, "alice")
    assert (spec.job_id, spec.user, spec.model, spec.adaptivity) == ("job-3", "alice", "resnet-demo", Adaptivity.RIGID)
    assert (spec.num_gpus, spec.lower_gpus, spec.upper_gpus, spec.batch_size) == (2, 2, 2, 64)
    assert (spec.deadline_s, spec.priority, spec.gpu_types) == (700.0, 2.0, ("a100",))


def test_per_gpu_batch_maps_like_a_hops_job():
    sub = parse_submission({**BASE, "gpus": [1, 2, 4], "adaptivity": "per-gpu-batch", "batch_size": 32,
                            "model": "resnet18"})
    spec = sub.to_job_spec("job-1", 0.0, "bob")
    assert spec.per_gpu_batch and spec.model == "resnet18"
    assert (spec.adaptivity, spec.gpu_counts, spec.num_gpus) == (Adaptivity.STRONG_SCALING, (1, 2, 4), 2)
    assert spec.requirement_set() == (1, 2, 4)
    single = parse_submission({**BASE, "adaptivity": "per-gpu-batch", "batch_size": 32}).to_job_spec("j", 0.0, "u")
    assert (single.adaptivity, single.gpu_counts) == (Adaptivity.RIGID, (2,))


def test_adaptive_maps_to_its_gpu_range():
    sub = parse_submission({**BASE, "gpus": {"min": 1, "max": 8}, "adaptivity": "adaptive", "batch_size": 64,
                            "max_batch_size": 1024})
    spec = sub.to_job_spec("job-2", 0.0, "carol")
    assert spec.adaptivity is Adaptivity.ADAPTIVE
    assert (spec.lower_gpus, spec.upper_gpus, spec.batch_size) == (1, 8, 64)
    as_int = parse_submission({**BASE, "gpus": 4, "adaptivity": "adaptive", "batch_size": 64})
    assert (as_int.to_job_spec("j", 0, "u").lower_gpus, as_int.to_job_spec("j", 0, "u").upper_gpus) == (1, 4)


def test_a_spec_survives_json_unchanged():
    sub = parse_submission({**BASE, "env": {"A": "1"}, "resources": {"cpus_per_worker": 2}})
    again = JobSubmission.model_validate(sub.model_dump(mode="json"))
    assert again == sub
