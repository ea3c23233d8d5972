"""GPU quotas per user and per team, with borrowing: plain data and its YAML loader.

The model follows Kueue's ClusterQueues and cohorts. Every team has a nominal quota (``gpus``): GPUs it is
guaranteed. A team that needs more may borrow the cohort's unused nominal GPUs (the cohort is every team),
at most ``borrowing_limit`` beyond its nominal quota (None: no limit of its own, only what the cohort has
unused). Users sit one level below, as Kueue's hierarchical cohorts put queues under a cohort: a user's
nominal quota is its share of its team, and beyond it the user may borrow the unused nominal GPUs of its
team's other users, up to its own ``borrowing_limit``. A user who names no team cannot borrow. Users the
file does not list get ``default_user`` each (no team); without one they are not limited per user.

Kueue's ``lendingLimit`` has no counterpart yet: a team lends all of its unused nominal quota.

The file, for example ``quotas.yaml``::

    teams:
      vision: {gpus: 16, borrowing_limit: 8}
      nlp: {gpus: 16}
    users:
      alice: {gpus: 8, team: vision}
      bob: {gpus: 8, team: nlp, borrowing_limit: 4}
    default_user: {gpus: 2}

Only the core's plain data lives here (no scheduling): the ``quota`` admission stage
(:mod:`dlsched.policies.quota`) decides with it, and the simulator and the service both hand it over in
:attr:`dlsched.core.ClusterView.quotas`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from dlsched.core.errors import InputError
from dlsched.core.reading import unreadable

#: Quotas larger than this are typos (no cluster dlsched models has a million GPUs).
MAX_QUOTA_GPUS = 1_000_000
_TOP_KEYS = ("teams", "users", "default_user")
_TEAM_KEYS = ("gpus", "borrowing_limit")
_USER_KEYS = ("gpus", "borrowing_limit", "team")


@dataclass(frozen=True, slots=True)
class QuotaEntry:
    """A nominal quota of ``gpus`` GPUs and at most ``borrowing_limit`` more borrowed (None: no limit)."""

    gpus: int
    borrowing_limit: int | None = None

    def __post_init__(self) -> None:
        _check_count(self.gpus, "gpus")
        if self.borrowing_limit is not None:
            _check_count(self.borrowing_limit, "borrowing_limit")

    @property
    def ceiling(self) -> float:
        """The most GPUs the holder may ever use: nominal plus borrowing limit (infinite without a limit)."""
        return float("inf") if self.borrowing_limit is None else float(self.gpus + self.borrowing_limit)


@dataclass(frozen=True, slots=True)
class Quotas:
    """Per-user and per-team quotas; ``team_of`` maps a user to its team (users without one are absent)."""

    users: Mapping[str, QuotaEntry] = field(default_factory=dict)
    teams: Mapping[str, QuotaEntry] = field(default_factory=dict)
    team_of: Mapping[str, str] = field(default_factory=dict)
    default_user: QuotaEntry | None = None

    def __post_init__(self) -> None:
        for user, team in self.team_of.items():
            if team not in self.teams:
                known = ", ".join(sorted(self.teams)) or "none declared"
                raise InputError(f"user '{user}' names team '{team}', which is not declared under 'teams' "
                                 f"(known: {known})", field=f"users.{user}.team")
        # read-only views: a scheduler must not be able to change the quotas it is handed
        object.__setattr__(self, "users", MappingProxyType(dict(self.users)))
        object.__setattr__(self, "teams", MappingProxyType(dict(self.teams)))
        object.__setattr__(self, "team_of", MappingProxyType(dict(self.team_of)))

    def user_entry(self, user: str) -> QuotaEntry | None:
        """The user's quota: its own, else ``default_user``; None when the user is not limited."""
        return self.users.get(user, self.default_user)

    def team(self, user: str) -> str | None:
        """The user's team, or None when it has none (undeclared users have none)."""
        return self.team_of.get(user)

    def team_members(self, team: str) -> list[str]:
        """Declared users of ``team`` (the cohort a user borrows from)."""
        return [u for u, t in self.team_of.items() if t == team]

    def cohort_gpus(self) -> int:
        """The nominal GPUs of every team together (what the cohort can lend at most)."""
        return sum(e.gpus for e in self.teams.values())


def _check_count(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected a whole number of GPUs, got {value!r}", field=name)
    if not 0 <= value <= MAX_QUOTA_GPUS:
        raise InputError(f"must be in [0, {MAX_QUOTA_GPUS}], got {value}", field=name)


def _entry(raw: object, where: str, allowed: tuple[str, ...]) -> tuple[QuotaEntry, dict[str, Any]]:
    """A quota entry from its mapping, refusing unknown keys; also the mapping (for ``team``)."""
    if not isinstance(raw, Mapping):
        raise InputError(f"expected a mapping with {', '.join(allowed)}, got {raw!r}", field=where)
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise InputError(f"unknown key (known: {', '.join(allowed)})", field=f"{where}.{unknown[0]}")
    if "gpus" not in raw:
        raise InputError("missing: every quota names its nominal GPUs", field=f"{where}.gpus")
    try:
        entry = QuotaEntry(gpus=raw["gpus"], borrowing_limit=raw.get("borrowing_limit"))
    except InputError as exc:
        message = str(exc).removeprefix(f"field '{exc.field}': ")
        raise InputError(message, field=f"{where}.{exc.field}") from None
    return entry, dict(raw)


def quotas_from_mapping(data: object) -> Quotas:
    """Validate the parsed YAML (``teams``, ``users``, ``default_user``) into :class:`Quotas`."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InputError(f"expected a mapping with {', '.join(_TOP_KEYS)}")
    unknown = sorted(str(k) for k in data if k not in _TOP_KEYS)
    if unknown:
        raise InputError(f"unknown key (known: {', '.join(_TOP_KEYS)})", field=unknown[0])
    teams: dict[str, QuotaEntry] = {}
    users: dict[str, QuotaEntry] = {}
    team_of: dict[str, str] = {}
    for section in ("teams", "users"):
        raw = data.get(section) or {}
        if not isinstance(raw, Mapping):
            raise InputError(f"expected a mapping of names to quotas, got {raw!r}", field=section)
        for name, value in raw.items():
            where = f"{section}.{name}"
            if not isinstance(name, str) or not name:
                raise InputError("names must be non-empty text", field=where)
            if section == "teams":
                teams[name], _ = _entry(value, where, _TEAM_KEYS)
                continue
            users[name], fields = _entry(value, where, _USER_KEYS)
            team = fields.get("team")
            if team is not None:
                if not isinstance(team, str) or not team:
                    raise InputError(f"expected a team name, got {team!r}", field=f"{where}.team")
                team_of[name] = team
    default = None
    if data.get("default_user") is not None:
        default, _ = _entry(data["default_user"], "default_user", _TEAM_KEYS)
    return Quotas(users=users, teams=teams, team_of=team_of, default_user=default)


def load_quotas(path: str | Path) -> Quotas:
    """Read a quota file; any problem is one :class:`InputError` naming the file and the field."""
    p = Path(path).expanduser()
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(unreadable(exc, "quota file"), source=str(p)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        raise InputError(f"not YAML: {getattr(exc, 'problem', None) or exc}", source=str(p), line=line) from None
    try:
        return quotas_from_mapping(data)
    except InputError as exc:
        message = str(exc).removeprefix(f"field '{exc.field}': ") if exc.field else str(exc)
        raise InputError(message, source=str(p), field=exc.field) from None
