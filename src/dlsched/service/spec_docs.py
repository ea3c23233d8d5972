"""docs/job-spec.md, written from :class:`~dlsched.service.spec.JobSubmission` itself.

Run ``python -m dlsched.service.spec_docs > docs/job-spec.md`` after changing the model; a test
(tests/service/test_spec_docs.py) fails while the page and the model disagree, so the page a user reads is
the model the service checks with: every field, its type, default, range and description (the
``Field(description=...)`` texts of spec.py).
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from dlsched.service.spec import GpuRange, JobSubmission, Resources, parse_submission

#: The example on the page (checked against the model when the page is written).
EXAMPLE = """\
name: resnet-demo
command: python resnet.py --epochs 2
working_dir: .                 # relative to this file's folder
gpus: {min: 1, max: 4}
adaptivity: adaptive           # a dlsched.train script: GPUs and batch chosen by the scheduler
batch_size: 32                 # the initial global batch
max_batch_size: 256
model: resnet                  # what the estimators know this kind of job as
gpu_types: [a100, v100]
env: {SEED: "1"}
max_failures: 3
"""

#: What each ``adaptivity`` means with each form of ``gpus`` (the rules of ``JobSubmission._consistent`` and
#: ``gpu_bounds``).
ADAPTIVITY_ROWS = (
    ("`rigid`", "`gpus: 2` (an integer)", "exactly 2 GPUs, never changed; an unmodified script (torchrun's "
     "or your own launcher) runs like this"),
    ("`rigid`", "a list or `{min, max}`", "refused: a rigid job needs an integer"),
    ("`per-gpu-batch`", "`gpus: 2`", "exactly 2 GPUs, `batch_size` per GPU"),
    ("`per-gpu-batch`", "`gpus: [1, 2, 4]` (ascending)", "one of these counts, chosen by the scheduler "
     "(Hops' requirement set); `batch_size` per GPU, so the global batch grows with the count"),
    ("`per-gpu-batch`", "`{min, max}`", "refused: give the counts as a list"),
    ("`elastic`", "`gpus: {min: 1, max: 4}`", "any count from 1 to 4, starting at 1, changed only by a restart "
     "(as `torchrun --nnodes=MIN:MAX`), never the batch; an unmodified script resumes from its own snapshots"),
    ("`elastic`", "`gpus: 4` (an integer)", "**up to** 4: the same as `{min: 1, max: 4}`"),
    ("`elastic`", "a list", "refused: give `{min, max}`"),
    ("`adaptive`", "`gpus: {min: 1, max: 8}`", "any count from 1 to 8, starting at 1; the scheduler "
     "(Pollux, Sia) also chooses the global batch, from `batch_size` up to `max_batch_size`"),
    ("`adaptive`", "`gpus: 4` (an integer)", "**up to** 4: the same as `{min: 1, max: 4}`"),
    ("`adaptive`", "`gpus: [1, 2, 4]`", "one of these counts, starting at the smallest"),
)


def render() -> str:
    """The whole page as Markdown."""
    parse_submission(_example_data())  # an example the model refuses is not written
    lines = [
        "# The job spec",
        "",
        "<!-- Generated from JobSubmission (src/dlsched/service/spec.py) by "
        "`python -m dlsched.service.spec_docs > docs/job-spec.md`; tests/service/test_spec_docs.py "
        "fails when this page and the model differ. Edit the model's descriptions, not this page. -->",
        "",
        "A job spec is the YAML file `dlsched submit SPEC.yaml` sends to the service (the JSON body of "
        "`POST /v1/jobs`, and the mapping `dlsched.Client.submit` takes). Unknown keys are refused, and so "
        "is every value out of its range. `dlsched spec check SPEC.yaml` lists every problem of a spec "
        "at once, each with its field, and suggests the key or GPU type meant by a misspelt one.",
        "",
        "## An example",
        "",
        "```yaml",
        EXAMPLE.rstrip("\n"),
        "```",
        "",
        "## Fields",
        "",
        *_table(JobSubmission),
        "",
        "## `gpus` and `adaptivity`",
        "",
        "`adaptivity` says what the scheduler may change, and `gpus` how many GPUs, read by `adaptivity`:",
        "",
        "| adaptivity | gpus | the job gets |",
        "|---|---|---|",
        *[f"| {a} | {g} | {what} |" for a, g, what in ADAPTIVITY_ROWS],
        "",
        "`per-gpu-batch` and `adaptive` need `batch_size` (`rigid` and `elastic` may give it); only `adaptive` may give `max_batch_size`. An "
        "`adaptive` job's script uses `dlsched.train` ([the training library](train.md)), which reports the throughput and "
        "gradient noise the scheduler chooses its batch size from; an unmodified script is `rigid`.",
        "",
        "## `gpus: {min, max}`",
        "",
        *_table(GpuRange),
        "",
        "`min` must not exceed `max`.",
        "",
        "## `resources`",
        "",
        *_table(Resources),
        "",
    ]
    return "\n".join(lines)


def _example_data() -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE)
    data["working_dir"] = "/srv/project"  # what `dlsched submit` makes of "." (absolute)
    return data


def _table(model: type[BaseModel]) -> list[str]:
    rows = ["| field | type | default | range | description |", "|---|---|---|---|---|"]
    for name, field in model.model_fields.items():
        rows.append(f"| `{name}` | {_type(field.annotation)} | {_default(field)} | "
                    f"{_range(field) or '-'} | {_cell(field.description or '')} |")
    return rows


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined:
        return "**required**"
    if field.default is None:
        return "none"
    if isinstance(field.default, str):
        return f"`{field.default}`"
    return f"`{yaml.safe_dump(field.default, default_flow_style=True).strip().removesuffix('...').strip()}`"


def _type(annotation: Any) -> str:
    """The annotation as a reader says it: "integer or list of integers or {min, max}"."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type(args[0])
    if origin in (Union, types.UnionType):
        return " or ".join(_type(a) for a in args if a is not type(None))
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type(args[0])}s"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}"
    if annotation is GpuRange:
        return "`{min, max}`"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"mapping (`{annotation.__name__.lower()}` below)"
    return {int: "integer", float: "number", str: "string", bool: "boolean"}.get(annotation, str(annotation))


def _constraints(metadata: list[Any]) -> list[str]:
    words = []
    for item in metadata:
        for attr, text in (("ge", ">= {}"), ("gt", "> {}"), ("le", "<= {}"), ("lt", "< {}"),
                           ("min_length", "length >= {}"), ("max_length", "length <= {}"),
                           ("pattern", "matches `{}`")):
            value = getattr(item, attr, None)
            if value is not None:
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                words.append(text.format(value))
    return words


def _range(field: FieldInfo) -> str:
    """The field's own limits, then those of the values inside it (each member of a union)."""
    parts = _constraints(list(field.metadata))
    inner = _inner_constraints(field.annotation)
    return "; ".join([*([", ".join(parts)] if parts else []), *inner])


def _inner_constraints(annotation: Any, label: str = "") -> list[str]:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        own = [_constraints(list(getattr(a, "metadata", [])) + [a]) for a in args[1:]]
        words = [w for group in own for w in group]
        found = [f"{label}{', '.join(words)}"] if words else []
        return found + _inner_constraints(args[0], label)
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        return [c for a in members
                for c in _inner_constraints(a, f"{_type(a)}: " if len(members) > 1 else label)]
    if origin is list:
        return _inner_constraints(args[0], "each: ")
    if origin is dict:
        return _inner_constraints(args[1], "each value: ")
    return []


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


if __name__ == "__main__":
    import sys

    sys.stdout.write(render())
