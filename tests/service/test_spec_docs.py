"""docs/job-spec.md is the model: regenerated, it is the page checked in; what it says of gpus holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlsched.core import Adaptivity, InputError
from dlsched.service.spec import JobSubmission, parse_submission
from dlsched.service.spec_docs import render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "job-spec.md"


def test_the_page_is_what_the_model_generates() -> None:
    assert PAGE.read_text() == render(), (
        "docs/job-spec.md is out of date: run python -m dlsched.service.spec_docs > docs/job-spec.md")


def test_every_field_is_on_the_page_with_a_description() -> None:
    page = PAGE.read_text()
    for name, field in JobSubmission.model_fields.items():
        assert field.description, f"{name} has no Field(description=...)"
        assert f"| `{name}` |" in page


def spec(**fields: object) -> dict[str, object]:
    return {"name": "j", "command": "true", "working_dir": "/", **fields}


def test_what_the_page_says_each_gpus_form_means() -> None:
    up_to = parse_submission(spec(gpus=4, adaptivity="adaptive", batch_size=32)).to_job_spec("j", 0.0, "u")
    assert (up_to.min_gpus, up_to.max_gpus, up_to.adaptivity) == (1, 4, Adaptivity.ADAPTIVE)
    rigid = parse_submission(spec(gpus=2)).to_job_spec("j", 0.0, "u")
    assert (rigid.min_gpus, rigid.max_gpus, rigid.adaptivity) == (2, 2, Adaptivity.RIGID)
    elastic = parse_submission(spec(gpus={"min": 1, "max": 4}, adaptivity="elastic")).to_job_spec("j", 0.0, "u")
    assert (elastic.min_gpus, elastic.max_gpus, elastic.adaptivity) == (1, 4, Adaptivity.STRONG_SCALING)
    hops = parse_submission(spec(gpus=[1, 2, 4], adaptivity="per-gpu-batch", batch_size=8)).to_job_spec("j", 0.0, "u")
    assert hops.gpu_counts == (1, 2, 4) and hops.per_gpu_batch
    for refused in (spec(gpus=[1, 2]), spec(gpus={"min": 1, "max": 2}),
                    spec(gpus={"min": 1, "max": 2}, adaptivity="per-gpu-batch", batch_size=8),
                    spec(gpus=[1, 2], adaptivity="elastic")):
        with pytest.raises(InputError, match="gpus"):
            parse_submission(refused)
