"""``GET /v1/admin/history``: what ``dlsched trace export``, ``world fit`` and ``whatif --server URL`` read.

Admin-only (403 for anyone else): the history holds every user's jobs, commands and reports. It is
answered from the store's read methods, so a what-if through the API writes nothing either.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException, status

from dlsched.service.api import User
from dlsched.service.store import Store


def add_history_route(app: FastAPI, store: Store) -> None:
    from dlsched.replay.history import read_store

    @app.get("/v1/admin/history", include_in_schema=False)
    def history(user: User) -> dict[str, Any]:
        if not user.admin:
            raise HTTPException(status.HTTP_403_FORBIDDEN, "only an admin may read the service's history")
        return read_store(store).to_json()
