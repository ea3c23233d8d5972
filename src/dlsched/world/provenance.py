"""Where each GPU type's numbers come from, readable by code, and the spec of a type a cluster file declares.

A user comparing schedulers on an ``h100`` cluster should be able to tell which of the world's numbers were
measured and which were carried over by a rule, without reading the fitting scripts. Every number of the
world's step-time model (:mod:`dlsched.world.throughput`) therefore has a provenance, one of
:data:`KINDS`:

* ``measured``: fitted to measured step times (the Sia artifact profiles; ``rows`` beside each fitted entry
  says how many);
* ``derived``: scaled from a measured type by published figures (vendor data sheets, launch notes);
* ``rule``: a stated rule applied where no measurement matches (e.g. a model family not measured on that
  GPU takes the mean ratio of those that were);
* ``modelled``: not measured at all but set by a model of the hardware (multi-GPU synchronisation over
  NVLink 4);
* ``declared``: given by a cluster file (``gpu_types: {l40s: {like: a100, speed: 0.8}}``).

Derived types keep their provenance beside their numbers in ``world/params/derived_types.json`` (written by
``scripts/fit_gpu_types.py``); fitted types are read off the fitted file itself.
"""

from __future__ import annotations

from typing import Any

from dlsched.core.gpu import KNOWN_GPU_TYPES

#: The kinds of provenance, from most to least direct.
KINDS = ("measured", "derived", "rule", "modelled", "declared")


def _entry(kind: str, how: str) -> dict[str, str]:
    assert kind in KINDS, kind
    return {"kind": kind, "how": how}


def provenance_of(gpu_type: str, raw: dict[str, Any], derived: dict[str, Any] | None,
                  models: set[str]) -> dict[str, dict[str, str]]:
    """Provenance of ``gpu_type``'s numbers: ``relative_speed``, every model it runs, ``sync``, ``memory``.

    ``raw`` is the fitted parameter file, ``derived`` the type's spec when it is derived or declared (its
    ``provenance`` map is then the answer) and ``models`` the models the type has a step-time entry for.
    """
    if derived is not None:
        given = derived["provenance"]
        out: dict[str, dict[str, str]] = {k: dict(v) for k, v in given.items() if k != "compute"}
        for model in sorted(models):  # a spec's "compute" entry covers every model without its own
            if model not in out:
                out[model] = dict(given["compute"])
        return out
    source = str(raw.get("_source", "a fitted profiles file"))
    fitted = {m: int(raw["models"][m][gpu_type].get("rows", 0)) for m in sorted(models)
              if gpu_type in raw["models"].get(m, {})}
    out = {}
    if fitted:
        out["relative_speed"] = _entry("measured", "single-GPU throughput of the measured models, relative to "
                                                   "v100 (" + str(raw.get("_relative_speed_note", source)) + ")")
    else:
        out["relative_speed"] = _entry("derived", str(raw.get("_relative_speed_note", source)))
    for model, rows in fitted.items():
        out[model] = _entry("measured", f"fitted to {rows} measured step times: {source}")
    if fitted:
        out["sync"] = _entry("measured", "fitted to the measured multi-GPU step times (where a type has no "
                                         "cross-node rows, borrowed as the fitted file's notes say)")
        out["memory"] = _entry("measured", "largest local batch profiled")
    return out


def declared_spec(name: str, like: str, speed: float, memory_gb: float) -> dict[str, Any]:
    """The derived-type spec (as in ``derived_types.json``) of a type a cluster file declares.

    Compute is ``like``'s divided by ``speed`` for every model; synchronisation is ``like``'s (the file says
    nothing of the interconnect); the largest local batch scales with memory against ``like``'s.
    """
    base_mem = KNOWN_GPU_TYPES[like].memory_gb if like in KNOWN_GPU_TYPES else memory_gb
    how = f"declared in the cluster file: {speed:g} x the speed of {like}"
    return {
        "from": like, "speed": speed, "sync_from": like, "memory_ratio": memory_gb / base_mem,
        "declared": True, "field": f"gpu_types.{name}.like",
        "provenance": {
            "relative_speed": _entry("declared", how),
            "compute": _entry("declared", how + ", for every model " + like + " runs"),
            "sync": _entry("declared", f"{like}'s synchronisation terms (its interconnect)"),
            "memory": _entry("declared", f"{memory_gb:g} GB: the largest local batch is {like}'s scaled by "
                                         f"{memory_gb:g} / {base_mem:g}"),
        },
    }
