"""Worlds fitted to jobs' own reports: extra models for the throughput and efficiency tables.

The packaged tables hold the Sia/Pollux models profiled offline. A profiles file (``--set
world.profiles=FILE``) adds models fitted elsewhere, above all to what real jobs reported while the runtime
ran them (``dlsched.runtime.fit``), so that the simulator can play the very jobs the runtime trained and be
compared with it. Each model gives:

* ``step_time``: per GPU type, the parameters of the step-time model of :mod:`dlsched.world.throughput`
  (``PARAM_NAMES``; missing refinements take their neutral values) and ``max_local_bsz``;
* ``init_batch``, ``max_batch`` and the gradient statistics ``grad_sqr`` and ``grad_var`` (the noise of an
  initial-size batch, as Pollux reports it), which give the statistical efficiency of every batch size by
  Pollux's formula and are what the simulated job reports;
* its work: ``target_samples`` with ``work: samples`` (the job stops after this many samples whatever its
  batch, as the runtime's epoch-bound jobs do) or ``work: progress`` (statistical progress, as the packaged
  models count it);
* ``restart_delay_s``, paid on every (re)start, and ``round_overhead_s``, paid every round the job keeps its
  GPUs (the runtime's workers reload their checkpoint at the start of each round);
* optionally ``profile_s``: how long a profile of the job takes on each GPU type, start-up included (a
  service's profiles run for its ``--profile-s`` of steps after their start-up, so they are as long as that
  whatever the step time); absent, a profile is the start-up and ``profile_steps`` steps at each batch.

Model names must not collide with the packaged ones: a file extends the world, it never changes a profiled
model behind an experiment's back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dlsched.core.errors import InputError
from dlsched.world.efficiency import EfficiencyModel
from dlsched.world.throughput import PARAM_NAMES, ThroughputModel

#: Neutral values of the step-time model's refinements (the plain Pollux form).
NEUTRAL = {"zeta_c": 1.0, "q_c": 1.0, "eps": 0.0, "pi": 0.0, "delta_n": 0.0, "kappa": 0.0, "gamma": 1.0}
#: Batch sizes the efficiency table lists per model (Pollux's formula is exact between them anyway).
_GRID = 16


class StepTimeParams(BaseModel):
    """One (model, GPU type) of the step-time model; times in seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    alpha_c: float = Field(ge=0.0, le=3600.0)
    beta_c: float = Field(ge=0.0, le=3600.0)
    alpha_r: float = Field(0.0, ge=0.0, le=3600.0)
    beta_r: float = Field(0.0, ge=0.0, le=3600.0)
    alpha_n: float = Field(0.0, ge=0.0, le=3600.0)
    beta_n: float = Field(0.0, ge=0.0, le=3600.0)
    delta_n: float = Field(0.0, ge=0.0, le=3600.0)
    kappa: float = Field(0.0, ge=0.0, le=3600.0)
    eps: float = Field(0.0, ge=0.0, le=10.0)
    pi: float = Field(0.0, ge=0.0, le=10.0)
    zeta_c: float = Field(1.0, gt=0.0, le=4.0)
    q_c: float = Field(1.0, ge=1.0, le=50.0)
    gamma: float = Field(1.0, ge=1.0, le=50.0)
    max_local_bsz: int = Field(ge=1, le=1_048_576)

    @model_validator(mode="after")
    def _some_cost(self) -> StepTimeParams:
        if self.alpha_c + self.beta_c <= 0:
            raise ValueError("a step must take time: alpha_c + beta_c must be positive")
        return self


class FittedModel(BaseModel):
    """One model of a profiles file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    work: Literal["samples", "progress"] = "samples"
    target_samples: float = Field(gt=0.0, le=1e15)
    init_batch: int = Field(ge=1, le=1_048_576)
    max_batch: int = Field(ge=1, le=1_048_576)
    grad_sqr: float = Field(gt=0.0)
    grad_var: float = Field(ge=0.0)
    restart_delay_s: float = Field(0.0, ge=0.0, le=86400.0)
    round_overhead_s: float = Field(0.0, ge=0.0, le=3600.0)
    profile_s: float | None = Field(default=None, gt=0.0, le=86400.0)
    step_time: dict[str, StepTimeParams] = Field(min_length=1)

    @model_validator(mode="after")
    def _batches(self) -> FittedModel:
        if self.max_batch < self.init_batch:
            raise ValueError(f"max_batch {self.max_batch} is below init_batch {self.init_batch}")
        return self


class ProfilesFile(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    models: dict[str, FittedModel] = Field(min_length=1)


@dataclass(frozen=True)
class FittedProfiles:
    """The tables of a world with a profiles file's models added."""

    throughput: ThroughputModel
    efficiency: EfficiencyModel
    #: Models whose work is counted in samples (see :class:`~dlsched.world.base.SampleJobPhysics`).
    sample_models: frozenset[str]


def _packaged(name: str) -> dict[str, Any]:
    text = resources.files("dlsched").joinpath(f"world/params/{name}.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def efficiency_entry(m: FittedModel) -> dict[str, Any]:
    """The efficiency table of one model: Pollux's ``(phi + 1) / (phi + s)`` with ``phi = grad_var /
    grad_sqr`` at every listed batch, one milestone over the whole job."""
    sizes = np.unique(np.round(np.geomspace(m.init_batch, m.max_batch, _GRID)).astype(int))
    phi = m.grad_var / m.grad_sqr
    eff = (phi + 1.0) / (phi + sizes / m.init_batch)
    return {"init_batch_size": m.init_batch, "max_batch_size": m.max_batch, "target_progress": m.target_samples,
            "batch_sizes": sizes.tolist(), "progress": [m.target_samples], "grad_sqr": [m.grad_sqr],
            "grad_var": [m.grad_var], "efficiency": [eff.tolist()]}


def load_profiles(path: str) -> FittedProfiles:
    """Read a profiles file; problems name the file and the field, as one ``error:`` line."""
    p = Path(path).expanduser()
    try:
        raw = json.loads(p.read_text())
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(p), field="world.profiles") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", source=str(p), line=exc.lineno) from None
    try:
        profiles = ProfilesFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(err["msg"].removeprefix("Value error, "), source=str(p),
                         field=".".join(str(x) for x in err["loc"]) or None) from None
    tput = _packaged("throughput")
    effs = _packaged("efficiency")
    for name, m in profiles.models.items():
        if name in tput["models"] or name in effs["models"]:
            raise InputError(f"model '{name}' is a packaged model; a profiles file may only add models",
                             source=str(p), field=f"models.{name}")
        unknown = sorted(set(m.step_time) - set(tput["relative_speed"]))
        if unknown:
            raise InputError(f"unknown GPU type '{unknown[0]}' (known: {', '.join(sorted(tput['relative_speed']))})",
                             source=str(p), field=f"models.{name}.step_time")
        tput["models"][name] = {gpu: {**NEUTRAL, **{k: v for k, v in params.model_dump().items()
                                                    if k in PARAM_NAMES or k == "max_local_bsz"}, "stages": 1}
                                for gpu, params in m.step_time.items()}
        tput["restart_delay_s"][name] = m.restart_delay_s
        tput.setdefault("round_overhead_s", {})[name] = m.round_overhead_s
        if m.profile_s is not None:
            tput.setdefault("profile_s", {})[name] = m.profile_s
        effs["models"][name] = efficiency_entry(m)
    return FittedProfiles(throughput=ThroughputModel(tput), efficiency=EfficiencyModel(effs),
                          sample_models=frozenset(n for n, m in profiles.models.items() if m.work == "samples"))
