"""Every problem of a job spec at once (``dlsched spec check``), where submitting reports only the first.

pydantic already checks every field before giving up; this groups its records by the field a user wrote
(a union such as ``gpus`` reports one record per member it tried), phrases each as
:func:`~dlsched.service.spec.describe_line_errors` does for ``dlsched submit``, and adds a "did you mean"
to an unknown key from the fields of the mapping it sits in. The cross-field rules (``adaptivity`` against
``gpus`` and ``batch_size``) are checked only once the fields themselves are valid, and then all of them.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from dlsched.service.spec import (
    GpuRange,
    JobSubmission,
    Resources,
    _FieldError,
    _is_union_tag,
    describe_line_errors,
    gpu_type_problem,
)

#: The model whose keys a nested mapping of the spec takes (for the "did you mean" of an unknown key).
NESTED: dict[str, type[BaseModel]] = {"": JobSubmission, "gpus": GpuRange, "resources": Resources}


def spec_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    """Every problem of ``data`` as (field path, message), in the order of the spec's fields; [] when the
    spec is valid."""
    try:
        JobSubmission.model_validate(data)
    except ValidationError as exc:
        records = exc.errors(include_url=False)
    else:
        return []
    groups: dict[str, list[Any]] = {}
    for record in records:
        loc = ".".join(str(p) for p in record["loc"] if not _is_union_tag(p))
        groups.setdefault(loc, []).append(record)
    problems: list[tuple[str, str]] = []
    for loc, group in groups.items():
        original = (group[0].get("ctx") or {}).get("error")
        if isinstance(original, _FieldError):  # a cross-field rule: all of them
            problems += [(p.field, p.reason) for p in original.also]
            continue
        field, message = describe_line_errors(group)
        if loc == "gpu_types" and message.startswith("unknown GPU type"):  # one line per misspelt type
            names = data.get("gpu_types") or []
            problems += [(field, p) for name in names if isinstance(name, str) and (p := gpu_type_problem(name))]
            continue
        if group[0]["type"] == "extra_forbidden":
            parent = loc.rpartition(".")[0]
            message = ("unknown key (not a job spec field)" if not parent else
                       f"unknown key (not a field of {parent})") + _did_you_mean(loc)
        problems.append((field, message))
    return problems


def _did_you_mean(loc: str) -> str:
    parent, _, key = loc.rpartition(".")
    model = NESTED.get(parent)
    if model is None:
        return ""
    fields = list(model.model_fields)
    close = difflib.get_close_matches(key, fields, n=1) or [f for f in fields if f.startswith(key)][:1]
    return f"; did you mean '{close[0]}'?" if close else f" (fields: {', '.join(fields)})"
