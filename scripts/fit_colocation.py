"""Derive the co-location table: how fast each pair of models trains when two workers share a GPU.

Writes ``src/dlsched/catalog/params/colocation.json`` (committed; the measured files never are) from three
measured sources, each a set of pairs of jobs run together under free competition (no share restriction):

* ``lucid/colocate_info.csv``: 1,388 pairs of 1-GPU jobs on an RTX 3090, speeds normalised to running alone;
* ``gavel/physical_cluster_throughputs.json``: Gavel's packed pair throughputs (steps/s) on V100, divided
  by the job's isolated throughput (``null``); ``[0, 0]`` entries (out of memory or not run) are skipped;
* ``pal/blox_exp/colocate_info/norm_speed.csv``: multi-GPU pairs (1 to 8 GPUs) normalised by PAL.

Model names are mapped to one canonical lower-case name (:data:`ALIASES`); a pair's speeds are the median
over every measured variant (batch size, mixed precision, GPU count, source), clipped to (0, 1] (a value
above 1 is measurement noise: a job never trains faster for sharing its GPU). The table also records, per
model, the GPU memory one worker needs (median over Lucid's ``single_data.csv`` variants, MiB -> GB), the
GPU utilisation it shows alone (Lucid's profiled metric) and Lucid's sharing score per batch size: the
``label`` column of ``single_data.csv`` at full precision (0, 1, 2: how much the job suffers and inflicts when
packed; Lucid's Packing Analyze Model learns it from the profiled metrics, its analyzer labels a job by its
mean speed over measured pairs: below 0.85 -> 2, below 0.95 -> 1, else 0).

Usage: ``python scripts/fit_colocation.py [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.datadir import data_dir as default_data_dir

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "dlsched" / "catalog" / "params" / "colocation.json"

#: Source spelling -> canonical model name.
ALIASES = {
    "ResNet18": "resnet18", "ResNet-18": "resnet18", "ResNet50": "resnet50", "ResNet-50": "resnet50",
    "resnet50": "resnet50", "MobileNetV2": "mobilenetv2", "MobileNetV3": "mobilenetv3",
    "EfficientNet": "efficientnet", "VGG": "vgg", "vgg19": "vgg19", "DCGAN": "dcgan", "PointNet": "pointnet",
    "LSTM": "lstm", "LM": "lstm", "NeuMF": "neumf", "PPO": "ppo", "TD3": "td3", "BERT": "bert",
    "Bert-Base": "bert", "Bert-Large": "bert-large", "GPT2": "gpt2", "GPT2-Medium": "gpt2-medium",
    "GPT2-XL": "gpt2-xl", "Transformer": "transformer", "Recommendation": "recommendation", "A3C": "a3c",
    "CycleGAN": "cyclegan",
}

#: Models of the Gimbal workloads (its Table 1) that no source measured, and the measured model that stands
#: in for each, with the reason. The world uses the stand-in's pairs and memory for them.
PROXIES = {
    "vgg11": ("vgg19", "the ImageNet VGG measured (PAL); Lucid's VGG is the CIFAR-10 variant"),
    "vgg16": ("vgg19", "the ImageNet VGG measured (PAL)"),
    "deepspeech2": ("lstm", "recurrent network with the same kernel mix (Lucid/Gavel LSTM language model)"),
    "plnas": ("mobilenetv3", "NAS-derived mobile convolutional network, as MobileNetV3"),
    "ofa": ("mobilenetv3", "Once-for-All networks are drawn from the MobileNetV3 search space"),
    "llama": ("gpt2-xl", "decoder-only language model, the largest one measured (PAL)"),
}

#: GPU memory (GB) of one worker for measured models that Lucid's single-job profile lacks, with the reason.
EXTRA_MEMORY_GB = {
    "vgg19": (9.0, "VGG-19 ImageNet at batch 32 (between Lucid's ResNet-50 at 32 and 64)"),
    "gpt2": (12.0, "GPT-2 small, batch 8 per worker with AdamW state"),
    "gpt2-medium": (20.0, "GPT-2 medium, batch 8 per worker with AdamW state"),
    "gpt2-xl": (36.0, "stands in for LLaMA fine-tuning: Gimbal packs LLaMA workers with ResNet-50 and VGG-11 "
                      "workers on 48 GB A40s (Table 3, JC7 and JC8), so one leaves about 12 GB; BERT's 18 GB "
                      "does not fit beside it"),
    "bert-large": (24.0, "BERT-large pre-training, above BERT-base's 18 GB"),
}


def _pairs_lucid(base: Path) -> list[tuple[str, str, float, float, str]]:
    df = pd.read_csv(base / "lucid" / "colocate_info.csv")
    return [(ALIASES[r.model1], ALIASES[r.model2], float(r.speed1), float(r.speed2), "lucid")
            for r in df.itertuples()]


def _pairs_gavel(base: Path) -> list[tuple[str, str, float, float, str]]:
    data = json.loads((base / "gavel" / "physical_cluster_throughputs.json").read_text())
    out = []
    for key, entry in data["v100"].items():
        job, scale = ast.literal_eval(key)
        alone = entry.get("null")
        if not alone:
            continue
        name = ALIASES[job.split(" (")[0]]
        for other, value in entry.items():
            if other == "null":
                continue
            partner, pscale = ast.literal_eval(other)
            if pscale != scale or not value or value[0] <= 0 or value[1] <= 0:
                continue
            palone = data["v100"].get(str((partner, pscale)), {}).get("null")
            if not palone:
                continue
            out.append((name, ALIASES[partner.split(" (")[0]], value[0] / alone, value[1] / palone, "gavel"))
    return out


def _pairs_pal(base: Path) -> list[tuple[str, str, float, float, str]]:
    df = pd.read_csv(base / "pal" / "blox_exp" / "colocate_info" / "norm_speed.csv")
    df = df[(df.model2 != "Empty") & (df.speed1 > 0) & (df.speed2 > 0)]
    return [(ALIASES[r.model1], ALIASES[r.model2], float(r.speed1), float(r.speed2), "pal")
            for r in df.itertuples() if r.model1 in ALIASES and r.model2 in ALIASES]


def derive(base: Path) -> dict:
    rows = _pairs_lucid(base) + _pairs_gavel(base) + _pairs_pal(base)
    speeds: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    sources: dict[tuple[str, str], set[str]] = defaultdict(set)
    for a, b, sa, sb, src in rows:
        key, val = ((a, b), (sa, sb)) if a <= b else ((b, a), (sb, sa))
        speeds[key].append(val)
        if a == b:  # two jobs of one model: neither is "first", so the pair's speeds are symmetric
            speeds[key].append(val[::-1])
        sources[key].add(src)
    pairs = []
    for (a, b), vals in sorted(speeds.items()):
        arr = np.clip(np.array(vals), 1e-3, 1.0)
        pairs.append({"a": a, "b": b, "speed_a": round(float(np.median(arr[:, 0])), 4),
                      "speed_b": round(float(np.median(arr[:, 1])), 4), "n": len(vals) // (2 if a == b else 1),
                      "sources": sorted(sources[(a, b)])})
    single = pd.read_csv(base / "lucid" / "single_data.csv")
    single["name"] = single.model.map(ALIASES)
    memory = {m: round(float(g.gmem.median()) / 1024, 2) for m, g in single.groupby("name")}
    util = {m: round(float(g.gpu_util.median()), 1) for m, g in single.groupby("name")}
    fp32 = single[single.amp == 0]
    score = {m: {str(int(r.batchsize)): int(r.label) for r in g.sort_values("batchsize").itertuples()}
             for m, g in sorted(fp32.groupby("name"))}
    for m, (gb, _) in EXTRA_MEMORY_GB.items():
        memory.setdefault(m, gb)
    counts = defaultdict(int)
    for a, b, *_ in rows:
        counts[a] += 1
        counts[b] += 1
    return {
        "_source": "lucid/colocate_info.csv (RTX 3090, 1+1 GPU), gavel/physical_cluster_throughputs.json (V100 "
                   "packed pairs, divided by the isolated throughput), pal/blox_exp/colocate_info/norm_speed.csv "
                   "(multi-GPU pairs); derived by scripts/fit_colocation.py",
        "_rule": "speed_a/speed_b: each job's speed sharing a GPU under free competition, relative to alone; "
                 "median over measured variants, clipped to (0, 1]. Missing pairs: see dlsched.catalog.colocation.",
        "pairs": pairs,
        "proxies": {m: {"model": p, "why": why} for m, (p, why) in PROXIES.items()},
        "memory_gb": dict(sorted(memory.items())),
        "memory_notes": {m: why for m, (_, why) in EXTRA_MEMORY_GB.items()},
        "gpu_util_pct": dict(sorted(util.items())),
        "share_score": score,
        "_share_score_rule": "Lucid's label (single_data.csv, fp32) per batch size; the nearest profiled batch "
                             "for others; models Lucid did not profile: its analyzer's rule on the model's median "
                             "free-competition speed (< 0.85 -> 2, < 0.95 -> 1, else 0)",
        "measured_rows": dict(sorted(counts.items())),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()
    base = args.data_dir or default_data_dir()
    if base is None:
        print("error: data directory not found (set DLSCHED_DATA)", file=sys.stderr)
        return 2
    table = derive(base)
    OUT.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{len(table['pairs'])} pairs, {len(table['memory_gb'])} models with memory -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
