"""Names in a configuration checked when it is built, each refusal naming the closest valid name.

A misspelt policy, stage or tunable should fail before any trace is read or any round simulated, with the
name the user most likely meant (``unknown policy 'sai' (did you mean 'sia'?)``). The registry then builds
the scheduler once, so values out of range and stage combinations that cannot work fail here as well.
"""

from __future__ import annotations

from collections.abc import Collection

from dlsched.core import InputError
from dlsched.core.suggest import did_you_mean
from dlsched.sim.config import STAGES, RunConfig


def tunable_keys(config: RunConfig) -> set[str]:
    """Every key ``settings`` may use for the stages ``config`` composes: ``key``, ``KIND.key``, ``STAGE.key``."""
    from dlsched.policies.registry import SCHEDULERS, stage_tunables

    entry = SCHEDULERS[config.policy]
    keys: set[str] = set()
    for kind in STAGES:
        name = getattr(config, kind) or entry.stage(kind)
        for key in stage_tunables(kind, name):
            keys.update((key, f"{kind}.{key}", f"{name}.{key}"))
    return keys


def check_names(config: RunConfig, bare: Collection[str] = ()) -> None:
    """Refuse an unknown policy, stage or tunable in ``config``, naming the closest valid one; then build
    the scheduler, which refuses bad values and impossible compositions.

    ``bare`` are the settings that were given as plain keywords (``dlsched.simulate(..., slack_s=60)``): one
    that is no tunable may as well be a misspelt field, so its message looks among the fields too."""
    from dlsched.plugins import load_entry_points
    from dlsched.policies.registry import SCHEDULERS, build_scheduler
    from dlsched.policies.registry import STAGES as REGISTERED

    load_entry_points()  # an installed package's stages are valid names too
    if config.policy not in SCHEDULERS:
        raise InputError(f"unknown policy '{config.policy}'{did_you_mean(config.policy, SCHEDULERS)} (see "
                         f"'dlsched policies')", field="policy")
    for kind in STAGES:
        name = getattr(config, kind)
        if name is not None and name not in REGISTERED[kind]:
            raise InputError(f"unknown {kind} '{name}'{did_you_mean(name, REGISTERED[kind])} (known: "
                             f"{', '.join(sorted(REGISTERED[kind]))})", field=kind)
    valid = tunable_keys(config)
    for key in bare:
        if key not in valid:
            raise unknown_option(key, valid)
    for key in config.settings:
        if key not in valid:
            raise InputError(f"policy '{config.policy}' has no tunable '{key}'{did_you_mean(key, valid)} (see "
                             f"'dlsched policies')", field=key)
    build_scheduler(config.policy, **config.stage_overrides, settings=dict(config.settings), seed=config.seed)


def unknown_option(key: str, tunables: set[str]) -> InputError:
    """The refusal of a keyword that is neither a RunConfig field, a world option nor a tunable."""
    from dlsched.sim.config import WorldOptions

    choices = [*RunConfig.model_fields, *WorldOptions.model_fields, *sorted(tunables)]
    return InputError(f"unknown option '{key}'{did_you_mean(key, choices)} (a RunConfig field, a world option "
                      f"or a tunable of the policy's stages)", field=key)
