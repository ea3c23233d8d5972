#!/usr/bin/env python
"""Write ``src/dlsched/data/manifest.json``: where every file of the measured-data directory comes from.

Maintainers run this once per data refresh, with local git snapshots of the origin repositories and a data
directory to describe. Each file of the data directory is matched to the blob of the same git hash at the
pinned commit of its origin repository (so the pin is exact, not a guess by name); the files that the lab
copy converted (gzipped traces, unpickled lists, an extracted archive, tables transcribed from Python
classes) are described by hand below with their converter. Size and sha256 are those of the upstream bytes
a fetch will download, read from the snapshots.

Usage::

    python scripts/data_manifest.py --mirrors DIR --data DIR [--out src/dlsched/data/manifest.json]

``--mirrors`` holds one ``OWNER+REPO`` folder per repository, each a git directory (``repo`` or
``repo/.git`` inside it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

RAW = "https://raw.githubusercontent.com"

#: (owner/repo, full commit) of every origin repository.
REPOS = {
    "sia": ("siasosp23/artifacts", "aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70"),
    "adaptdl": ("petuum/adaptdl", "c793c7089bd307462686339d29707925c461f9a9"),
    "gavel": ("stanford-futuredata/gavel", "c4fa40097339e9608ab71fd64c8bdea96a5e4a4c"),
    "shockwave": ("uw-mad-dash/shockwave", "8a44f4a27a45760520386809b695d51b665b3679"),
    "pal": ("hal-uw/blox-pal", "da726cabd3113ff50cb9860b040b479fa7114221"),
    "synergy": ("msr-fiddle/synergy", "1bb2bed6edc9c5f953d0b7f0a40e4fdad053489c"),
    "lucid": ("S-Lab-System-Group/Lucid", "63685a3ab7d15d8e940bb47ef98b6d5cca472b13"),
    "tiresias": ("SymbioticLab/Tiresias", "959f9b08f44fa1b4f2b3aed79b01e4d439264a94"),
    "clusterdata": ("alibaba/clusterdata", "7a6c496e4f4b6ce6150be8f881cb051bf2abff42"),
    "qzweng": ("qzweng/clusterdata-cluster-trace-gpu-v2020-data", "e60d925fec479a526f4fb99379dfadefeab30c8e"),
    "helios": ("S-Lab-System-Group/HeliosArtifact", "bdaae109c21f8038a2331e6a23a582d5ae78ab5b"),
}

#: Per dataset: description, licence, redistribution, what reads it, and its origin repositories (first =
#: the main one; files are matched against these in order).
DATASETS: dict[str, dict[str, Any]] = {
    "sia": dict(
        title="Sia (SOSP'23): throughput and statistical-efficiency profiles on six GPU types, Philly job log, "
              "Philly/Saturn/scale workloads",
        licence="none stated (aws profiles, philly.csv: Apache-2.0 via adaptdl)",
        redistribution=False,
        redistribution_note="the repository states no licence: use for validation, ask the authors before "
                            "redistributing",
        used_by="world fits (scripts/fit_*.py), named traces sia-philly/sia-saturn/sia-scale/philly/gimbal-philly",
        repos=["sia"]),
    "pollux": dict(
        title="Pollux (OSDI'21) simulator workloads: 8 x 160 jobs at loads x0.5 to x2",
        licence="Apache-2.0", redistribution=True, redistribution_note="keep the licence and notice",
        used_by="named traces pollux:N, pollux-<variant>:N", repos=["adaptdl"]),
    "gavel": dict(
        title="Gavel (OSDI'20): throughputs of 26 job types on K80/P100/V100 incl. co-located pairs; "
              "per-VC Philly traces",
        licence="MIT", redistribution=True, redistribution_note="keep the copyright notice",
        used_by="named traces gavel:VC[:SEED], gavel-physical:NAME; scripts/fit_colocation.py", repos=["gavel"]),
    "shockwave": dict(
        title="Shockwave (NSDI'23): re-measured V100 throughputs, dynamic batch-size traces, solver settings",
        licence="MIT", redistribution=True, redistribution_note="keep the copyright notice",
        used_by="reference (experiments compare against it)", repos=["shockwave"]),
    "pal": dict(
        title="PAL (SC'24): per-GPU performance variability, PM-scores, PAL and Blox traces, co-location speeds",
        licence="MIT", redistribution=True, redistribution_note="keep the copyright notice",
        used_by="variability profiles (gpu_speeds=measured), PAL constants, named traces pal-philly/pal-blox",
        repos=["pal"]),
    "synergy": dict(
        title="Synergy (OSDI'22): per-model throughput against CPU and memory allocation",
        licence="MIT", redistribution=True, redistribution_note="keep the copyright notice",
        used_by="reference (Synergy's CPU/memory sensitivity)", repos=["synergy"]),
    "lucid": dict(
        title="Lucid (ASPLOS'23): 1,388 measured co-location pairs; Helios-Venus arrival series",
        licence="S-Lab License 1.0 (non-commercial use only)", redistribution=False,
        redistribution_note="non-commercial use only; commercial use needs the authors' permission",
        used_by="scripts/fit_colocation.py (packing policies' co-location model)", repos=["lucid"]),
    "tiresias": dict(
        title="Tiresias (NSDI'19): 60-job trace, cluster specs, YARN GPU-time samples",
        licence="Apache-2.0", redistribution=True, redistribution_note="keep the licence and notice",
        used_by="named trace tiresias", repos=["tiresias"]),
    "alibaba": dict(
        title="Alibaba GPU traces: FGD 2023 pod lists and node inventory; PAI 2020 machine specs, "
              "mini-batch times, headers",
        licence="CC-BY-4.0 (gpu-v2020); none stated (gpu-v2023)", redistribution=False,
        redistribution_note="gpu-v2020 parts may be shared with attribution (CC-BY-4.0); gpu-v2023 states no "
                            "licence (cite the ATC'23 paper, ask before redistributing)",
        used_by="named trace gimbal-alibaba; scripts/fit_alibaba_stats.py", repos=["clusterdata", "qzweng"]),
    "helios": dict(
        title="Helios (SC'21): per-cluster summary statistics, Earth VC sizes",
        licence="MIT (HeliosArtifact)", redistribution=True, redistribution_note="keep the copyright notice",
        used_by="reference (cluster statistics)", repos=["helios"]),
    "philly": dict(
        title="Philly: node count per virtual cluster (the raw Philly log is not obtainable; see docs/data.md)",
        licence="MIT (HeliosArtifact)", redistribution=True, redistribution_note="keep the copyright notice",
        used_by="reference", repos=["helios"]),
    "h200": dict(
        title="dlsched's own measurements on one NVIDIA H200 (2026-11-28): step times of five model "
              "families and the speeds of every pair time-slicing the GPU",
        licence="this project's measurements; free to use", redistribution=True,
        redistribution_note="free to use",
        used_by="reference (co-location on a current GPU)", repos=[]),
}

#: Lab files that are conversions of upstream files: dest -> (repo key, upstream paths, converter, args).
CONVERTED: dict[str, tuple[str, list[str], str, dict[str, Any]]] = {
    "gavel/philly_job_distribution.csv": (
        "gavel", ["scheduler/philly_job_distribution.pickle"], "pickle_pairs_csv",
        {"header": ["duration_s", "num_gpus"]}),
    "gavel/traces/msr/jobs_to_complete.txt": (
        "gavel", ["scheduler/traces/msr/jobs_to_complete.pickle"], "pickle_ids_txt", {}),
    "gavel/traces/msr/steady_state_jobs.txt": (
        "gavel", ["scheduler/traces/msr/steady_state_jobs.pickle"], "pickle_ids_txt", {}),
    "alibaba/gpu-v2020-machine-spec/pai_machine_spec.csv": (
        "qzweng", ["pai_machine_spec.tar.gz"], "untar", {"member": "pai_machine_spec.csv"}),
}

#: Lab files no fetch can reproduce: dest -> reason.
UNOBTAINABLE = {
    "pal/pal_simulation_constants.json":
        "transcribed by hand from blox-pal's code (workload/workload.py, blox/blox_manager.py, simulator.py at "
        "da726ca), including values commented out there, so no upstream file holds it; the simulator runs on "
        "the packaged params/pal_constants.json made from it; --from DIR copies it from a data directory "
        "holding it",
    "h200/gpu_profile.json":
        "measured by this project on one NVIDIA H200 (no public upstream); --from DIR copies it, checked "
        "against the pinned sha256, from a data directory holding it",
    "h200/gpu_profile.py":
        "this project's measuring script (no public upstream); --from DIR copies it from a data directory "
        "holding it",
}


def git_dir(mirrors: Path, key: str) -> Path:
    owner, name = REPOS[key][0].split("/")
    base = mirrors / f"{owner}+{name}" / "repo"
    return base / ".git" if (base / ".git").is_dir() else base


def tree(mirrors: Path, key: str) -> dict[str, list[str]]:
    """git blob hash -> paths at the pinned commit."""
    out = subprocess.run(["git", "-C", str(git_dir(mirrors, key)), "ls-tree", "-r", REPOS[key][1]],
                         capture_output=True, text=True, check=True).stdout
    blobs: dict[str, list[str]] = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        blobs.setdefault(meta.split()[2], []).append(path)
    return blobs


def blob(mirrors: Path, key: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", str(git_dir(mirrors, key)), "show", f"{REPOS[key][1]}:{path}"],
                          capture_output=True, check=True).stdout


def git_hash(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def source(mirrors: Path, key: str, path: str) -> dict[str, Any]:
    data = blob(mirrors, key, path)
    repo, commit = REPOS[key]
    return {"url": f"{RAW}/{repo}/{commit}/{quote(path, safe='/=+,')}", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def suffix_match(path: str, dest: str) -> int:
    """How many trailing path components two paths share (picks among byte-identical upstream copies)."""
    a, b = path.split("/")[::-1], dest.split("/")[::-1]
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def synergy_entry(mirrors: Path, lab: Path) -> dict[str, Any]:
    doc = json.loads((lab / "synergy" / "model_cpu_mem_sensitivity.json").read_text())
    meta = {k: v for k, v in doc.items() if k != "models"}
    return {"dest": "model_cpu_mem_sensitivity.json", "convert": "synergy_models", "args": {"meta": meta},
            "sources": [source(mirrors, "synergy", f"simulator/models/{name}.py") for name in doc["models"]]}


def describe(mirrors: Path, lab: Path) -> dict[str, Any]:
    trees = {key: tree(mirrors, key) for key in REPOS}
    datasets = []
    for name, info in DATASETS.items():
        files: list[dict[str, Any]] = []
        unavailable: list[dict[str, Any]] = []
        for path in sorted(p for p in (lab / name).rglob("*") if p.is_file()):
            rel = path.relative_to(lab).as_posix()
            dest = path.relative_to(lab / name).as_posix()
            data = path.read_bytes()
            if dest == "README.md" or rel == "synergy/model_cpu_mem_sensitivity.json":
                continue  # the lab's own notes (docs/data.md says the same); synergy is added below
            if rel in UNOBTAINABLE:
                unavailable.append({"dest": dest, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                    "reason": UNOBTAINABLE[rel]})
                continue
            if rel in CONVERTED:
                key, paths, conv, args = CONVERTED[rel]
                files.append({"dest": dest, "convert": conv, "args": args,
                              "sources": [source(mirrors, key, p) for p in paths]})
                continue
            if rel.endswith(".trace.gz") and "/msr/seed=" in rel:
                up = "scheduler/" + rel.removeprefix("gavel/").removesuffix(".gz")
                files.append({"dest": dest, "convert": "gzip", "args": {},
                              "sources": [source(mirrors, "gavel", up)]})
                continue
            found = None
            for key in info["repos"]:
                paths = trees[key].get(git_hash(data), [])
                if paths:
                    found = (key, max(paths, key=lambda p: (suffix_match(p, dest), p)))
                    break
            if found is None:
                raise SystemExit(f"{rel}: no byte-identical upstream file and no converter described")
            files.append({"dest": dest, "sources": [source(mirrors, *found)]})
        if name == "synergy":
            files.append(synergy_entry(mirrors, lab))
        origins = [{"repository": REPOS[k][0], "commit": REPOS[k][1]} for k in info["repos"]]
        entry = {"name": name, **{k: v for k, v in info.items() if k != "repos"}, "origins": origins,
                 "files": files, "unavailable": unavailable}
        datasets.append(entry)
    return {"format": 1, "datasets": datasets}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parents[1] / "src" / "dlsched" / "data" / "manifest.json")
    args = parser.parse_args()
    doc = describe(args.mirrors, args.data)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    n = sum(len(d["files"]) for d in doc["datasets"])
    print(f"{args.out}: {len(doc['datasets'])} datasets, {n} files")


if __name__ == "__main__":
    main()
