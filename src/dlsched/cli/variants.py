"""``compare --variant NAME:key=value,...`` and ``--variants FILE.yaml``: each row of a comparison is a full
run specification, not only a policy name.

A paper's table often compares one scheduler with and without a component (Gimbal's coordinator) or with two
values of a tunable; written as variants these sit in one ``compare``. A variant's keys are the scheduler
(``policy``, any stage: ``ordering``, ``placement``, ``coordination`` or its alias ``coordinator``, ...), a
tunable (``set.objective=jct``), a world option (``world.locality_penalty=1.5``), a finish-time fairness
reading (``ftf.share=cluster``) or any other field of a run configuration (``round_s=360``). Whatever a
variant does not set comes from the command line's own flags, so the cluster and trace are shared.

In ``--variant`` text a comma separates keys only where a known key follows, so a value may hold commas
(``trace=synthetic:rate=20,hours=2``) as long as none of its own keys is a run field (``seed``); a variants
file has no such limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dlsched.core import InputError
from dlsched.core.reading import unreadable
from dlsched.core.suggest import did_you_mean

#: Keys a variant may set besides ``set.*``, ``world.*`` and ``ftf.*`` (read from the run configuration).
ALIASES = {"coordinator": "coordination"}
#: Fields a variant may not set: they describe the rows (label) or the whole comparison.
_NOT_PER_VARIANT = ("label", "settings", "world", "ftf", "extra_jobs")
_PREFIXES = ("set.", "world.", "ftf.")
_NAME = re.compile(r"^[A-Za-z0-9_.+@\-]+$")


@dataclass
class Variant:
    """One row of a comparison: its name, the run fields it sets and its ``--set`` pairs."""

    name: str
    fields: dict[str, str] = field(default_factory=dict)
    sets: list[str] = field(default_factory=list)
    #: Whether the name labels the row (a variant's name does; ``--policies`` rows keep the automatic label).
    names_row: bool = True


def variant_keys() -> list[str]:
    """The plain keys a variant may set (run configuration fields and aliases)."""
    from dlsched.sim.config import RunConfig

    return [*(k for k in RunConfig.model_fields if k not in _NOT_PER_VARIANT), *ALIASES]


def _add(variant: Variant, key: str, value: Any, where: str) -> None:
    key = key.strip()
    text = "" if value is None else str(value).strip()
    if isinstance(value, bool):
        text = str(value).lower()
    if key.startswith("set."):
        variant.sets.append(f"{key.removeprefix('set.')}={text}")
    elif key.startswith(("world.", "ftf.")):
        variant.sets.append(f"{key}={text}")
    elif key in variant_keys():
        variant.fields[ALIASES.get(key, key)] = text
    else:
        raise InputError(f"{where}: unknown key '{key}'{did_you_mean(key, variant_keys())} (a variant sets "
                         f"policy, a stage, set.TUNABLE, world.OPTION, ftf.KEY or a run field: "
                         f"{', '.join(variant_keys())})", field="variant")


def _name(text: str, where: str) -> str:
    name = text.strip()
    if not _NAME.match(name):
        raise InputError(f"{where}: a variant name is letters, digits and -_.+@, got {text!r}", field="variant")
    return name


def parse_variant(text: str) -> Variant:
    """``NAME:key=value,...`` into a :class:`Variant`; an InputError names the bad part."""
    name, sep, rest = text.partition(":")
    if not sep:
        raise InputError(f"--variant expects NAME:key=value,..., got {text!r}", field="variant")
    variant = Variant(_name(name, f"--variant {text!r}"))
    known = set(variant_keys())
    pairs: list[list[str]] = []
    for piece in re.split(r",(?=\s*[\w.\-]+\s*=)", rest) if rest.strip() else []:
        key, eq, value = piece.partition("=")
        key = key.strip()
        if not eq or not key:
            raise InputError(f"--variant {name}: expected key=value, got {piece!r}", field="variant")
        if pairs and pairs[-1][0] == "trace" and key not in known and not key.startswith(_PREFIXES):
            pairs[-1][1] += f",{piece}"  # a trace's own options (synthetic:rate=20,hours=2)
        else:
            pairs.append([key, value])
    for key, value in pairs:
        _add(variant, key, value, f"--variant {name}")
    return variant


def load_variants(path: str | Path) -> list[Variant]:
    """Variants from a YAML file: a mapping of name to keys (``set:``/``world:``/``ftf:`` may nest), under an
    optional top-level ``variants:``, or a list of mappings each with a ``name``."""
    p = Path(path).expanduser()
    try:
        raw = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise InputError(unreadable(exc, "variants file"), source=str(p), field="variants") from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML ({getattr(exc, 'problem', exc)})", source=str(p)) from None
    if isinstance(raw, dict) and set(raw) == {"variants"}:
        raw = raw["variants"]
    if isinstance(raw, list):
        items: list[tuple[str, Any]] = []
        for i, entry in enumerate(raw, start=1):
            if not isinstance(entry, dict) or "name" not in entry:
                raise InputError(f"variant {i}: expected a mapping with a 'name'", source=str(p), field="variants")
            items.append((str(entry["name"]), {k: v for k, v in entry.items() if k != "name"}))
    elif isinstance(raw, dict):
        items = [(str(k), v) for k, v in raw.items()]
    else:
        raise InputError("expected a mapping of variant name to its keys (or a list with names)", source=str(p),
                         field="variants")
    out = []
    for name, body in items:
        where = f"{p}: variant {name}"
        variant = Variant(_name(name, where))
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise InputError(f"{where}: expected a mapping of keys, got {type(body).__name__}", field="variants")
        for key, value in body.items():
            if key in ("set", "world", "ftf") and isinstance(value, dict):
                for sub, v in value.items():
                    _add(variant, f"{key}.{sub}", v, where)
            else:
                _add(variant, str(key), value, where)
        out.append(variant)
    return out


def check_names(variants: list[Variant]) -> None:
    """Refuse two rows with one name: their results could not be told apart."""
    names = [v.name for v in variants]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        from_policies = all(not v.names_row for v in variants if v.name in repeated)
        if from_policies:
            raise InputError(f"names {', '.join(repeated)} more than once; list each run once (for repeats "
                             f"with other seeds use --seeds)", field="policies")
        raise InputError(f"variant names {', '.join(repeated)} more than once; give each row its own name",
                         field="variant")
