"""The world: the truth a simulator plays.

The world answers "how fast does this job progress on these exact GPUs with this batch size", and nothing
else reads it: the engine advances jobs with it, and only the engine turns it into observations a real job
would report. Policies and estimators never import this package.

Three kinds of job physics cover the traces dlsched reads:

* :class:`AdaptiveJobPhysics` for the Sia/Pollux models (``bert``, ``cifar10``, ``deepspeech2``, ``imagenet``,
  ``ncf``, ``yolov3``, ``gpt_pmp``): throughput from the fitted step-time model, statistical efficiency from
  gradient noise, work counted in statistical progress until the model's epoch target;
* :class:`IterationJobPhysics` for PAL/Blox traces, whose duration column is an iteration count and whose
  per-iteration time comes from PAL's per-model constants;
* :class:`DurationJobPhysics` for traces that give only a run time and a GPU count (Philly, Gavel, Tiresias):
  the run time holds on the reference GPU type and scales with the type's relative speed.

A workload with physics of its own (the Hops workload, :mod:`dlsched.world.hops`) subclasses
:class:`JobPhysics` in its own module and registers a builder with :func:`register_physics`; :meth:`World.physics`
tries the registered builders first. This module knows no workload by name: the dependency points from the
workload to the generic world, never back.

On top of any physics, :class:`World` applies what PAL's simulator applies: the slowest GPU of the job gates
synchronous training (per-GPU variability of the job's application class), the slowest server gates it too
(server-level speed factor), and a locality penalty when a rigid job spans nodes.

Rates are static per allocation (:meth:`World.rate`); straggler episodes (:mod:`dlsched.world.stragglers`)
change in time, so the engine asks :meth:`World.episode_pieces` how a job's rate is slowed piece by piece
within a round, and a job in an episode runs slower from the episode's start and recovers at its end.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dlsched.catalog import DEFAULT_CLASS, PalConstants
from dlsched.core import Adaptivity, Cluster, InputError, JobSpec, Placement, ThroughputObservation
from dlsched.world.calibration import calibration
from dlsched.world.config import WorldConfig
from dlsched.world.efficiency import EfficiencyModel
from dlsched.world.fitted import load_profiles
from dlsched.world.sharing import JobSharing, MpsCurve, SharingModel
from dlsched.world.sharing_worlds import SharingWorld, sharing_world
from dlsched.world.stragglers import StragglerEpisodes
from dlsched.world.throughput import ThroughputModel
from dlsched.world.variability import GpuSpeeds

__all__ = ["AdaptiveJobPhysics", "DurationJobPhysics", "IterationJobPhysics", "JobPhysics", "PhysicsBuilder",
           "Rate", "SampleJobPhysics", "World", "WorldConfig", "register_physics", "slowed"]


@dataclass(frozen=True, slots=True)
class Rate:
    """How a job runs on one allocation, held constant for the rest of a round."""

    #: Work units per second (statistical progress for adaptive jobs, reference seconds or iterations else).
    work_per_s: float
    batch_size: int | None = None
    local_bsz: int | None = None
    accum_steps: int = 1
    step_time_s: float = 0.0
    sync_time_s: float = 0.0
    #: Samples per second (throughput) and statistical efficiency, for reports.
    throughput_sps: float = 0.0
    efficiency: float = 1.0


class JobPhysics(ABC):
    """Base for the three kinds of job; see the module docstring."""

    def __init__(self, spec: JobSpec, world: World) -> None:
        self.spec = spec
        self.world = world

    #: total work in the physics' own units
    total_work: float = 1.0
    restart_delay_s: float = 0.0
    #: Paid every round the job keeps its GPUs (a fixed start-up cost of each round, no progress meanwhile).
    round_overhead_s: float = 0.0
    #: A profile's length per GPU type, start-up included, when measured (a service's); None: start-up
    #: plus ``profile_steps`` steps at each profiled batch.
    profile_s: float | None = None
    perf_class: str = DEFAULT_CLASS

    @abstractmethod
    def base_rate(self, progress: float, gpu_type: str, node_counts: tuple[int, ...],
                  batch_size: int | None) -> Rate:
        """Rate on a shape of one GPU type before per-GPU, per-server and locality effects."""

    def rate_on(self, progress: float, gpu_type: str, node_counts: tuple[int, ...], nodes: np.ndarray,
                batch_size: int | None) -> Rate:
        """Rate on exact servers (``nodes``: each GPU's node id) before per-GPU, per-server and locality
        effects; the same as :meth:`base_rate` unless the servers themselves matter to the physics."""
        return self.base_rate(progress, gpu_type, node_counts, batch_size)

    def observation_details(self, placement: Placement, rate: Rate | None = None) -> dict[str, tuple | float]:
        """Fields the job reports beside its step time on ``placement`` (a non-empty placement); none here.

        Physics whose jobs time noisy iterations also return ``step_time_s`` and ``sync_time_s`` (what was
        measured while running at ``rate``), which replace the rate's own in the report."""
        return {}

    def profiled_step(self, rate: Rate) -> tuple[int, float, float]:
        """(batch, step seconds, sync seconds) the job times when profiled at ``rate`` (a positive rate):
        one step of its own batch per work unit here."""
        return int(self.spec.batch_size or 0), 1.0 / rate.work_per_s, 0.0

    def spans_nodes_penalty(self, num_gpus: int) -> float:
        return 1.0

    @abstractmethod
    def isolated_runtime_s(self, gpu_type: str, num_gpus: float) -> float:
        """Run time alone on ``num_gpus`` GPUs of ``gpu_type`` (fractions time-slice), best shape."""

    def ideal_runtime_s(self) -> float:
        """Expected run time at the job's request on its best GPU type, with no waiting."""
        types = [t for t in self.world.cluster.type_names if self.spec.allows_gpu_type(t)]
        return min(self.isolated_runtime_s(t, self.spec.num_gpus) for t in types)

    def expected_runtime_s(self) -> float:
        """Hops's expected run time without waiting (eq. 9, the ``age`` of the latency ratio), from truth:
        over the GPU types the job accepts, weighted by their share of the cluster's GPUs, the samples over
        the per-GPU throughput (at the request) times the mean of the requirement set.

        This, not the best type's run time, is what the paper's latency ratio divides by: a job is not
        promised the fastest type, and the mean requirement stands for the counts it may get."""
        per_type = self.world.cluster.gpus_per_type
        types = [t for t in self.world.cluster.type_names if self.spec.allows_gpu_type(t) and per_type.get(t, 0)]
        reqs = self.spec.requirement_set()
        r_avg = sum(reqs) / len(reqs) if reqs else float(self.spec.num_gpus)
        total = sum(per_type[t] for t in types)
        if not types or total <= 0 or r_avg <= 0:
            return math.inf
        k = self.spec.num_gpus
        return sum(per_type[t] / total * self.isolated_runtime_s(t, k) * k / r_avg for t in types)

    def estimated_duration_s(self) -> float | None:
        """The run-time estimate a user submits with the job (what SJF and SRTF rank by).

        Duration traces carry it; for iteration traces it is the iteration count times the profiled
        iteration time; for adaptive jobs it is the nominal run time of the request on its best type. None of
        these include per-GPU variability or interference, which no user could know in advance.
        """
        return self.ideal_runtime_s()

    def progress_fraction(self, progress: float) -> float:
        return min(1.0, progress / self.total_work) if self.total_work > 0 else 1.0

    def batch_limits(self) -> tuple[int, int] | None:
        """The job's initial and largest global batch, as a real job's framework would report them, or None
        for a job with no batch structure a scheduler could see (known only by a duration or an iteration
        count); estimators then learn only a work rate per GPU type."""
        return None


class AdaptiveJobPhysics(JobPhysics):
    """A Sia/Pollux model: goodput = throughput x statistical efficiency."""

    def __init__(self, spec: JobSpec, world: World) -> None:
        super().__init__(spec, world)
        eff = world.efficiency
        self.total_work = eff.target_progress(spec.model)
        fitted = world.throughput.restart_delay_s(spec.model)
        self.restart_delay_s = world.calibration.restart_delay_s(spec.model, fitted) * world.config.restart_delay_scale
        self.round_overhead_s = world.throughput.round_overhead_s(spec.model)
        self.profile_s = world.throughput.profile_s(spec.model)
        #: Factor on every iteration's time from the world's calibration profile (1: as profiled).
        self.slowdown = world.calibration.slowdown(spec.model)
        self.perf_class = world.speeds.class_of(spec.model)

    def base_rate(self, progress, gpu_type, node_counts, batch_size):
        tm, eff, spec = self.world.throughput, self.world.efficiency, self.spec
        num_gpus = sum(node_counts)
        if spec.adaptivity is Adaptivity.ADAPTIVE and batch_size is None:
            choice = tm.best_batch(spec.model, gpu_type, node_counts, progress, eff,
                                   max_batch=eff.max_batch_size(spec.model))
        else:
            bsz = batch_size or spec.batch_size or eff.init_batch_size(spec.model)
            choice = tm.batch_choice(spec.model, gpu_type, node_counts, bsz, progress, eff)
        if choice is None:
            return Rate(0.0)
        # a calibration slowdown stretches the whole iteration, sync included (goodput / slowdown); it is the
        # same for every batch size, so the goodput-maximising batch does not change
        s = self.slowdown
        return Rate(work_per_s=choice.goodput / s, batch_size=choice.batch_size, local_bsz=choice.local_bsz,
                    accum_steps=choice.accum_steps, step_time_s=choice.step_time_s * s,
                    sync_time_s=choice.sync_time_s * s, throughput_sps=choice.throughput_sps / s,
                    efficiency=choice.efficiency if num_gpus else 1.0)

    def isolated_runtime_s(self, gpu_type, num_gpus):
        return self.world.isolated_runtime(self, gpu_type, num_gpus)

    def batch_limits(self) -> tuple[int, int] | None:
        eff = self.world.efficiency
        return eff.init_batch_size(self.spec.model), eff.max_batch_size(self.spec.model)


class SampleJobPhysics(AdaptiveJobPhysics):
    """An adaptive job whose work is a number of samples, whatever its batch (the runtime's jobs that stop
    after a number of epochs): it still picks its batch by goodput, as it would, but progresses by samples."""

    def base_rate(self, progress, gpu_type, node_counts, batch_size):
        rate = super().base_rate(progress, gpu_type, node_counts, batch_size)
        return dataclasses.replace(rate, work_per_s=rate.throughput_sps)


class IterationJobPhysics(JobPhysics):
    """A PAL/Blox job: a number of iterations at a per-model iteration time."""

    def __init__(self, spec: JobSpec, world: World) -> None:
        super().__init__(spec, world)
        pal = world.pal
        self.iter_time_s = pal.iteration_time_s(spec.model, source=spec.origin or spec.job_id)
        assert spec.iterations is not None  # World.physics picks this class for jobs given by iterations
        self.total_work = float(spec.iterations)
        self.restart_delay_s = world.config.default_restart_delay_s
        self.perf_class = pal.perf_class(spec.model)

    def base_rate(self, progress, gpu_type, node_counts, batch_size):
        return Rate(work_per_s=1.0 / self.iter_time_s, batch_size=self.spec.batch_size,
                    step_time_s=self.iter_time_s)

    def spans_nodes_penalty(self, num_gpus):
        return self.world.pal.locality_penalty(self.spec.model, num_gpus, self.world.config.locality_penalty)

    def isolated_runtime_s(self, gpu_type, num_gpus):
        share = min(1.0, num_gpus / self.spec.num_gpus) if num_gpus > 0 else 0.0
        return math.inf if share <= 0 else self.total_work * self.iter_time_s / share

    def estimated_duration_s(self) -> float | None:
        return self.total_work * self.iter_time_s


class DurationJobPhysics(JobPhysics):
    """A job known only by its run time on the requested GPUs of the reference type."""

    def __init__(self, spec: JobSpec, world: World) -> None:
        super().__init__(spec, world)
        assert spec.duration_s is not None  # World.physics picks this class for jobs given by duration
        self.total_work = float(spec.duration_s)
        self.restart_delay_s = world.config.default_restart_delay_s
        self.perf_class = world.speeds.class_of(spec.model)

    def _type_speed(self, gpu_type: str) -> float:
        tm = self.world.throughput
        return tm.relative_speed(gpu_type) / tm.relative_speed(self.spec.reference_gpu)

    def base_rate(self, progress, gpu_type, node_counts, batch_size):
        return Rate(work_per_s=self._type_speed(gpu_type), batch_size=self.spec.batch_size)

    def estimated_duration_s(self) -> float | None:
        return self.spec.duration_s

    def spans_nodes_penalty(self, num_gpus):
        return self.world.pal.locality_penalty(self.spec.model, num_gpus, self.world.config.locality_penalty)

    def isolated_runtime_s(self, gpu_type, num_gpus):
        share = min(1.0, num_gpus / self.spec.num_gpus) if num_gpus > 0 else 0.0
        return math.inf if share <= 0 else self.total_work / (self._type_speed(gpu_type) * share)


#: Builds a job's physics when the job is of the builder's workload, else returns None.
PhysicsBuilder = Callable[[JobSpec, "World"], "JobPhysics | None"]
_BUILDERS: list[PhysicsBuilder] = []


def register_physics(builder: PhysicsBuilder) -> None:
    """Let :meth:`World.physics` build a workload's own jobs (tried in registration order, before the
    generic kinds). A workload module registers its builder once, when it is imported."""
    if builder not in _BUILDERS:
        _BUILDERS.append(builder)


class World:
    """The truth for one simulated cluster: job physics plus per-GPU and per-server speeds."""

    def __init__(self, cluster: Cluster, config: WorldConfig | None = None, *, seed: int = 0,
                 data_dir: str | None = None) -> None:
        self.cluster = cluster
        self.config = config or WorldConfig()
        self.calibration = calibration(self.config.calibration)
        self.throughput = ThroughputModel.load()
        self.efficiency = EfficiencyModel.load()
        #: Models of a profiles file whose work is counted in samples.
        self.sample_models: frozenset[str] = frozenset()
        if self.config.profiles:
            fitted = load_profiles(self.config.profiles)
            self.throughput, self.efficiency = fitted.throughput, fitted.efficiency
            self.sample_models = fitted.sample_models
        # GPU types the cluster file declared (like a known type, scaled): they travel on the cluster.
        self.throughput = self.throughput.with_types(cluster.gpu_types.values())
        self.pal = PalConstants.load()
        self.speeds = GpuSpeeds.for_cluster(cluster, seed=seed, data_dir=data_dir,
                                            enabled=self.config.variability, source=self.config.gpu_speeds)
        #: Straggler episodes (None: off, or the cluster's variability family shows none).
        self.episodes = StragglerEpisodes.for_cluster(
            cluster, seed=seed, enabled=self.config.variability and self.config.episodes == "on")
        self._node_speed = cluster.node_speed
        #: The seed the world was drawn with (a runtime monitor seeds its noise from it).
        self.seed = seed
        self._sharing: SharingWorld | None = None
        if self.config.mps_curve or self.config.sharing_world != "old-gpus":
            # read a measured curve file or the generation's data now, so a bad one stops the run before it starts
            self.sharing  # noqa: B018
        #: (model, GPU type, GPUs, adaptivity, batch size, requested GPUs) -> isolated run time
        self._iso_cache: dict[tuple[str, str, int, Adaptivity, int | None, int], float] = {}
        #: Job shape -> per GPU count, the best rate per progress segment (see _iso_best_rates).
        self._iso_prefix: dict[tuple, list[list[float] | None]] = {}
        self._per_node: dict[str, int] = {}
        #: (model, GPU type, GPUs per node) -> profiled (batch, step, sync) (see _profile_steps).
        self._profiled: dict[tuple[str, str, tuple[int, ...]], list[tuple[int, float, float]]] = {}

    # -- job physics -------------------------------------------------------------------------------
    def physics(self, spec: JobSpec) -> JobPhysics:
        """Build the physics for a job, rejecting jobs the world cannot play with a clear error."""
        where = spec.origin or f"job {spec.job_id}"
        for build in _BUILDERS:
            phys = build(spec, self)
            if phys is not None:
                return phys
        if spec.iterations is not None:
            return IterationJobPhysics(spec, self)
        if spec.duration_s is not None:
            if spec.reference_gpu not in self.throughput.known_types():
                raise InputError(f"unknown reference GPU type '{spec.reference_gpu}'", source=where,
                                 field="reference_gpu")
            return DurationJobPhysics(spec, self)
        if spec.model in self.sample_models:
            return SampleJobPhysics(spec, self)
        if spec.model in self.throughput.models():
            return AdaptiveJobPhysics(spec, self)
        known = ", ".join(sorted(self.throughput.models()))
        raise InputError(f"unknown model '{spec.model}' (a job without duration or iterations must be one of "
                         f"{known})", source=where, field="model")

    @property
    def sharing(self) -> SharingModel:
        """How packed workers interfere (:mod:`dlsched.world.sharing`), loaded on first use."""
        return self.sharing_world.model

    @property
    def sharing_world(self) -> SharingWorld:
        """The GPU generation's pair speeds and MPS curves with their provenance
        (:mod:`dlsched.world.sharing_worlds`), loaded on first use."""
        if self._sharing is None:
            curve = (MpsCurve.from_file(self.config.mps_curve) if self.config.mps_curve
                     else MpsCurve(self.config.mps_curve_k))
            self._sharing = sharing_world(self.config.sharing_world, curve, curve_file=self.config.mps_curve,
                                          isolation=self.config.mps_isolation)
        return self._sharing

    def rate(self, phys: JobPhysics, progress: float, placement: Placement, batch_size: int | None = None,
             gpu_share: float = 1.0, sharing: JobSharing | None = None) -> Rate:
        """Progress rate of a job on exact GPUs: physics x slowest GPU x slowest server x locality, and when
        its workers share GPUs with other jobs or are restricted, x its packed speed (``sharing``)."""
        if not placement:
            return Rate(0.0)
        cluster = self.cluster
        gpus = placement.gpus
        gtype = cluster.gpu_type_of[gpus[0]]
        node_counts = placement.node_counts(cluster)
        nodes = cluster.gpu_node[list(gpus)]
        base = phys.rate_on(progress, gtype, node_counts, nodes, batch_size)
        slow = self.speeds.slowest(phys.perf_class, gpus)
        server = float(self._node_speed[nodes].min())
        penalty = phys.spans_nodes_penalty(len(gpus)) if len(node_counts) > 1 else 1.0
        factor = server / (slow * penalty) * gpu_share
        if sharing is not None:
            factor *= self.sharing.job_factor(phys.spec.model, sharing)
        return base if factor == 1.0 else _scaled(base, factor)

    def observation_details(self, phys: JobPhysics, placement: Placement,
                            rate: Rate | None = None) -> dict[str, tuple | float]:
        """Fields a job reports beside its step time (:class:`~dlsched.core.ThroughputObservation`), as its
        physics has them (a Hops job: its servers, time components, data-loading times and, given the
        ``rate`` it ran at, the step and sync times it measured, which replace the rate's)."""
        if not placement:
            return {}
        return phys.observation_details(placement, rate)

    def episode_slowdown(self, perf_class: str, gpus: tuple[int, ...], t: float) -> float:
        """How much slower than :meth:`rate` a job of ``perf_class`` on ``gpus`` runs at time ``t`` (>= 1).

        The gang is gated by its slowest GPU: ``max(score x episode factor) / max(score)`` over its GPUs.
        """
        ep = self.episodes
        if ep is None or not gpus:
            return 1.0
        f = ep.factors(perf_class, gpus, t)
        if f is None:
            return 1.0
        scores = self.speeds.scores(perf_class)
        base = max(float(scores[g]) for g in gpus)
        return max(float(scores[g]) * x for g, x in zip(gpus, f, strict=True)) / base

    def episode_pieces(self, perf_class: str, gpus: tuple[int, ...], t0: float,
                       t1: float) -> list[tuple[float, float, float]]:
        """``[(start, end, slowdown)]`` covering [t0, t1): the job's episode slowdown, constant on each piece."""
        ep = self.episodes
        if ep is None or not gpus or perf_class not in ep.process.log_factor:
            return [(t0, t1, 1.0)]
        bounds = [t0, *ep.changes(gpus, t0, t1), t1]
        return [(a, b, self.episode_slowdown(perf_class, gpus, a)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def profile(self, phys: JobPhysics, placement: Placement, t: float) -> tuple[float, list[ThroughputObservation]]:
        """Profile a job on each GPU-type group of ``placement`` (Sia's bootstrap profiling).

        Each group runs ``profile_steps`` steps at ``profile_batches`` local batch sizes from the smallest
        to the largest that fits memory, after a start-up as long as the job's checkpoint-restore delay.
        Groups run in parallel; the result is the longest group's time and one observation per
        (type, batch size) measured, timed on the exact GPUs (so per-GPU variability shows).
        """
        cluster, cfg = self.cluster, self.config
        groups: dict[str, list[int]] = {}
        for g in placement.gpus:
            groups.setdefault(cluster.gpu_type_of[g], []).append(g)
        duration = 0.0
        obs: list[ThroughputObservation] = []
        for gtype, gpus in groups.items():
            part = Placement.of(gpus)
            counts = part.node_counts(cluster)
            group_t = phys.restart_delay_s
            slow = self.speeds.slowest(phys.perf_class, part.gpus) * self.episode_slowdown(phys.perf_class, part.gpus, t)
            server = float(self._node_speed[cluster.gpu_node[list(part.gpus)]].min())
            factor = server / slow
            measured: list[tuple[int, float, float]] = []
            ran_at: Rate | None = None
            if isinstance(phys, AdaptiveJobPhysics) and self.throughput.supports(phys.spec.model, gtype):
                for b, step, sync in self._profile_steps(phys.spec.model, gtype, counts):
                    step, sync = step * phys.slowdown, sync * phys.slowdown
                    measured.append((b, step / factor, sync))
            else:
                rate = self.rate(phys, 0.0, part, phys.spec.batch_size)
                if rate.work_per_s > 0:
                    measured.append(phys.profiled_step(rate))
                    ran_at = rate
            group_t += cfg.profile_steps * sum(step for _, step, _ in measured)
            if phys.profile_s is not None and measured:
                group_t = phys.profile_s
            if not measured:
                # the job cannot run on this type (no kernel for it, or one replica does not fit): a real job
                # reports the failure, which the estimator records as "unusable here" (step time 0)
                obs.append(ThroughputObservation(time_s=t + group_t, gpu_type=gtype, num_nodes=len(counts),
                                                 num_gpus=len(gpus), local_bsz=0, accum_steps=1,
                                                 step_time_s=0.0, sync_time_s=0.0))
            details = self.observation_details(phys, part, ran_at)
            for b, step, sync in measured:
                fields: dict = {"step_time_s": step, "sync_time_s": sync, **details}
                obs.append(ThroughputObservation(time_s=t + group_t, gpu_type=gtype, num_nodes=len(counts),
                                                 num_gpus=len(gpus), local_bsz=b, accum_steps=1, **fields))
            duration = max(duration, group_t)
        return duration, obs

    def _profile_steps(self, model: str, gtype: str, counts: tuple[int, ...]) -> list[tuple[int, float, float]]:
        """The profiled batch sizes of a model on a GPU shape, with their step and sync times as profiled.

        A pure function of its arguments, remembered: at 25,600 GPUs about 70 jobs arrive a minute, each
        profiled on every type, mostly on the same few shapes.
        """
        key = (model, gtype, counts)
        got = self._profiled.get(key)
        if got is None:
            tm = self.throughput
            replicas = max(1, sum(counts) // tm.stages(model, gtype))
            lo = max(1, self.efficiency.init_batch_size(model) // replicas)
            hi = max(lo, tm.max_local_bsz(model, gtype))
            got = []
            for b in np.unique(np.round(np.geomspace(lo, hi, max(1, self.config.profile_batches)))).astype(int):
                step, sync = tm.step_time(model, gtype, counts, int(b), 1)
                got.append((int(b), step, sync))
            self._profiled[key] = got
        return got

    def isolated_runtime(self, phys: AdaptiveJobPhysics, gpu_type: str, num_gpus: float) -> float:
        """Run time of an adaptive job alone on ``num_gpus`` GPUs of a type, best node shape and batch.

        Efficiency changes over training; the isolated time integrates goodput over the job's progress in
        a few segments, which is accurate to well under a percent for the fitted efficiency curves.
        """
        whole = max(1, int(math.floor(num_gpus)))
        key = (phys.spec.model, gpu_type, whole, phys.spec.adaptivity, phys.spec.batch_size, phys.spec.num_gpus)
        if key in self._iso_cache:
            t = self._iso_cache[key]
        else:
            t = 0.0
            segments = np.linspace(0.0, phys.total_work, 9)
            best_rates = self._iso_best_rates(phys, gpu_type, whole, 0.5 * (segments[:-1] + segments[1:]))
            for lo, hi, best in zip(segments[:-1], segments[1:], best_rates, strict=True):
                t += math.inf if best <= 0 else (hi - lo) / best
            self._iso_cache[key] = t
        if phys.spec.adaptivity is Adaptivity.RIGID and num_gpus < phys.spec.num_gpus:
            return t * phys.spec.num_gpus / max(num_gpus, 1e-9)
        if num_gpus < 1:
            return t / max(num_gpus, 1e-9)
        return t

    def _iso_best_rates(self, phys: AdaptiveJobPhysics, gpu_type: str, whole: int,
                        mids: np.ndarray) -> list[float]:
        """Per progress segment, the best rate alone on at most ``whole`` GPUs of the type (any allowed count).

        The best over counts ``1..whole`` is a running maximum, so it is kept per job shape and extended from
        the largest count asked so far: a 100k-job run asks for hundreds of fair shares (each job's own
        contention), which would otherwise each rescan every count from one. The maxima are taken in the
        same order as a scan from one, so the result is the scan's, bit for bit.
        """
        spec = phys.spec
        if spec.adaptivity is Adaptivity.RIGID:
            return [max(0.0, self._iso_rate(phys, gpu_type, spec.num_gpus, mid)) for mid in mids]
        shape = (spec.model, gpu_type, spec.adaptivity, spec.batch_size, spec.num_gpus, spec.gpu_counts,
                 spec.lower_gpus, spec.upper_gpus, spec.gpu_unit, type(phys), phys.total_work, phys.slowdown)
        prefix = self._iso_prefix.setdefault(shape, [None])  # prefix[w]: maxima over allowed counts <= w
        while len(prefix) <= whole:
            k = len(prefix)
            last = prefix[-1]
            if spec.allows_gpu_count(k):
                base = [0.0] * len(mids) if last is None else last
                prefix.append([max(b, self._iso_rate(phys, gpu_type, k, mid)) for b, mid in zip(base, mids, strict=True)])
            else:
                prefix.append(last)
        got = prefix[whole]
        if got is None:  # no allowed count up to ``whole``: the job's smallest gang
            return [max(0.0, self._iso_rate(phys, gpu_type, spec.lower_gpus, mid)) for mid in mids]
        return got

    def _iso_rate(self, phys: AdaptiveJobPhysics, gpu_type: str, k: int, progress: float) -> float:
        """The job's rate alone on ``k`` GPUs of the type, packed onto the fewest nodes."""
        per_node = self._per_node.get(gpu_type)
        if per_node is None:
            per_node = self._per_node[gpu_type] = max(
                (n.num_gpus for n in self.cluster.nodes if n.gpu_type == gpu_type), default=1)
        return phys.base_rate(progress, gpu_type, _packed_counts(k, per_node), None).work_per_s


def _scaled(base: Rate, factor: float) -> Rate:
    """``base`` with its speed multiplied by ``factor`` (step time divided; synchronisation unchanged)."""
    return Rate(work_per_s=base.work_per_s * factor, batch_size=base.batch_size, local_bsz=base.local_bsz,
                accum_steps=base.accum_steps, step_time_s=base.step_time_s / factor if factor else 0.0,
                sync_time_s=base.sync_time_s, throughput_sps=base.throughput_sps * factor,
                efficiency=base.efficiency)


def slowed(rate: Rate, slowdown: float) -> Rate:
    """A rate ``slowdown`` times slower (a straggler episode), as the job then reports it."""
    return _scaled(rate, 1.0 / slowdown)


def _packed_counts(k: int, per_node: int) -> tuple[int, ...]:
    full, rest = divmod(k, per_node)
    return tuple([per_node] * full + ([rest] if rest else []))
