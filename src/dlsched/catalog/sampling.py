"""Drawing a simulated cluster's GPUs from the measured populations, the way PAL does.

PAL samples the GPUs of a simulated cluster from its profiling data "discretely, randomly ... without
repetition". The simulator's truth (``dlsched.world``) and the profiles a scheduler may be handed
(``dlsched.estimators``) must draw identically for one seed, yet neither may import the other, so the draws
that both make live here, next to the data they draw from.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlsched.catalog.classes import CLASSES
from dlsched.catalog.gpu_variability import family, measured_family, measured_pm_scores
from dlsched.core.errors import InputError


def draw_without_repetition(rng: np.random.Generator, pool: int, n: int, *,
                            first_in_order: bool = False) -> np.ndarray:
    """``n`` indices into ``pool`` items, no item twice until all have been used (blocks of ``pool``).

    When ``n`` exceeds the pool the draw continues with a fresh permutation. ``first_in_order`` keeps the
    first block in pool order (a physical testbed whose GPU i is the file's GPU i); later blocks shuffle.
    """
    if pool <= 0:
        raise InputError("cannot draw GPUs from an empty profile")
    parts: list[np.ndarray] = []
    left = n
    while left > 0:
        block = np.arange(pool) if first_in_order and not parts else rng.permutation(pool)
        parts.append(block[:left])
        left -= len(parts[-1])
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def draw_runs(family_name: str, n: int, rng: np.random.Generator, data_dir: Path | str) -> dict[str, np.ndarray]:
    """Per class, ``n`` single benchmark *runs* of a family, as PAL's simulator scores its GPUs.

    Each class draws its own ``n`` runs of its benchmark without repetition, each run divided by its file's
    median run. Single runs include the stragglers (ResNet-50 on Longhorn reaches 3.6x), so the cluster is
    far more variable than one scored by per-GPU medians. PAL's simulator (``blox/cluster_state.py`` of
    ``hal-uw/blox-pal``) draws like this, with replacement; the paper says without repetition. A family
    with precomputed per-GPU scores only (``testbed32``) draws those instead. Classes the family does not
    profile are flat (1.0).
    """
    fam = family(family_name, field="profile")
    if not fam.has_runs:
        scores = measured_pm_scores(family_name, data_dir)
        return {c: v[draw_without_repetition(rng, len(v), n)] for c, v in scores.items()}
    out: dict[str, np.ndarray] = {}
    for data in measured_family(family_name, data_dir).values():
        assert data.runs is not None
        for cls in data.classes:
            out[cls] = data.runs[draw_without_repetition(rng, len(data.runs), n)]
    return {c: out[c] if c in out else np.ones(n) for c in CLASSES}
