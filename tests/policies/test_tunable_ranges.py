"""Every tunable of every preset either takes a value or refuses it with one clear line naming the key.

A user can type anything after ``--set``; what they must never see is a traceback, a hang, or a value taken
silently that the model cannot work with. Refusals of numbers print the allowed range.
"""

from __future__ import annotations

import pytest

from dlsched.core import InputError
from dlsched.core.ranges import Range, fmt_value
from dlsched.policies import SCHEDULERS, build_scheduler
from dlsched.policies.registry import STAGES, _lookup
from dlsched.sim.config import RunConfig
from dlsched.sim.run import simulate

ODD_VALUES = ("abc", "nan", "inf", "-1", "0", "1e300")
#: Tiny runs for values a stage accepts: they must finish, quickly.
TINY = {"cluster": "sia-hetero-64", "trace": "synthetic:rate=6,hours=1,seed=3", "jobs": 3, "max_time_s": 7200.0}


def _cases() -> list[tuple[str, str]]:
    out = []
    for policy in sorted(SCHEDULERS):
        entry = SCHEDULERS[policy]
        for kind in STAGES:
            for f in _lookup(kind, entry.stage(kind)).tunable_fields():
                out.append((policy, f"{kind}.{f.name}"))
    return out


@pytest.mark.parametrize(("policy", "key"), _cases())
def test_every_odd_value_is_taken_or_refused_naming_the_key(policy: str, key: str) -> None:
    for raw in ODD_VALUES:  # a value that hangs the build is caught by pytest-timeout, not timed here
        try:
            build_scheduler(policy, settings={key: raw})
        except InputError as exc:
            assert exc.field is not None and exc.field.rpartition(".")[2] == key.rpartition(".")[2], (raw, str(exc))


def _ranged_fields() -> list[tuple[str, str, str, Range]]:
    out = []
    for kind, table in STAGES.items():
        for name, entry in table.items():
            for f in entry.tunable_fields():
                rng = f.metadata.get("range")
                if rng is not None:
                    out.append((kind, name, f.name, rng))
    return out


@pytest.mark.parametrize(("kind", "stage", "field", "rng"), _ranged_fields())
def test_out_of_range_numbers_are_refused_with_the_range(kind: str, stage: str, field: str, rng: Range) -> None:
    policy = next(p for p, e in sorted(SCHEDULERS.items()) if e.stage(kind) == stage) \
        if any(e.stage(kind) == stage for e in SCHEDULERS.values()) else None
    if policy is None:
        pytest.skip(f"no preset uses {kind} '{stage}'")
    below = None if rng.lo is None else (rng.lo if rng.lo_open else rng.lo - 0.5)
    outside = [x for x in (below, rng.hi * 10 + 1 if rng.hi else None) if x is not None]
    for x in outside:
        with pytest.raises(InputError) as err:
            build_scheduler(policy, settings={f"{kind}.{field}": fmt_value(float(x))})
        assert err.value.field == f"{kind}.{field}"
        assert str(rng) in str(err.value), str(err.value)


@pytest.mark.timeout(600)  # a hang guard: edge values must not make a run loop forever
def test_accepted_edge_values_run_to_the_end_in_bounded_time() -> None:
    """Values at the edge of their range (0 generations, no MILP, lowest restart penalty) still run."""
    for policy, settings in (("pollux", {"generations": "0", "population": "2"}),
                             ("sia", {"milp_max_options": "0", "restart_penalty_s": "1e-3", "time_limit_s": "1e-3"}),
                             ("tiresias", {"queue_limits_gpu_s": "1", "starvation_factor": "0"}),
                             ("pal", {"l_across": "1", "l_rack": "100", "k_min": "2", "k_max": "2"}),
                             ("gavel", {"lease_s": "1"})):
        run = simulate(RunConfig(policy=policy, settings=settings, **TINY))
        assert run.summary["jobs"] == 3, policy


@pytest.mark.parametrize(("policy", "settings", "words"), [
    ("tiresias", {"queue_limits_gpu_s": "36000,3600"}, ("strictly increasing", "36000,3600")),
    ("tiresias", {"queue_limits_gpu_s": "-5,10"}, ("(0, 1e+12]", "-5")),
    ("pal", {"k_min": "8", "k_max": "3"}, ("k_min (8) must not exceed k_max (3)",)),
    ("pal", {"l_across": "0"}, ("[1, 100]",)),
    ("gavel", {"lease_s": "1e-300"}, ("[1, 86400]",)),
    ("sia", {"tau": "1e-300"}, ("[1, 86400]",)),
    ("sia", {"reserve": "v100:0"}, ("type:count", "v100:0")),
    ("gavel", {"lp_method": "fast"}, ("lp_method", "ipm, simplex")),
    ("pollux", {"population": "1e9"}, ("[2, 1000]", "1e9")),
    ("pollux", {"batch_search": "coarse"}, ("batch_search", "adaptdl, dense", "coarse")),
    ("pollux", {"speedup_base": "median"}, ("speedup_base", "fair, fair-spread, one-gpu", "median")),
    ("pal", {"locality": "2"}, ("no tunable 'locality'",)),
])
def test_refusals_say_what_to_change(policy: str, settings: dict[str, str], words: tuple[str, ...]) -> None:
    with pytest.raises(InputError) as err:
        build_scheduler(policy, settings=settings)
    for w in words:
        assert w in str(err.value), str(err.value)
    assert err.value.field in settings


def test_tuple_defaults_print_as_set_takes_them() -> None:
    from dlsched.policies import describe_scheduler

    stage = describe_scheduler("tiresias")["stages"]["ordering"]
    assert fmt_value(stage["tunables"]["queue_limits_gpu_s"]) == "3600,36000"
    assert stage["ranges"]["queue_limits_gpu_s"] == "(0, 1e+12]"
