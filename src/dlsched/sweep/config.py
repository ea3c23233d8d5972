"""The sweep file: which presets, traces, seeds and tunables to cross, validated before anything runs.

A sweep YAML reads::

    cluster: sia-physical-44        # preset name or cluster file (one cluster per sweep)
    presets: [fifo, sia, gavel]     # scheduler presets (``dlsched policies``)
    traces: ["synthetic:rate=10,hours=1,seed=1", sia-philly:1]
    seeds: 2                        # N means seeds 0..N-1; or a list such as [3, 7]
    tunables:                       # optional: every combination of these --set values
      world.locality_penalty: [1.0, 2.0]
    run:                            # optional: further RunConfig fields shared by every cell
      round_s: 60
      jobs: 20

A cell's seed is the RunConfig ``seed`` (scheduler, engine and world); a trace keeps its own seed, so the
cell is exactly ``dlsched simulate --cluster C --trace T --policy P --seed S --set K=V``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dlsched.core import InputError
from dlsched.core.reading import unreadable
from dlsched.sim.config import MAX_SEED, RunConfig, input_error, route_settings

#: RunConfig fields the grid sets itself; ``run:`` may not set them too.
GRID_FIELDS = frozenset({"cluster", "trace", "policy", "seed", "settings", "world"})
#: Cells a sweep may hold: a typo in a list should fail fast, not queue a week of work.
MAX_CELLS = 100_000


class SweepConfig(BaseModel):
    """The grid of a sweep; see the module docstring for the file format."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: str = Field(min_length=1)
    presets: list[str] = Field(min_length=1)
    traces: list[str] = Field(min_length=1)
    seeds: int | list[int] = 1
    tunables: dict[str, list[str | int | float | bool]] = Field(default_factory=dict)
    run: dict[str, Any] = Field(default_factory=dict)

    @field_validator("presets", "traces")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        repeated = sorted({v for v in value if value.count(v) > 1})
        if repeated:
            raise ValueError(f"{', '.join(repeated)} listed more than once")
        if any(not str(v).strip() for v in value):
            raise ValueError("holds an empty name")
        return value

    @field_validator("seeds")
    @classmethod
    def _seeds_in_range(cls, value: int | list[int]) -> int | list[int]:
        if isinstance(value, bool):
            raise ValueError("expected a number of seeds or a list of seeds, got a flag")
        if isinstance(value, int):
            if not 1 <= value <= 10_000:
                raise ValueError(f"expected 1 to 10000 seeds, got {value}")
            return value
        if not value or len(set(value)) != len(value):
            raise ValueError("expected a non-empty list of distinct seeds")
        bad = [s for s in value if not 0 <= s <= MAX_SEED]
        if bad:
            raise ValueError(f"seed {bad[0]} outside 0..{MAX_SEED}")
        return value

    @field_validator("tunables")
    @classmethod
    def _values_given(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in value.items():
            if not values:
                raise ValueError(f"tunable '{key}' lists no values")
        return value

    @field_validator("run")
    @classmethod
    def _not_grid_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(GRID_FIELDS & set(value))
        if clash:
            raise ValueError(f"'run' may not set {', '.join(clash)}: the grid sets them (use presets, traces, "
                             f"seeds, tunables)")
        return value

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)


@dataclass(frozen=True)
class Cell:
    """One run of the grid: where it sits (preset, trace, seed, tunables) and its configuration."""

    preset: str
    trace: str
    seed: int
    tunables: tuple[tuple[str, str], ...]
    config: RunConfig

    @property
    def payload(self) -> dict[str, Any]:
        """The configuration as JSON, holding only the fields the cell set: a field left unset keeps its
        meaning of "the default" (a cluster's own world calibration) when the task rebuilds the RunConfig."""
        return self.config.model_dump(mode="json", exclude_unset=True)

    @property
    def key(self) -> str:
        """Names the cell's result file: a digest of its configuration, so any change makes a new cell."""
        text = json.dumps(self.payload, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    @property
    def label(self) -> dict[str, Any]:
        return {"preset": self.preset, "trace": self.trace, "seed": self.seed, "tunables": dict(self.tunables)}


def _fmt(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def cells(sweep: SweepConfig, *, data_dir: str | None = None, source: str | None = None) -> list[Cell]:
    """Every cell of the grid, in order presets x traces x tunables x seeds; InputError names a bad one."""
    keys = list(sweep.tunables)
    combos = list(itertools.product(*(sweep.tunables[k] for k in keys))) or [()]
    total = len(sweep.presets) * len(sweep.traces) * len(combos) * len(sweep.seed_list)
    if total > MAX_CELLS:
        raise InputError(f"the grid holds {total} cells, more than {MAX_CELLS}", source=source)
    out: list[Cell] = []
    for preset in sweep.presets:
        for trace in sweep.traces:
            for combo in combos:
                pairs = tuple((k, _fmt(v)) for k, v in zip(keys, combo, strict=True))
                routed = route_settings(dict(pairs))
                for seed in sweep.seed_list:
                    fields = {**sweep.run, "cluster": sweep.cluster, "trace": trace, "policy": preset,
                              "seed": seed, **routed}
                    if data_dir is not None:
                        fields["data_dir"] = data_dir
                    config = RunConfig.parse(fields, source=source)
                    out.append(Cell(preset=preset, trace=trace, seed=seed, tunables=pairs, config=config))
    return out


def load_sweep(path: str | Path) -> SweepConfig:
    """Read and validate a sweep YAML; any problem is one InputError naming the file (and line or field)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(unreadable(exc, "sweep file"), source=str(p)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not YAML: {getattr(exc, 'problem', None) or exc}", source=str(p),
                         line=None if mark is None else mark.line + 1) from None
    if not isinstance(data, dict):
        raise InputError("expected a mapping with cluster, presets, traces, seeds (see docs)", source=str(p))
    try:
        return SweepConfig(**data)
    except ValidationError as exc:
        err = input_error(exc)
        if exc.errors()[0]["type"] == "extra_forbidden":
            err = InputError(f"unknown field (known: {', '.join(SweepConfig.model_fields)})",
                             field=err.field)
        raise InputError(str(err).removeprefix(f"field '{err.field}': "), source=str(p), field=err.field) from None
