"""Shared test helpers: small clusters, traces and a data-directory guard."""

from __future__ import annotations

import numpy as np
import pytest

from dlsched.core import KNOWN_GPU_TYPES, Adaptivity, JobSpec, make_cluster
from dlsched.datadir import target_dir

#: The data directory (``$DLSCHED_DATA``, else the user data directory ``dlsched data fetch`` fills).
DATA = target_dir()


def needs_data(*parts: str):
    """Skip a test when the measured data it reads is absent (CI always has it)."""
    path = DATA.joinpath(*parts)
    return pytest.mark.skipif(not path.exists(), reason=f"measured data not found at {path} (set DLSCHED_DATA)")


def small_cluster(groups=(("v100", 2, 4),), name="test", variability=None):
    types = {g[0]: KNOWN_GPU_TYPES[g[0]] for g in groups}
    return make_cluster(name, groups, types, variability=variability)


def duration_job(job_id: str, submit: float, gpus: int, duration: float, model: str = "philly") -> JobSpec:
    return JobSpec(job_id=job_id, submit_time_s=submit, model=model, num_gpus=gpus, duration_s=duration,
                   adaptivity=Adaptivity.RIGID)


class Recorder:
    """Wraps a scheduler and keeps every decision with the view it answered, for invariant checks."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name
        self.log = []

    @property
    def traits(self):
        return self.inner.traits

    def attach_oracle(self, estimator) -> None:
        self.inner.attach_oracle(estimator)

    def attach_monitor(self, monitor) -> None:
        self.inner.attach_monitor(monitor)

    def describe(self) -> str:
        return self.inner.describe()

    def schedule(self, view):
        d = self.inner.schedule(view)
        self.log.append((view, d))
        return d


class StandInEstimator:
    """Base of the tests' hand-written goodput estimators: subclasses define ``estimate`` (and may define
    ``goodput_many``); the rest of the estimator contract follows from it."""

    mode = "bootstrap"

    def update(self, view) -> None:
        pass

    def estimate(self, job, gpu_type, num_nodes, num_gpus):
        raise NotImplementedError

    def goodput_many(self, job, gpu_type, shapes):
        return self.evaluate_many(job, gpu_type, shapes).goodput

    def evaluate_many(self, job, gpu_type, shapes):
        from dlsched.estimators.goodput import GoodputTable

        rows = np.asarray(shapes).reshape(-1, 2)
        ests = [self.estimate(job, gpu_type, int(n), int(k)) for n, k in rows]
        get = lambda attr: np.array([getattr(e, attr) if e is not None else 0 for e in ests], dtype=float)  # noqa: E731
        return GoodputTable(goodput=get("goodput"), batch_size=get("batch_size").astype(int),
                            throughput_sps=get("throughput_sps"), efficiency=get("efficiency"),
                            local_bsz=get("batch_size").astype(int), accum_steps=np.ones(len(rows), dtype=int))

    def unusable_types(self, job):
        return ()

    def restart_delay_s(self, job):
        return None


def with_estimator(policy: str, estimator, **settings):
    """A registered scheduler whose allocation stage asks ``estimator`` (tunables as --set strings)."""
    from dlsched.policies import build_scheduler

    sched = build_scheduler(policy, settings={k: str(v) for k, v in settings.items()})
    sched.attach_oracle(estimator)
    return sched


def assert_round_invariants(cluster, log, specs, *, exact_gangs: bool, packing: bool = False) -> None:
    """Every recorded decision: allocated jobs are active and not also being profiled, each on one GPU type,
    with exactly its request (``exact_gangs``) or an allowed count, and no GPU given beyond a full share
    (profiling GPUs count as taken, those of profiles started in an earlier round and still running too); a scheduler that packs (``packing``) may put two jobs' workers on one
    GPU, only under Gimbal's packing rules and within the GPU's memory."""
    by_id = {s.job_id: s for s in specs}
    assert log
    for view, decision in log:
        active = {j.job_id for j in view.jobs}
        share = [0.0] * cluster.num_gpus
        for job_id, alloc in decision.allocations.items():
            assert job_id in active and job_id not in decision.profiles
            gpus = alloc.placement.gpus
            if exact_gangs:
                assert len(gpus) == by_id[job_id].num_gpus  # gangs whole
            else:
                assert by_id[job_id].allows_gpu_count(len(gpus))
            assert len({cluster.gpu_type_of[g] for g in gpus}) == 1  # one GPU type per job
            for g in gpus:
                share[g] += alloc.gpu_share
        for placement in decision.profiles.values():
            for g in placement.gpus:
                share[g] += 1.0
        # a profile that outlasts its round still holds its GPUs, and the view shows them taken
        held = {g for j in view.jobs for g in j.profile_placement.gpus}
        assert all(j.profile_placement for j in view.jobs if j.profiling and not j.placement)
        assert held <= {g for g in range(cluster.num_gpus) if view.busy_gpus()[g]}
        for g in held:
            share[g] += 1.0
        if packing:
            given = {g for p in decision.profiles.values() for g in p.gpus}
            given |= {g for a in decision.allocations.values() for g in a.placement.gpus}
            assert not held & given  # no packing partner for a GPU being profiled
            _assert_packing(cluster, decision, by_id)
            continue
        assert max(share, default=0.0) <= 1.0 + 1e-9  # no GPU given twice


def _assert_packing(cluster, decision, by_id) -> None:
    """Two workers on a GPU only under the packing rules, fitting its memory; profiled GPUs exclusive."""
    from dlsched.catalog.colocation import ColocationTable
    from dlsched.core.packing import holders, packing_problem

    placements = {j: a.placement for j, a in decision.allocations.items() if a.placement}
    assert packing_problem(placements, cluster) is None
    table = ColocationTable.load()
    for g, jobs in holders(placements).items():
        assert len(jobs) <= 2
        memory = cluster.gpu_types[cluster.gpu_type_of[g]].memory_gb
        assert len(jobs) == 1 or sum(table.memory_gb(by_id[j].model) for j in jobs) <= memory
    for placement in decision.profiles.values():
        assert not set(placement.gpus) & set(holders(placements))
