"""Straggler episodes: transient, node-wide slowdowns played in simulated time (world option ``straggler_episodes``).

PAL's single benchmark runs include runs up to 3.6x slower than their GPU's median. They are not slow GPUs:
on Longhorn every run slower than 1.5x its GPU's median belongs to one of five sessions in which all four
GPUs of a node were slow together, and each node was back to its usual speed in its next session about half
an hour later (``scripts/fit_stragglers.py``, which writes the fitted numbers to ``params/stragglers.json``).
So the world keeps each GPU's median as its speed and adds episodes on top:

* every node alternates between normal periods, exponentially distributed with the fitted mean gap, and
  episodes whose length is uniform between the fitted bounds;
* during an episode every GPU of the node is slower by its own factor, drawn from the fitted lognormal of
  the job's class (classes whose runs showed no episode are not slowed), clipped below at 1.

Each node draws from its own random stream, seeded by the run's world seed and the node's index, and its
episodes are generated in time order as far as a query needs, so a run is reproducible for its seed whatever
order the engine asks in. Only the engine reads episodes (through :class:`~dlsched.world.base.World`); a
scheduler sees the static profile and, like a real one, only the slower progress its jobs report.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from dlsched.core.cluster import Cluster

#: Salt mixed into the seed so episode draws do not correlate with the per-GPU speed draw.
_SEED_SALT = 0x57A6_61E5


@cache
def fitted_params() -> dict:
    """The committed fit (``dlsched/world/params/stragglers.json``)."""
    return json.loads(resources.files("dlsched").joinpath("world/params/stragglers.json").read_text())


@dataclass(frozen=True)
class EpisodeProcess:
    """The fitted episode process of one variability family."""

    #: Mean length of the normal period between two episodes on a node, seconds.
    mean_gap_s: float
    #: Episode length bounds, seconds (uniform between them).
    length_low_s: float
    length_high_s: float
    #: Per class with episodes: (mean, sd) of the log slowdown, and the smallest factor (1.0).
    log_factor: dict[str, tuple[float, float]]

    @classmethod
    def for_family(cls, name: str | None) -> EpisodeProcess | None:
        """The family's process, or None when its runs show no episode (or the cluster has no profile)."""
        if name is None:
            return None
        fam = fitted_params()["families"].get(name)
        if fam is None or not fam.get("fraction_in_episode") or not fam.get("length_s"):
            return None
        factors = {c: (float(v["log_mean"]), float(v["log_sd"])) for c, v in fam["classes"].items() if "log_mean" in v}
        return cls(mean_gap_s=float(fam["mean_gap_s"]), length_low_s=float(fam["length_s"]["low"]),
                   length_high_s=float(fam["length_s"]["high"]), log_factor=factors)

    @property
    def fraction_in_episode(self) -> float:
        """Long-run share of a node's time spent in an episode."""
        mean_len = 0.5 * (self.length_low_s + self.length_high_s)
        return mean_len / (self.mean_gap_s + mean_len)


class _NodeTimeline:
    """One node's episodes, generated lazily in time order from the node's own random stream."""

    __slots__ = ("starts", "ends", "factors", "_rng", "_process", "_gpus", "_horizon")

    def __init__(self, process: EpisodeProcess, num_gpus: int, rng: np.random.Generator) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        #: per episode: class -> per-GPU factors (local GPU index)
        self.factors: list[dict[str, tuple[float, ...]]] = []
        self._rng, self._process, self._gpus = rng, process, num_gpus
        self._horizon = 0.0  # end of the last generated episode (or 0)

    def extend_to(self, t: float) -> None:
        """Generate episodes until one starts after ``t``."""
        p, rng = self._process, self._rng
        while not self.starts or self.starts[-1] <= t:
            start = self._horizon + float(rng.exponential(p.mean_gap_s))
            end = start + float(rng.uniform(p.length_low_s, p.length_high_s))
            draw = {c: tuple(np.maximum(1.0, rng.lognormal(mu, sd, self._gpus)).tolist())
                    for c, (mu, sd) in sorted(p.log_factor.items())}
            self.starts.append(start)
            self.ends.append(end)
            self.factors.append(draw)
            self._horizon = end

    def episode_at(self, t: float) -> int | None:
        """Index of the episode covering ``t`` (episodes are half-open, [start, end)), or None."""
        self.extend_to(t)
        i = bisect.bisect_right(self.starts, t) - 1
        return i if i >= 0 and t < self.ends[i] else None

    def changes(self, t0: float, t1: float) -> list[float]:
        """Times in (t0, t1) at which the node enters or leaves an episode."""
        self.extend_to(t1)
        i = max(0, bisect.bisect_right(self.starts, t0) - 1)
        out: list[float] = []
        for k in range(i, len(self.starts)):
            if self.starts[k] >= t1:
                break
            out.extend(x for x in (self.starts[k], self.ends[k]) if t0 < x < t1)
        return out


class StragglerEpisodes:
    """The episodes of one simulated cluster (see the module docstring)."""

    def __init__(self, cluster: Cluster, process: EpisodeProcess, seed: int) -> None:
        self.process = process
        self._node_of = cluster.gpu_node.tolist()
        self._local = [g - int(cluster.gpu_offset[n]) for g, n in enumerate(self._node_of)]
        self._nodes = [_NodeTimeline(process, node.num_gpus,
                                     np.random.default_rng([_SEED_SALT, int(seed) % (1 << 63), i]))
                       for i, node in enumerate(cluster.nodes)]

    @classmethod
    def for_cluster(cls, cluster: Cluster, *, seed: int, enabled: bool) -> StragglerEpisodes | None:
        """The cluster's episodes, or None when disabled or its variability family shows none."""
        if not enabled:
            return None
        process = EpisodeProcess.for_family(cluster.variability)
        return None if process is None else cls(cluster, process, seed)

    def factors(self, perf_class: str, gpus: tuple[int, ...], t: float) -> list[float] | None:
        """Each GPU's episode slowdown for a class at ``t`` (1.0 outside episodes); None when all are 1."""
        if perf_class not in self.process.log_factor:
            return None
        out: list[float] | None = None
        for pos, g in enumerate(gpus):
            node = self._nodes[self._node_of[g]]
            k = node.episode_at(t)
            if k is None:
                continue
            if out is None:
                out = [1.0] * len(gpus)
            out[pos] = node.factors[k][perf_class][self._local[g]]
        return out

    def changes(self, gpus: tuple[int, ...], t0: float, t1: float) -> list[float]:
        """Sorted times in (t0, t1) at which an episode starts or ends on a node holding one of ``gpus``."""
        nodes = sorted({self._node_of[g] for g in gpus})
        times: set[float] = set()
        for n in nodes:
            times.update(self._nodes[n].changes(t0, t1))
        return sorted(times)

    def episodes(self, node: int, until_s: float) -> list[tuple[float, float]]:
        """(start, end) of the episodes of a node that start before ``until_s`` (reports and tests)."""
        tl = self._nodes[node]
        tl.extend_to(until_s)
        return [(s, e) for s, e in zip(tl.starts, tl.ends, strict=True) if s < until_s]


__all__ = ["EpisodeProcess", "StragglerEpisodes", "fitted_params"]
