#!/usr/bin/env python
"""Write ``src/dlsched/world/params/derived_types.json``: GPU types the Sia profiles do not cover.

Each derived type scales a known type's fitted step-time entries (``dlsched.world.throughput``, ``_derive``):
compute divided by a speed (per model where ``model_speed`` says, else ``speed``), synchronisation taken from
the type named by ``sync_from`` with the in-server terms divided by ``sync_speed``, the largest local batch
scaled by ``memory_ratio`` (the catalog's memory against the base type's). Every number carries its
provenance (``measured``, ``derived``, ``rule``, ``modelled``; see ``dlsched.world.provenance``).

* ``a100-pcie``, ``a10-pcie``: from ``a100`` by published ratios (the COpter prototype's types).
* ``h200``: from ``a100`` by step times measured on one H200 (``$DLSCHED_DATA/h200/gpu_profile.json``, its
  README says how). Per world model whose family was measured (cifar10, imagenet, bert, ncf), the speed is
  the world's single-GPU a100 step time over the measured H200 step time at the largest measured local
  batch that fits an A100 (large batches measure the GPU, small ones per-step overheads: the rule
  ``scripts/fit_throughput.py`` uses for relative speeds). The models not measured (deepspeech2, yolov3,
  gpt_pmp; the measured GPT-2 is data parallel and has no A100 profile to compare with) take the geometric
  mean of the cifar10, imagenet and bert speeds, which is also the type's relative speed (ncf is left out
  of it, as in the fitted relative speeds: its a100 profile is bound by per-step overheads).
  Synchronisation is modelled: a100's in-server terms divided by 900 / 600 GB/s (NVLink 4 against NVLink 3
  per GPU), cross-server terms a100's.
* ``h100``: the h200's speeds scaled by NVIDIA's data sheets: the same GH100 chip at the same clocks (989.5
  dense BF16 tensor TFLOPS, 67 FP32 TFLOPS, NVLink 4 at 900 GB/s), 3.35 against 4.8 TB/s of memory
  bandwidth. Factor: the geometric mean of the compute ratio (1.0) and the bandwidth ratio (0.698), 0.835;
  synchronisation as the h200's.

Usage: ``python scripts/fit_gpu_types.py [--out PATH]`` (``DLSCHED_DATA`` names the data directory).
"""

from __future__ import annotations

import argparse
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

from dlsched.core.gpu import KNOWN_GPU_TYPES
from dlsched.datadir import require_data
from dlsched.world.throughput import ThroughputModel

#: World model -> key of the same family in the H200 profile (README of $DLSCHED_DATA/h200).
H200_FAMILY = {"cifar10": "cifar10", "imagenet": "imagenet", "bert": "bert", "ncf": "ncf"}
#: Families averaged into the H200's relative speed and its rule for unmeasured models (ncf left out).
H200_SPEED_FAMILIES = ("bert", "cifar10", "imagenet")
#: Per-GPU NVLink bandwidth, GB/s: NVLink 4 (H100/H200 SXM data sheets) over NVLink 3 (A100 SXM4 data sheet).
NVLINK4_OVER_NVLINK3 = 900.0 / 600.0
#: Memory bandwidth, TB/s, NVIDIA H100 SXM5 and H200 SXM data sheets.
H100_BW_TBS, H200_BW_TBS = 3.35, 4.8
#: H100 over H200: same dense tensor and FP32 throughput (ratio 1.0), geometric mean with the bandwidth ratio.
H100_OVER_H200 = math.sqrt(1.0 * H100_BW_TBS / H200_BW_TBS)

H200_DATASHEET = ("NVIDIA H200 Tensor Core GPU data sheet (H200 SXM: 141 GB HBM3e, 4.8 TB/s, 989.5 dense "
                  "FP16/BF16 tensor TFLOPS, 67 FP32 TFLOPS, NVLink 900 GB/s)")
H100_DATASHEET = ("NVIDIA H100 Tensor Core GPU data sheet (H100 SXM5: 80 GB HBM3, 3.35 TB/s, 989.5 dense "
                  "FP16/BF16 tensor TFLOPS, 67 FP32 TFLOPS, NVLink 900 GB/s)")
A100_DATASHEET = ("NVIDIA A100 Tensor Core GPU data sheet (A100 SXM4 40 GB: 1,555 GB/s, 312 dense FP16/BF16 "
                  "tensor TFLOPS, 19.5 FP32 TFLOPS, NVLink 600 GB/s)")


def _p(kind: str, how: str) -> dict[str, str]:
    return {"kind": kind, "how": how}


def _memory_ratio(name: str, base: str) -> float:
    return round(KNOWN_GPU_TYPES[name].memory_gb / KNOWN_GPU_TYPES[base].memory_gb, 6)


def copter_types() -> dict[str, dict[str, Any]]:
    """The COpter prototype's two PCIe types, from a100 by published ratios (seed 003, section 4.5)."""
    pcie_sync = _p("derived", "rtx's fitted synchronisation terms: intra-server all-reduce over PCIe, no NVLink")
    a100_pcie_src = ("NVIDIA, 'NVIDIA A100 PCIe GPU' launch note (June 2020): the PCIe card (250 W) delivers "
                     "about 90% of the A100 SXM4 (400 W) on top applications; same GA100, 40 GB HBM2. "
                     "Intra-node sync over PCIe (no NVLink), taken from rtx's PCIe servers.")
    a10_src = ("NVIDIA A10 and A100 datasheets: dense FP16 tensor throughput 125 vs 312 TFLOPS (0.40) and "
               "memory bandwidth 600 vs 1,555 GB/s (0.39); 24 GB vs 40 GB memory (0.6). Intra-node sync over "
               "PCIe, taken from rtx.")
    return {
        "a100-pcie": {
            "from": "a100", "speed": 0.9, "sync_from": "rtx", "memory_ratio": _memory_ratio("a100-pcie", "a100"),
            "source": a100_pcie_src,
            "provenance": {"relative_speed": _p("derived", "a100 x 0.9, NVIDIA's A100 PCIe launch note (June 2020)"),
                           "compute": _p("derived", "a100's fitted compute / 0.9 for every model"),
                           "sync": pcie_sync, "memory": _p("derived", "40 GB, as a100")},
        },
        "a10-pcie": {
            "from": "a100", "speed": 0.4, "sync_from": "rtx", "memory_ratio": _memory_ratio("a10-pcie", "a100"),
            "source": a10_src,
            "provenance": {"relative_speed": _p("derived", "a100 x 0.4: NVIDIA A10 and A100 data sheets, dense "
                                                           "FP16 tensor 125 / 312 TFLOPS, bandwidth 600 / 1,555 GB/s"),
                           "compute": _p("derived", "a100's fitted compute / 0.4 for every model"),
                           "sync": pcie_sync, "memory": _p("derived", "24 GB against a100's 40 GB (data sheets)")},
        },
    }


def h200_type(profile: dict[str, Any], tm: ThroughputModel) -> tuple[dict[str, Any], dict[str, int]]:
    """The h200 spec from the measured profile; also the local batch each measured speed was taken at."""
    step: dict[str, float] = profile["step_time_s"]
    where = (f"measured {profile['measured']} on one {profile['gpu']} (PyTorch {profile['torch']}, fp32, TF32 "
             f"matmul {'on' if profile.get('tf32_matmul') else 'off'}; $DLSCHED_DATA/h200/gpu_profile.json)")
    model_speed: dict[str, float] = {}
    batch: dict[str, int] = {}
    prov: dict[str, dict[str, str]] = {}
    for model, key in H200_FAMILY.items():
        limit = tm.max_local_bsz(model, "a100")
        sizes = sorted(int(k.split("/")[1]) for k in step if k.split("/")[0] == key and int(k.split("/")[1]) <= limit)
        b = sizes[-1]
        a100_t, _ = tm.step_time(model, "a100", (1,), b)
        model_speed[model] = round(a100_t / step[f"{key}/{b}"], 6)
        batch[model] = b
        prov[model] = _p("measured", f"a100's fitted single-GPU step time at local batch {b} over the H200's "
                                     f"{step[f'{key}/{b}'] * 1e3:.2f} ms, {where}; other batches scale with a100's "
                                     "curve")
    speed = round(math.exp(sum(math.log(model_speed[m]) for m in H200_SPEED_FAMILIES) / len(H200_SPEED_FAMILIES)), 6)
    rule = (f"not measured on the H200: the geometric mean of the measured {', '.join(H200_SPEED_FAMILIES)} "
            f"speeds over a100, {speed:g}")
    for model in sorted(tm.models()):
        if model not in model_speed and tm.supports(model, "a100"):
            model_speed[model] = speed
            prov[model] = _p("rule", rule)
    prov["relative_speed"] = _p("rule", f"a100's x {speed:g}, the geometric mean of the measured "
                                        f"{', '.join(H200_SPEED_FAMILIES)} speeds (ncf left out: overhead-bound)")
    prov["sync"] = _p("modelled", f"a100's in-server terms (alpha_r, beta_r) / {NVLINK4_OVER_NVLINK3:g} (NVLink 4 "
                                  "900 GB/s against NVLink 3 600 GB/s per GPU, data sheets); cross-server terms "
                                  "a100's. Not measured: the profile is of one GPU")
    prov["memory"] = _p("derived", f"141 GB against a100's 40 GB ({H200_DATASHEET})")
    spec = {
        "from": "a100", "speed": speed, "model_speed": dict(sorted(model_speed.items())), "sync_from": "a100",
        "sync_speed": NVLINK4_OVER_NVLINK3, "memory_ratio": _memory_ratio("h200", "a100"),
        "source": (f"Step times {where}, against the a100 fit of the Sia profiles; "
                   f"model speeds at local batches {', '.join(f'{m} {b}' for m, b in batch.items())}. "
                   f"Memory and NVLink from the {H200_DATASHEET} and the {A100_DATASHEET}."),
        "provenance": prov,
    }
    return spec, batch


def h100_type(h200: dict[str, Any]) -> dict[str, Any]:
    """The h100 spec: h200's speeds scaled by data-sheet ratios (no H100 was measured).

    Written against a100 (the h200's speeds times the ratio, the h200's synchronisation) rather than as a
    type derived from h200, so its largest local batches are a100's scaled once by 80 / 40 GB.
    """
    how = (f"h200's x {H100_OVER_H200:.4f}: the geometric mean of the compute ratio 1.0 (same GH100 chip and "
           f"clocks) and the memory-bandwidth ratio {H100_BW_TBS} / {H200_BW_TBS} TB/s; {H100_DATASHEET}; "
           f"{H200_DATASHEET}. Derived, not measured")
    return {
        "from": "a100", "speed": round(h200["speed"] * H100_OVER_H200, 6),
        "model_speed": {m: round(v * H100_OVER_H200, 6) for m, v in h200["model_speed"].items()},
        "sync_from": "a100", "sync_speed": h200["sync_speed"], "memory_ratio": _memory_ratio("h100", "a100"),
        "source": how + ". Synchronisation as h200 (the same NVLink 4).",
        "provenance": {"relative_speed": _p("derived", how), "compute": _p("derived", how + ", for every model"),
                       "sync": _p("modelled", "h200's (the same NVLink 4, 900 GB/s per GPU): a100's in-server "
                                              f"terms / {NVLINK4_OVER_NVLINK3:g}, cross-server terms a100's"),
                       "memory": _p("derived", f"80 GB against a100's 40 GB ({H100_DATASHEET})")},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parents[1] / "src/dlsched/world/params/derived_types.json")
    args = ap.parse_args(argv)
    profile = json.loads((require_data("h200", "H200 step times") / "gpu_profile.json").read_text(encoding="utf-8"))
    fitted = json.loads(resources.files("dlsched").joinpath("world/params/throughput.json").read_text("utf-8"))
    tm = ThroughputModel(fitted)  # the fitted types only: every derived type starts from measured numbers
    h200, batch = h200_type(profile, tm)
    types = copter_types()
    types["h200"] = h200
    types["h100"] = h100_type(h200)
    out = {
        "_source": ("GPU types no Sia profile covers, derived from a profiled type by measured step times "
                    "(h200) or published figures (a100-pcie, a10-pcie, h100); written by "
                    "scripts/fit_gpu_types.py, see docs/gpu-types.md. Each type's 'provenance' says, per "
                    "number, whether it is measured, derived, a rule or modelled."),
        "types": types,
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    for m, s in h200["model_speed"].items():
        print(f"h200 {m:12s} x{s:.3f} over a100 ({h200['provenance'][m]['kind']}"
              + (f", local batch {batch[m]}" if m in batch else "") + ")")
    print(f"h200 relative speed x{h200['speed']:.3f} over a100; h100 x{H100_OVER_H200:.4f} over h200")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
