"""Per-job explanations: the records each stage leaves of why it decided (:mod:`dlsched.policies.reasons`),
read back for the CLI (``dlsched explain``), the service's API and its pages.

This package only reads records; it never asks a stage anything.

* :func:`explain` (``run_dir_or_result, job, round=None``): a job's records from a simulation folder written
  with ``--out``, a run's result, or a list of records;
* :func:`explain_paragraphs`: one readable paragraph per stage, consecutive rounds with the same decision
  collapsed into a range.
"""

import sys
import types
from typing import Any

from dlsched.explain.paragraphs import explain_paragraphs
from dlsched.explain.records import (
    EXPLANATIONS_FILE,
    explain,
    load_records,
    plain_records,
    select,
    write_records,
)

__all__ = ["EXPLANATIONS_FILE", "explain", "explain_paragraphs", "load_records", "plain_records", "select",
           "write_records"]


class _CallableModule(types.ModuleType):
    """``dlsched.explain(run_dir_or_result, job, round=None)`` calls :func:`explain`: the package is the
    public API's one name for it, as ``import dlsched; dlsched.explain(...)`` reads."""

    def __call__(self, run_dir_or_result: Any, job: str, round: int | None = None) -> list[dict[str, Any]]:  # noqa: A002
        return explain(run_dir_or_result, job, round)


sys.modules[__name__].__class__ = _CallableModule
