"""Turn a trace name from the command line or a config file into jobs.

Experiments name their workload with one short string, so configs stay readable and a run can be repeated
on another machine with its own data directory. A spec is a named trace from the data directory, a
synthetic trace, or a file path:

=========================================  ===================================================================
spec                                       trace
=========================================  ===================================================================
``sia-philly:N``                           ``sia/workloads/philly/workload-N.csv`` (N = 1..8)
``sia-saturn:N``                           ``sia/workloads/saturn/workload-N.csv`` (N = 1..10)
``sia-scale:rate_R:N``                     ``sia/workloads/scale/rate_R/workload-N.csv`` (R = 10..50 jobs/h)
``sia-scale:scale_Kx:N``                   ``sia/workloads/scale/scale_Kx/workload-N.csv`` (K = 2..32)
``pollux:N``                               ``pollux/workloads/workload-N.csv`` (N = 1..8)
``pollux-V:N``                             ``pollux/workloads-V/workload-N.csv`` (V = 0.5, 1.5, 2.0, realistic)
``pal-philly:N``                           ``pal/workload-traces/philly/workload-N.csv`` (N = 1..8)
``pal-blox:NAME``                          ``pal/blox_exp/workload/NAME.csv``
``gavel:VC[:SEED]``                        ``gavel/traces/msr/seed=SEED/VC.trace[.gz]`` (SEED 0..4, default 0)
``gavel-physical:NAME``                    ``gavel/traces/physical_cluster/NAME.trace``
``tiresias``                               ``tiresias/60_job.csv``
``philly[:N]``                             ``sia/traces/philly.csv`` (82k jobs), the first N by submit time
``synthetic[:k=v,...]``                    :func:`~dlsched.traces.synthetic.synthetic`; keys ``rate``,
                                           ``hours``, ``seed``, ``adaptivity``, ``kind``, ``jobs``,
                                           ``max_gpus``, ``ncf_share``
``synergy[:k=v,...]``                      :func:`~dlsched.traces.synergy.synergy` (PAL's Synergy-style
                                           traces); keys ``rate``, ``jobs``, ``seed``, ``max_gpus``
``gimbal-philly[:seed=S]``                 :func:`~dlsched.traces.gimbal.gimbal_trace`: Gimbal's 150-job
                                           Philly-derived trace (default seed 1)
``gimbal-alibaba[:seed=S]``                Gimbal's 300-job Alibaba-derived trace
``hops[:jobs=N,rate=R,seed=S]``            :func:`~dlsched.traces.hops.hops_trace` (Hops Table 4: 500 jobs
                                           at 100 jobs/h by default)
``hops-table3[:seed=S]``                   :func:`~dlsched.traces.hops.hops_table3_trace` (Hops Table 3:
                                           25 jobs over 2.5 hours)
``copter[:jobs=N,hours=H,seed=S]``         :func:`~dlsched.traces.copter.copter_trace` (COpter: Alibaba-
                                           derived model jobs; 40,000 over 24 hours by default)
anything else                              a trace file in any format :func:`read_trace` detects
=========================================  ===================================================================

Sia/Pollux workloads may take an adaptivity suffix, ``sia-philly:1@rigid`` or ``pollux:3@strong-scaling``,
to replay the same jobs with less freedom. A named trace whose file is missing raises an ``InputError``
naming the path and the ``DLSCHED_DATA`` setting.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from dlsched.core.errors import InputError
from dlsched.core.job import Adaptivity, JobSpec
from dlsched.core.suggest import did_you_mean
from dlsched.traces.options import parse_trace_options
from dlsched.traces.readers import read_gavel_trace, read_philly_log, read_sia_workload, read_trace
from dlsched.traces.synthetic import synthetic

#: Named trace families, for help texts and errors.
NAMED_TRACES: tuple[str, ...] = (
    "sia-philly:N", "sia-saturn:N", "sia-scale:rate_R:N", "sia-scale:scale_Kx:N", "pollux:N",
    "pollux-0.5:N", "pollux-1.5:N", "pollux-2.0:N", "pollux-realistic:N", "pal-philly:N", "pal-blox:NAME",
    "gavel:VC[:SEED]", "gavel-physical:NAME", "tiresias", "philly[:N]", "synthetic[:key=value,...]",
    "synergy[:key=value,...]", "gimbal-philly[:seed=S]", "gimbal-alibaba[:seed=S]", "hops[:jobs=N,rate=R,seed=S]",
    "hops-table3[:seed=S]", "copter[:jobs=N,hours=H,seed=S]",
)
_POLLUX_VARIANTS = ("0.5", "1.5", "2.0", "realistic")
_FAMILIES = frozenset({"sia-philly", "sia-saturn", "sia-scale", "pollux", "pal-philly", "pal-blox", "gavel",
                       "gavel-physical", "tiresias", "philly", "synthetic", "synergy", "gimbal-philly",
                       "gimbal-alibaba", "hops", "hops-table3", "copter"})
#: Source file of each Gimbal trace inside the data directory.
_GIMBAL_FILES = {"philly": "sia/traces/philly.csv", "alibaba": "alibaba/gpu-v2023/openb_pod_list_default.csv"}
_SYNTHETIC_KEYS = ("rate", "hours", "seed", "adaptivity", "kind", "jobs", "max_gpus", "ncf_share")
_NAME = re.compile(r"^[A-Za-z0-9_.+\-]+$")


def limit_jobs(specs: Sequence[JobSpec], n: int) -> list[JobSpec]:
    """The first ``n`` jobs by submission time (for short test runs of a long trace)."""
    if not isinstance(n, int) or n < 1:
        raise InputError(f"job limit must be a whole number >= 1, got {n!r}", field="jobs")
    return sorted(specs, key=lambda s: s.submit_time_s)[:n]


def _data_file(rel: str, spec: str) -> Path:
    """The file of a named trace, or an InputError naming the path, the setting and what is there."""
    from dlsched.datadir import ENV_VAR, data_dir, fetch_hint, require_data

    base = data_dir()
    if base is None:
        require_data(rel, f"named trace '{spec}'")  # raises, naming the directory it looked for
        raise InputError(f"named trace '{spec}' needs the data directory (set {ENV_VAR}){fetch_hint(rel)}")
    path = base / rel
    if not path.is_file():
        hint = ""
        if path.parent.is_dir():
            names = sorted(p.name for p in path.parent.iterdir() if not p.name.startswith("."))
            if names:
                shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
                hint = f"; that directory has: {shown}"
        setting = (f"{ENV_VAR}={os.environ[ENV_VAR]}" if os.environ.get(ENV_VAR)
                   else f"{ENV_VAR} unset, so the default {base} is used")
        raise InputError(f"named trace '{spec}': {path} not found ({setting}){hint}{fetch_hint(rel)}")
    return path


def _index(text: str, spec: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise InputError(f"trace '{spec}': expected a workload number >= 1, got {text!r}")
    return int(text)


def _name(text: str, spec: str) -> str:
    if not _NAME.match(text):
        raise InputError(f"trace '{spec}': invalid name {text!r}")
    return text


def _parse_synthetic(args: str, spec: str) -> list[JobSpec]:
    numeric = {"rate": float, "hours": float, "ncf_share": float, "seed": int, "jobs": int, "max_gpus": int}
    kwargs = parse_trace_options(args, spec, _SYNTHETIC_KEYS, numeric)
    rename = {"jobs": "num_jobs", "max_gpus": "max_request_gpus"}
    # each value already has its key's type (``numeric``); the dict as a whole can only say object
    return synthetic(**{rename.get(k, k): v for k, v in kwargs.items()})  # type: ignore[arg-type]


def resolve_trace(spec: str) -> tuple[list[JobSpec], str]:
    """Jobs (sorted by submit time) and a display name for a trace spec; see the module docstring."""
    spec = spec.strip()
    if not spec:
        raise InputError("empty trace name")
    head, sep, rest = spec.partition(":")
    named = _named(head, rest, spec)
    if named is not None:
        return named(), spec
    path = Path(spec).expanduser()
    if path.exists():
        return read_trace(path), path.name
    family = head.partition("@")[0].strip()
    if "/" in spec or path.suffix or not (sep or family.replace("-", "").isalpha()):
        raise InputError(f"trace file '{spec}' not found (nor is it one of the named traces: {', '.join(NAMED_TRACES)})",
                         field="trace")
    raise InputError(f"unknown named trace '{family}'{did_you_mean(family, _FAMILIES)} in '{spec}' (named "
                     f"traces: {', '.join(NAMED_TRACES)}); nor is it a file", field="trace")


def _named(head: str, rest: str, spec: str) -> Callable[[], list[JobSpec]] | None:
    """A loader for a named trace, or None if ``head`` names no trace family (then it is a path)."""
    base, _, suffix = head.strip().partition("@")
    base = base.strip()
    if base not in _FAMILIES and base not in {f"pollux-{v}" for v in _POLLUX_VARIANTS}:
        return None
    parts = rest.split(":") if rest else []
    if "@" in rest:
        # The adaptivity suffix goes at the very end: "sia-philly:1@rigid".
        rest, _, suffix = rest.partition("@")
        parts = rest.split(":") if rest else []
    adaptivity: Adaptivity | None = None
    if suffix:
        try:
            adaptivity = Adaptivity(suffix.strip().lower())
        except ValueError:
            known = ", ".join(a.value for a in Adaptivity)
            raise InputError(f"trace '{spec}': unknown adaptivity {suffix!r} (one of: {known})") from None
    head = base

    def want(n: int, usage: str) -> list[str]:
        if len(parts) != n:
            raise InputError(f"trace '{spec}': expected {usage}")
        return parts

    def sia_like(rel: str) -> Callable[[], list[JobSpec]]:
        return lambda: read_sia_workload(_data_file(rel, spec), adaptivity=adaptivity or Adaptivity.ADAPTIVE)

    if adaptivity is not None and head not in ("sia-philly", "sia-saturn", "sia-scale", "pollux") \
            and not head.startswith("pollux-"):
        raise InputError(f"trace '{spec}': only Sia/Pollux workloads take an @adaptivity suffix")

    if head in ("sia-philly", "sia-saturn"):
        (n,) = want(1, f"{head}:N")
        return sia_like(f"sia/workloads/{head[4:]}/workload-{_index(n, spec)}.csv")
    if head == "sia-scale":
        group, n = want(2, "sia-scale:rate_R:N or sia-scale:scale_Kx:N")
        if not re.fullmatch(r"rate_\d+|scale_\d+x", group):
            raise InputError(f"trace '{spec}': expected rate_R (e.g. rate_20) or scale_Kx (e.g. scale_4x), "
                             f"got {group!r}")
        return sia_like(f"sia/workloads/scale/{group}/workload-{_index(n, spec)}.csv")
    if head == "pollux":
        (n,) = want(1, "pollux:N")
        return sia_like(f"pollux/workloads/workload-{_index(n, spec)}.csv")
    if head.startswith("pollux-"):
        variant = head[len("pollux-"):]
        (n,) = want(1, f"{head}:N")
        return sia_like(f"pollux/workloads-{variant}/workload-{_index(n, spec)}.csv")
    if head == "pal-philly":
        (n,) = want(1, "pal-philly:N")
        return lambda: read_trace(_data_file(f"pal/workload-traces/philly/workload-{_index(n, spec)}.csv", spec))
    if head == "pal-blox":
        (name,) = want(1, "pal-blox:NAME")
        name = _name(name.removesuffix(".csv"), spec)
        return lambda: read_trace(_data_file(f"pal/blox_exp/workload/{name}.csv", spec))
    if head == "gavel":
        if len(parts) not in (1, 2):
            raise InputError(f"trace '{spec}': expected gavel:VC or gavel:VC:SEED")
        vc = _name(parts[0], spec)
        seed = parts[1] if len(parts) == 2 else "0"
        if not seed.isdigit():
            raise InputError(f"trace '{spec}': seed must be a whole number, got {seed!r}")
        rel = f"gavel/traces/msr/seed={int(seed)}/{vc}.trace"
        return lambda: read_gavel_trace(_gavel_file(rel, spec))
    if head == "gavel-physical":
        (name,) = want(1, "gavel-physical:NAME")
        name = _name(name.removesuffix(".trace"), spec)
        return lambda: read_gavel_trace(_data_file(f"gavel/traces/physical_cluster/{name}.trace", spec))
    if head == "tiresias":
        want(0, "tiresias (no arguments)")
        return lambda: read_trace(_data_file("tiresias/60_job.csv", spec))
    if head == "philly":
        if len(parts) > 1:
            raise InputError(f"trace '{spec}': expected philly or philly:N")
        limit = _index(parts[0], spec) if parts else None
        def load() -> list[JobSpec]:
            jobs = read_philly_log(_data_file("sia/traces/philly.csv", spec))
            return jobs if limit is None else limit_jobs(jobs, limit)
        return load
    if head == "synthetic":
        return lambda: _parse_synthetic(rest, spec)
    if head in ("hops", "hops-table3"):
        from dlsched.traces.hops import parse_hops

        return lambda: parse_hops(head, rest, spec)
    if head == "copter":
        from dlsched.traces.copter import parse_copter

        return lambda: parse_copter(rest, spec)
    if head == "synergy":
        from dlsched.traces.synergy import parse_synergy

        return lambda: parse_synergy(rest, spec)
    if head in ("gimbal-philly", "gimbal-alibaba"):
        from dlsched.traces.gimbal import gimbal_trace

        source = head.removeprefix("gimbal-")
        options = parse_trace_options(rest, spec, ("seed",), {"seed": int})
        seed = int(options.get("seed", 1))  # type: ignore[call-overload]
        return lambda: gimbal_trace(source, _data_file(_GIMBAL_FILES[source], spec), seed)
    return None


def _gavel_file(rel: str, spec: str) -> Path:
    """Seed 0 of the msr traces is plain text, seeds 1-4 are gzipped: accept either."""
    from dlsched.datadir import data_dir

    base = data_dir()
    if base is not None and (base / f"{rel}.gz").is_file() and not (base / rel).is_file():
        return base / f"{rel}.gz"
    return _data_file(rel, spec)
