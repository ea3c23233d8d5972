"""Cluster presets and user cluster files (YAML), validated with pydantic.

A cluster file lists node groups; every group is ``count`` nodes of ``gpus_per_node`` GPUs of one type.
Optional per-group ``speed_factor`` models server-level heterogeneity (Hops) and ``rack`` adds a locality
level above the node (PAL). ``variability`` names the measured per-GPU profile family the cluster's GPUs
are drawn from (``longhorn``, ``frontera``, ``ls6``, ``testbed32``). ``gpu_types`` declares GPU types of
the file's own, each ``like`` a known type and ``speed`` times as fast (``l40s: {like: a100, speed: 0.8,
memory_gb: 48}``): the built :class:`~dlsched.core.Cluster` carries them in ``gpu_types`` and the world
derives their step times from ``like``'s (docs/gpu-types.md), so no packaged file changes.

Numbers are strict (``gpus_per_node: true`` or ``count: 2.5`` is a mistake, not 1 or 2) and bounded by what
they mean: a server holds 1..64 GPUs, a speed factor is a multiplier between 1/100 and 100 of the median
server's speed, and a cluster has at most 131072 GPUs (the simulator's work per round grows with it;
copter-100k has 102400). A value outside its range is refused naming the file, the field and the range
(docs/simulator.md).
"""

from __future__ import annotations

import dataclasses
import re
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from dlsched.core import KNOWN_GPU_TYPES, Cluster, GpuType, InputError, Node
from dlsched.core.ranges import Range
from dlsched.core.reading import unreadable
from dlsched.core.suggest import did_you_mean

VARIABILITY_FAMILIES = ("longhorn", "frontera", "ls6", "testbed32")


#: Allowed ranges of a node group's numbers, declared once: the schema enforces them and errors print them.
GROUP_RANGES: dict[str, Range] = {
    "count": Range(1, 65536),
    "gpus_per_node": Range(1, 64),
    "speed_factor": Range(0.01, 100.0),
}
#: Most GPUs one cluster file may describe.
MAX_CLUSTER_GPUS = 131072
#: Allowed ranges of a declared GPU type's numbers.
DECLARED_RANGES: dict[str, Range] = {
    "speed": Range(0.01, 100.0),
    "memory_gb": Range(1.0, 4096.0),
}
#: A declared type's name: lowercase letters, digits, '-' and '_', starting with a letter.
TYPE_NAME = r"^[a-z][a-z0-9_-]{0,31}$"


def _number(v: object) -> object:
    """PyYAML reads ``1e-3`` (no dot) as text; take it as the number the user wrote."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


class DeclaredGpuType(BaseModel):
    """A GPU type a cluster file declares: a known type's speeds scaled by ``speed``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    #: The known type whose step times, synchronisation and memory limits it scales.
    like: str = Field(strict=True)
    #: Single-GPU speed relative to ``like`` (0.8: every step's compute takes 1/0.8 as long).
    speed: float = Field(ge=DECLARED_RANGES["speed"].lo, le=DECLARED_RANGES["speed"].hi)
    #: GPU memory; the largest local batch scales with it against ``like``'s. Default: ``like``'s.
    memory_gb: float | None = Field(default=None, ge=DECLARED_RANGES["memory_gb"].lo,
                                    le=DECLARED_RANGES["memory_gb"].hi)
    #: Shown in reports; default ``declared, like <like>``.
    vendor_name: str = Field(default="", strict=True)

    @field_validator("speed", "memory_gb", mode="before")
    @classmethod
    def _strict_number(cls, v: object) -> object:
        """``speed: true`` is a mistake, not 1.0; ``1e-1`` (read by PyYAML as text) is the number written."""
        if isinstance(v, bool):
            raise ValueError(f"must be a number, got {v!r}")
        return _number(v)

    @field_validator("like")
    @classmethod
    def _known_like(cls, v: str) -> str:
        if v not in KNOWN_GPU_TYPES:
            raise ValueError(f"unknown GPU type '{v}' for 'like' (known: {', '.join(sorted(KNOWN_GPU_TYPES))})")
        return v

    def gpu_type(self, name: str) -> GpuType:
        """The :class:`GpuType` the cluster carries (rank and interconnect of ``like``)."""
        base = KNOWN_GPU_TYPES[self.like]
        return GpuType(name=name, memory_gb=self.memory_gb if self.memory_gb is not None else base.memory_gb,
                       vendor_name=self.vendor_name or f"declared, like {base.vendor_name}", rank=base.rank,
                       interconnect=base.interconnect, like=self.like, speed=self.speed)


class NodeGroup(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    gpu_type: str = Field(strict=True)
    count: int = Field(strict=True, ge=GROUP_RANGES["count"].lo, le=GROUP_RANGES["count"].hi)
    gpus_per_node: int = Field(strict=True, ge=GROUP_RANGES["gpus_per_node"].lo,
                               le=GROUP_RANGES["gpus_per_node"].hi)
    speed_factor: float = Field(default=1.0, strict=True, ge=GROUP_RANGES["speed_factor"].lo,
                                le=GROUP_RANGES["speed_factor"].hi)
    rack: str | None = Field(default=None, strict=True)
    #: Server model of the group (``sugon-w780g``, ``tigerway-yk8100-8g``, ...): its host CPUs load data at
    #: the speed the world's host catalog gives (dlsched.world.hops); empty: a nominal host.
    host: str = Field(default="", strict=True)

    @field_validator("host")
    @classmethod
    def _known_host(cls, v: str) -> str:
        from dlsched.world.hops import HOSTS

        if v and v not in HOSTS:
            raise ValueError(f"unknown host '{v}' (known: {', '.join(sorted(HOSTS))})")
        return v

    _yaml_exponent = field_validator("speed_factor", mode="before")(_number)

    @field_validator("gpu_type")
    @classmethod
    def _known_type(cls, v: str, info: ValidationInfo) -> str:
        """A known type or one the same file declares (``_parse`` passes their names as context)."""
        declared = (info.context or {}).get("declared", ())
        if v not in KNOWN_GPU_TYPES and v not in declared:
            known = ", ".join(sorted(KNOWN_GPU_TYPES))
            also = f"; declared here: {', '.join(sorted(declared))}" if declared else ""
            raise ValueError(f"unknown GPU type '{v}' (known: {known}{also}; or declare it under gpu_types)")
        return v


class ClusterFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(strict=True, min_length=1)
    description: str = ""
    variability: Literal["longhorn", "frontera", "ls6", "testbed32"] | None = None
    #: GPU types of this file's own, by name (module docstring).
    gpu_types: dict[str, DeclaredGpuType] = Field(default_factory=dict)
    nodes: list[NodeGroup] = Field(min_length=1)
    #: World options this cluster defaults to (``calibration: sia-artifact`` for a cluster whose physical
    #: counterpart was measured that way); a run that sets an option itself wins. Values are checked where
    #: the run's configuration is resolved, the keys here.
    world: dict[str, Any] = Field(default_factory=dict)
    #: Traces known to fit the cluster (its paper's first); the first is the trace of a run that names none,
    #: and a trace that does not fit is refused naming these.
    traces: list[str] = Field(default_factory=list)

    @field_validator("world")
    @classmethod
    def _world_keys(cls, world: dict[str, Any]) -> dict[str, Any]:
        from dlsched.world.base import WorldConfig

        known = [f.name for f in dataclasses.fields(WorldConfig)]
        unknown = [k for k in world if k not in known]
        if unknown:
            raise ValueError(f"unknown world option '{unknown[0]}' (known: {', '.join(known)})")
        return world

    @field_validator("gpu_types", mode="before")
    @classmethod
    def _type_names(cls, types: object) -> object:
        """A declared name is new (not a known type's) and plain, so reports and trace cells can name it."""
        if isinstance(types, dict):
            for name in types:
                if not isinstance(name, str) or not re.match(TYPE_NAME, name):
                    raise ValueError(f"GPU type name {name!r} must be lowercase letters, digits, '-' or '_', "
                                     "starting with a letter")
                if name in KNOWN_GPU_TYPES:
                    raise ValueError(f"'{name}' is a known GPU type; declare a new name (like: {name}, speed: ...)")
        return types

    @field_validator("nodes")
    @classmethod
    def _size(cls, groups: list[NodeGroup]) -> list[NodeGroup]:
        total = sum(g.count * g.gpus_per_node for g in groups)
        if total > MAX_CLUSTER_GPUS:
            raise ValueError(f"the node groups add up to {total} GPUs; a cluster may have at most "
                             f"{MAX_CLUSTER_GPUS}")
        return groups

    def build(self) -> Cluster:
        nodes: list[Node] = []
        for g in self.nodes:
            for _ in range(g.count):
                nid = len(nodes)
                nodes.append(Node(node_id=nid, gpu_type=g.gpu_type, num_gpus=g.gpus_per_node,
                                  speed_factor=g.speed_factor, rack=g.rack, name=f"{g.gpu_type}-{nid}",
                                  host=g.host))
        declared = {name: d.gpu_type(name) for name, d in self.gpu_types.items()}
        types = {n.gpu_type: declared[n.gpu_type] if n.gpu_type in declared else KNOWN_GPU_TYPES[n.gpu_type]
                 for n in nodes}
        return Cluster(name=self.name, nodes=tuple(nodes), gpu_types=types, variability=self.variability)


def preset_names() -> list[str]:
    return sorted(p.name.removesuffix(".yaml") for p in resources.files("dlsched.presets").iterdir()
                  if p.name.endswith(".yaml"))


def _parse(text: str, source: str) -> ClusterFile:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"not valid YAML ({getattr(exc, 'problem', exc)})", source=source, line=line) from None
    if not isinstance(raw, dict):
        raise InputError("a cluster file must be a mapping with 'name' and 'nodes'", source=source)
    declared = raw.get("gpu_types")
    context = {"declared": tuple(str(k) for k in declared) if isinstance(declared, dict) else ()}
    try:
        return ClusterFile.model_validate(raw, context=context)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if "input" in err and err["type"] != "value_error" and not isinstance(err["input"], (dict, list)):
            msg += f", got {err['input']!r}"
        key = str(err["loc"][-1]) if err["loc"] else ""
        if key in GROUP_RANGES and err["type"] != "missing":
            whole = "a whole number in " if key != "speed_factor" else ""
            msg += f" (allowed: {whole}{GROUP_RANGES[key]})"
        elif key in DECLARED_RANGES and len(err["loc"]) == 3 and err["type"] != "missing":
            msg += f" (allowed: {DECLARED_RANGES[key]})"
        raise InputError(msg, source=source, field=loc) from None


def load_cluster_file(path: str | Path) -> ClusterFile:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(unreadable(exc, "cluster file"), source=str(p)) from None
    return _parse(text, str(p))


def load_cluster(name_or_path: str) -> Cluster:
    """A preset by name, or a YAML file by path."""
    return cluster_file(name_or_path).build()


def cluster_source(name_or_path: str) -> str:
    """How errors name a cluster: ``preset sia-homo-64`` or the file's path."""
    return f"preset {name_or_path}" if name_or_path in preset_names() else name_or_path


def cluster_file(name_or_path: str) -> ClusterFile:
    """The validated description of a preset (by name) or a YAML file (by path), world defaults included."""
    if name_or_path in preset_names():
        text = resources.files("dlsched.presets").joinpath(f"{name_or_path}.yaml").read_text()
        return _parse(text, f"preset {name_or_path}")
    if name_or_path.endswith((".yaml", ".yml")) or Path(name_or_path).exists():
        return load_cluster_file(name_or_path)
    raise InputError(f"unknown cluster '{name_or_path}'{did_you_mean(name_or_path, preset_names())} (presets: "
                     f"{', '.join(preset_names())}; or a YAML file)", field="cluster")


def preset_descriptions() -> list[tuple[str, str, Cluster]]:
    out = []
    for name in preset_names():
        text = resources.files("dlsched.presets").joinpath(f"{name}.yaml").read_text()
        cf = _parse(text, f"preset {name}")
        out.append((name, cf.description, cf.build()))
    return out


def default_trace(name_or_path: str, fallback: str) -> str:
    """The trace a run on this cluster plays when it names none: the cluster's first listed trace, else
    ``fallback``."""
    traces = cluster_file(name_or_path).traces
    return traces[0] if traces else fallback


def fitting_traces(name_or_path: str) -> list[str]:
    """The traces a cluster lists as fitting it; for a cluster file that lists none, those of the presets
    with the same GPU types (the traces' models are profiled on them)."""
    described = cluster_file(name_or_path)
    if described.traces:
        return list(described.traces)
    types = {g.gpu_type for g in described.nodes}
    out: list[str] = []
    for name in preset_names():
        preset = cluster_file(name)
        if {g.gpu_type for g in preset.nodes} <= types:
            out.extend(t for t in preset.traces if t not in out)
    return out
