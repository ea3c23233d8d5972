"""PM-First and PAL placement (PAL, SC'24, section III, Algorithms 1 and 2).

Both are placement stages: the scheduling policy (FIFO, LAS, SRTF, ...) orders the jobs and the allocation
stage cuts that queue where the summed demand first exceeds the cluster (the "cut queue": the jobs the
policy guarantees a turn this round). Placement keeps that set and re-sorts only the cut queue by
application class, most variability-sensitive first, so class A jobs pick GPUs before class B, and so on.
A job outside the cut never runs ahead of one inside it. Both policies are non-sticky: every selected job is
placed afresh each round (a job whose new GPUs equal its old ones does not restart).

* **PM-First** (Algorithm 1) gives each job the free GPUs with the best PM-scores for its class. Among GPUs
  of the same (binned) score it prefers nodes whose count of such free GPUs best matches the job's demand,
  as PAL's implementation does, which keeps small jobs on few nodes at no variability cost.
* **PAL** (Algorithm 2) weighs variability against locality with the class's L x V matrix: locality levels
  (within a node, within a rack when the cluster file names racks, across) times the PM-score bins. A job
  that one node (or rack) could hold walks the matrix from the smallest product: at a (within, V_i) entry it
  takes the best packed allocation among free GPUs scoring at most V_i, if a node has enough of them; at an
  (across, V_i) entry it takes PM-First's GPUs if enough free GPUs score at most V_i. Larger jobs use PM-First.

The policy sees per-GPU PM-scores only as offline profiling measured them (``ClusterView.gpu_scores``) and
bins them itself (:mod:`dlsched.estimators.pm_scores`), once per scores array. Everything per round is
vectorised over per-GPU and per-(bin, node) count arrays, and runs of single-GPU jobs of one class are
placed in one pass, so a round at 27,000 GPUs takes well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dlsched.core import ClusterView, Decision, Placement
from dlsched.core.decision import Allocation
from dlsched.core.ranges import ranged
from dlsched.estimators.classifier import DEFAULT_CLASS, class_rank
from dlsched.estimators.kmeans_1d import K_MAX, K_MIN
from dlsched.estimators.locality import LocalityPenalties, LvMatrix, default_rack_penalty, lv_matrix
from dlsched.estimators.pm_bins import OUTLIER_SIGMA
from dlsched.policies.pal.choice import _ACROSS, _RACK, pal_gpus, pm_first_gpus, pm_first_singles
from dlsched.policies.pal.pools import Pool, RoundPool, build_pools
from dlsched.policies.placement import keep_current_placements, start_placement
from dlsched.policies.stages import Demand, PlacementStage, Plan


def cut_queue(demands: list[Demand], capacity: int) -> list[Demand]:
    """The demands the scheduling policy guarantees this round: its order up to the first overflow."""
    cum = np.cumsum([d.num_gpus for d in demands])
    return demands[: int(np.searchsorted(cum, capacity, side="right"))]


@dataclass
class PmFirstPlacement(PlacementStage):
    """PM-First (Algorithm 1): each job of the cut queue, class A first, takes its class's best free GPUs.

    Tunables: the binning (``k_min``, ``k_max``, ``outlier_sigma``; ``binned=False`` uses the raw measured
    scores, PAL's "fine-grained" variant).
    """

    #: K-Means sweeps K over [k_min, k_max] (k_min <= k_max; binned=False turns binning off).
    k_min: int = ranged(K_MIN, 2, 64)
    k_max: int = ranged(K_MAX, 2, 64)
    #: Scores further than this many standard deviations from the mean keep their own bin (0: no outliers).
    outlier_sigma: float = ranged(OUTLIER_SIGMA, 0.0, 100.0)
    binned: bool = True
    #: Keep a running job on its GPUs when its demand is unchanged (PAL's placements are non-sticky; this
    #: serves allocations that resize jobs, such as Sia's, which would otherwise restart every round).
    sticky: bool = False
    name: str = "pm-first"
    _layout: tuple | None = field(default=None, init=False, repr=False)
    #: Counts of placements per locality level in the last round (for tests and reports).
    last_levels: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.k_min > self.k_max:
            raise ValueError(f"k_min ({self.k_min}) must not exceed k_max ({self.k_max}): K-Means sweeps "
                             f"K over [k_min, k_max]")

    # -- shared driver --------------------------------------------------------------------------------
    def _pools(self, view: ClusterView) -> dict[str, Pool]:
        scores = view.gpu_scores
        key = (id(view.cluster), None if scores is None else tuple((c, id(a)) for c, a in scores.items()))
        if self._layout is not None and self._layout[0] == key and self._layout[1] is view.cluster \
                and self._layout[2] is scores:
            return self._layout[3]
        classes = tuple(dict.fromkeys([*(scores or {}), *sorted(set(view.model_class.values())), DEFAULT_CLASS]))
        params = {"k_min": self.k_min, "k_max": self.k_max,
                  "outlier_sigma": self.outlier_sigma if self.binned else 0.0}
        if not self.binned:
            params["k_max"] = 0  # no sweep: every distinct score is its own level
        pools = build_pools(view.cluster, scores, classes, params)
        self._layout = (key, view.cluster, scores, pools)
        return pools

    def place(self, view: ClusterView, plan: Plan) -> Decision:
        pools = self._pools(view)
        free_pool, decision, demands = start_placement(view, plan)
        if self.sticky:
            demands = keep_current_placements(view, free_pool, decision, demands)
        queue = cut_queue(demands, int(free_pool.free_mask.sum()))
        specs = [d.job.spec for d in queue]
        mc = view.model_class
        by_model = {m: mc.get(m, DEFAULT_CLASS) for m in {sp.model for sp in specs}}
        classes = [by_model[sp.model] for sp in specs]
        ranks = {c: class_rank(c) for c in by_model.values()}
        for cls in ranks:
            for pool in pools.values():
                if cls not in pool.classes:  # a class the layout has not seen: bins of the default class
                    pool.classes[cls] = pool.classes[DEFAULT_CLASS]
        key = [ranks[c] for c in classes]
        order = sorted(range(len(queue)), key=key.__getitem__)
        q = [queue[k] for k in order]
        qc = [classes[k] for k in order]
        #: Demands that accept any GPU type (the common case), so runs of them need no per-job type check.
        free_type = [d.gpu_type is None and not specs[k].gpu_types for d, k in zip(q, order, strict=True)]
        rounds = {t: RoundPool(p) for t, p in pools.items()}
        if not free_pool.free_mask.all():  # reserved, pinned, kept or profiling GPUs are not ours to place on
            for pool_round in rounds.values():
                held = np.flatnonzero(~free_pool.free_mask[pool_round.pool.gpus])
                if len(held):
                    pool_round.take(held)
        levels = {"within": 0, "rack": 0, "across": 0}
        allocs = decision.allocations
        i, n = 0, len(q)
        while i < n:
            d, cls = q[i], qc[i]
            rp = self._choose_pool(rounds, d)
            if rp is None:
                i += 1
                continue
            if d.num_gpus == 1:
                # A run of single-GPU jobs of this class that accept this pool: place them in one pass.
                j = i + 1
                while j < n and q[j].num_gpus == 1 and qc[j] == cls and (free_type[j] or self._accepts(q[j], rp)):
                    j += 1
                picks = pm_first_singles(rp, cls, j - i)
                if not len(picks):
                    i += 1
                    continue
                single = rp.pool.single
                for dd, g in zip(q[i:i + len(picks)], picks.tolist(), strict=True):
                    allocs[dd.job.job_id] = single(g, dd.batch_size)
                rp.take(picks)
                levels["within"] += len(picks)
                i += len(picks)
                continue
            i += 1
            gpus, level = self._choose(view, rp, d, cls)
            if gpus is None or len(gpus) != d.num_gpus:
                continue
            rp.take(gpus)
            allocs[d.job.job_id] = Allocation(Placement.of(rp.pool.gpus[gpus].tolist()), d.batch_size)
            nodes = rp.pool.node[gpus]
            spans = bool(nodes.min() != nodes.max())
            levels["within" if not spans else ("rack" if level == _RACK else "across")] += 1
        self.last_levels = levels
        decision.info.update({f"{self.name}.{k}": float(v) for k, v in levels.items()})
        return decision

    @staticmethod
    def _accepts(d: Demand, rp: RoundPool) -> bool:
        gtype = rp.pool.gtype
        return (d.gpu_type is None or d.gpu_type == gtype) and d.job.spec.allows_gpu_type(gtype)

    def _choose_pool(self, rounds: dict[str, RoundPool], d: Demand) -> RoundPool | None:
        """The GPU type to place on: the demanded one, else the most powerful allowed type with room."""
        names = [d.gpu_type] if d.gpu_type else list(reversed(list(rounds)))
        for t in names:
            rp = rounds.get(t)
            if rp is not None and d.job.spec.allows_gpu_type(t) and rp.free_total >= d.num_gpus:
                return rp
        return None

    def _choose(self, view: ClusterView, rp: RoundPool, d: Demand, cls: str) -> tuple[np.ndarray | None, int]:
        return pm_first_gpus(rp, cls, d.num_gpus), _ACROSS


@dataclass
class PalPlacement(PmFirstPlacement):
    """PAL (Algorithm 2): PM-First's class order, with each job's L x V matrix deciding packing vs variability.

    ``l_across``: the cross-node locality penalty the matrix assumes; None uses PAL's per-(model, GPU count)
    penalties (``pal_simulation_constants.json``; 1.0 where not measured), a number applies to every job
    (PAL's Synergy runs use 1.7). ``l_rack``: the penalty of spanning nodes inside one rack, for clusters
    whose file names racks (default halfway between 1 and ``l_across``).
    """

    #: Multipliers on iteration time (spanning nodes never speeds a job up, hence >= 1).
    l_across: float | None = ranged(None, 1.0, 100.0)
    l_rack: float | None = ranged(None, 1.0, 100.0)
    name: str = "pal"
    _penalties: LocalityPenalties | None = field(default=None, init=False, repr=False)
    #: Job id -> the terms of last round's L x V choice for it (:func:`pal_gpus`'s note), for explanations.
    _notes: dict[str, dict[str, object]] = field(default_factory=dict, init=False, repr=False)

    def penalties_for(self, model: str, num_gpus: int) -> tuple[float, float, float]:
        """(within node, within rack, across) penalties of the L x V matrix for a job."""
        if self.l_across is not None:
            across = float(self.l_across)
        else:
            if self._penalties is None:
                self._penalties = LocalityPenalties.from_data()
            across = self._penalties.penalty(model, num_gpus)
        rack = self.l_rack if self.l_rack is not None else default_rack_penalty(across)
        return 1.0, float(rack), across

    def place(self, view: ClusterView, plan: Plan) -> Decision:
        self._notes = {}
        return super().place(view, plan)

    def _choose(self, view: ClusterView, rp: RoundPool, d: Demand, cls: str) -> tuple[np.ndarray | None, int]:
        note: dict[str, object] = {"class": cls}
        self._notes[d.job.job_id] = note
        return pal_gpus(rp, cls, d.num_gpus, self.penalties_for(d.job.spec.model, d.num_gpus), note)

    def facts_for(self, job_id: str) -> dict[str, object] | None:
        """The locality-versus-variability terms PAL weighed for the job last round (explanations)."""
        note = self._notes.get(job_id)
        if note is None or "level" not in note:
            return None
        names = {0: "within a node", 1: "within a rack", 2: "across nodes"}
        vals = note["bin_values"]
        pens = note["penalties"]
        assert isinstance(vals, list) and isinstance(pens, list)
        level, b = int(note["level"]), int(note["bin"])  # type: ignore[call-overload]
        node_bin = note["node_bin"]
        packed = (f"packing within a node needs PM-score bin {node_bin} (variability {vals[node_bin]:.3g})"
                  if isinstance(node_bin, int) else "no node has enough free GPUs")
        why = (f"PAL took {names.get(level, 'across nodes')} at PM-score bin {b} (locality {pens[min(level, len(pens) - 1)]:.3g}"
               f" x variability {vals[b]:.3g} = {note['product']:.3g}); {packed}, across nodes bin "
               f"{note['across_bin']} (penalty {pens[-1]:.3g})")
        return {**note, "why": why}

    def matrix(self, view: ClusterView, model: str, num_gpus: int) -> LvMatrix:
        """The L x V matrix this policy would use for a job of ``model`` on ``num_gpus`` GPUs (for reports)."""
        pools = self._pools(view)
        pool = next(iter(pools.values()))
        cls = view.model_class.get(model, DEFAULT_CLASS)
        cb = pool.classes.get(cls, pool.classes[DEFAULT_CLASS])
        _, rack, across = self.penalties_for(model, num_gpus)
        return lv_matrix(cb.vals, across, l_rack=rack, racks=pool.has_racks)
