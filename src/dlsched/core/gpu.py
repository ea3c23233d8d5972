"""GPU types known to dlsched.

A GPU type is identified by a short lowercase name (``t4``, ``v100``, ...). The memory size bounds the
local batch size a job can use on it (larger batches need gradient accumulation). ``vendor_name`` is only for
reports. Where each type's speeds come from (measured, derived from published figures, or a stated rule) is
kept beside the numbers in ``dlsched/world/params`` and told in docs/gpu-types.md.

A cluster file may declare a type of its own (``like`` a known type, ``speed`` times as fast): it is a
:class:`GpuType` too, carried by the cluster it belongs to, never added to :data:`KNOWN_GPU_TYPES`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlsched.core.errors import InputError


@dataclass(frozen=True, slots=True)
class GpuType:
    """One kind of GPU, as named in cluster files and in measured profiles."""

    name: str
    memory_gb: float
    vendor_name: str
    #: Rank used to break ties when a policy must prefer one type (higher is more powerful).
    rank: int
    #: How a server's GPUs of this type exchange gradients (``NVLink 3``, ``PCIe 3``, ...), for reports; the
    #: synchronisation times themselves are the world's (docs/gpu-types.md).
    interconnect: str = ""
    #: For a type a cluster file declares: the known type whose measured or derived speeds it scales.
    like: str | None = None
    #: For a declared type: single-GPU speed relative to ``like`` (compute time divided by it).
    speed: float = 1.0


#: The GPU types for which dlsched has measured performance data (Sia profiles, PAL variability,
#: the Hops model catalog).
KNOWN_GPU_TYPES: dict[str, GpuType] = {
    t.name: t
    for t in (
        GpuType("t4", 16.0, "NVIDIA T4", 1, "PCIe 3"),
        GpuType("rtx", 11.0, "NVIDIA RTX 2080Ti", 2, "PCIe 3"),
        GpuType("rtx5000", 16.0, "NVIDIA Quadro RTX 5000", 3, "PCIe 3"),
        GpuType("quad", 24.0, "NVIDIA Quadro RTX 6000", 4, "PCIe 3"),
        GpuType("a40", 48.0, "NVIDIA A40", 5, "PCIe 4"),
        GpuType("v100", 32.0, "NVIDIA V100", 6, "NVLink 2"),
        GpuType("a100", 40.0, "NVIDIA A100", 7, "NVLink 3"),
        # The Hops testbed's types (Hops, SoCC'24, section 4.2); ranks tie with the nearest type above.
        GpuType("1080ti", 11.0, "NVIDIA GTX 1080Ti", 1, "PCIe 3"),
        GpuType("titanxp", 12.0, "NVIDIA Titan Xp", 2, "PCIe 3"),
        GpuType("rtx3090", 24.0, "NVIDIA RTX 3090", 4, "PCIe 4"),
        # not profiled: derived from a100 by published relative speeds (world/params/derived_types.json)
        GpuType("a10-pcie", 24.0, "NVIDIA A10 (PCIe)", 3, "PCIe 4"),
        GpuType("a100-pcie", 40.0, "NVIDIA A100 PCIe", 6, "PCIe 4"),
        # Current SXM parts, derived too (world/params/derived_types.json, scripts/fit_gpu_types.py): h200
        # from step times measured on one H200 against the a100 profiles, h100 from h200 by data-sheet ratios.
        GpuType("h100", 80.0, "NVIDIA H100 SXM5", 8, "NVLink 4"),
        GpuType("h200", 141.0, "NVIDIA H200 SXM", 9, "NVLink 4"),
    )
}


def gpu_type(name: str, *, field: str = "gpu_type", source: str | None = None) -> GpuType:
    """Look up a GPU type by name, with a clear error listing the known ones."""
    try:
        return KNOWN_GPU_TYPES[name]
    except KeyError:
        known = ", ".join(sorted(KNOWN_GPU_TYPES))
        raise InputError(f"unknown GPU type '{name}' (known: {known})", source=source, field=field) from None
