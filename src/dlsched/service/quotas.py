"""The service's quotas, as the admission stage reads them: the store's per-user and per-team GPU quotas and
each user's team.

Operators set quotas with ``dlsched serve quota set`` and teams with ``dlsched serve user add --team``; the
round loop reads them every round, so a change holds from the next round without a restart. The quota
admission stage (:mod:`dlsched.policies.quota`) is the same one ``dlsched simulate --admission quota``
runs, which is how the simulator can replay a team's quotas.
"""

from __future__ import annotations

from dlsched.core.quota import QuotaEntry, Quotas
from dlsched.service.store import Store


def service_quotas(store: Store) -> Quotas | None:
    """The store's quotas (None when no quota is set: every job is admitted)."""
    records = store.quotas()
    if not records:
        return None
    teams = {q.name: QuotaEntry(q.gpus, q.borrowing_limit) for q in records if q.kind == "team"}
    users = {q.name: QuotaEntry(q.gpus, q.borrowing_limit) for q in records if q.kind == "user"}
    team_of = {u.name: u.team for u in store.users() if u.team is not None and u.team in teams}
    return Quotas(users=users, teams=teams, team_of=team_of)
