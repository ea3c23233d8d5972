"""Cluster presets and user cluster files (YAML), validated with pydantic.

A cluster file lists node groups; every group is ``count`` nodes of ``gpus_per_node`` GPUs of one type.
Optional per-group ``speed_factor`` models server-level heterogeneity (Hops) and ``rack`` adds a locality
level above the node (PAL). ``variability`` names the measured per-GPU profile family the cluster's GPUs
are drawn from (``longhorn``, ``frontera``, ``ls6``, ``testbed32``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dlsched.core import KNOWN_GPU_TYPES, Cluster, InputError, Node

VARIABILITY_FAMILIES = ("longhorn", "frontera", "ls6", "testbed32")


class NodeGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpu_type: str
    count: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1, le=64)
    speed_factor: float = Field(default=1.0, gt=0.0)
    rack: str | None = None

    @field_validator("gpu_type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        if v not in KNOWN_GPU_TYPES:
            raise ValueError(f"unknown GPU type '{v}' (known: {', '.join(sorted(KNOWN_GPU_TYPES))})")
        return v


class ClusterFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    variability: Literal["longhorn", "frontera", "ls6", "testbed32"] | None = None
    nodes: list[NodeGroup] = Field(min_length=1)

    def build(self) -> Cluster:
        nodes: list[Node] = []
        for g in self.nodes:
            for _ in range(g.count):
                nid = len(nodes)
                nodes.append(Node(node_id=nid, gpu_type=g.gpu_type, num_gpus=g.gpus_per_node,
                                  speed_factor=g.speed_factor, rack=g.rack, name=f"{g.gpu_type}-{nid}"))
        types = {n.gpu_type: KNOWN_GPU_TYPES[n.gpu_type] for n in nodes}
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
    try:
        return ClusterFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        raise InputError(msg, source=source, field=loc) from None


def load_cluster_file(path: str | Path) -> ClusterFile:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(f"cannot read cluster file ({exc.strerror})", source=str(p)) from None
    return _parse(text, str(p))


def load_cluster(name_or_path: str) -> Cluster:
    """A preset by name, or a YAML file by path."""
    if name_or_path in preset_names():
        text = resources.files("dlsched.presets").joinpath(f"{name_or_path}.yaml").read_text()
        return _parse(text, f"preset {name_or_path}").build()
    if name_or_path.endswith((".yaml", ".yml")) or Path(name_or_path).exists():
        return load_cluster_file(name_or_path).build()
    raise InputError(f"unknown cluster '{name_or_path}' (presets: {', '.join(preset_names())}; or a YAML file)",
                     field="cluster")


def preset_descriptions() -> list[tuple[str, str, Cluster]]:
    out = []
    for name in preset_names():
        text = resources.files("dlsched.presets").joinpath(f"{name}.yaml").read_text()
        cf = _parse(text, f"preset {name}")
        out.append((name, cf.description, cf.build()))
    return out
