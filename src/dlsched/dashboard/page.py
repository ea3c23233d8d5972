"""The dashboard's HTML: the page, its style sheet and its script in one document.

Everything is inlined (no separate static routes, no network), so the served page and the file
``dlsched report`` writes are byte-for-byte the same design; a report only adds its data.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def _asset(name: str) -> str:
    return resources.files("dlsched.dashboard").joinpath("assets", name).read_text(encoding="utf-8")


def docs_html() -> str:
    """The API reference page served at ``/docs``: it draws ``/openapi.json`` with its own inlined script and
    loads nothing from anywhere else (FastAPI's Swagger UI fetches its scripts from a CDN, which a cluster
    without internet cannot reach)."""
    return _asset("docs.html").replace("/*JS*/", _asset("docs.js"), 1)


def _script_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``</script>`` or ``<!--`` can end it early."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c").replace(
        "\u2028", "\\u2028").replace("\u2029", "\\u2029")


def page_html(data: dict[str, Any] | None = None) -> str:
    """The dashboard page; with ``data`` (``{"snapshot": ..., "jobs": {id: detail}}``) it shows that and
    never polls, without it reads the service's ``/ui/v1`` routes."""
    embedded = "" if data is None else f"window.DLSCHED_DATA = {_script_json(data)};"
    page = _asset("index.html").replace("/*CSS*/", _asset("dashboard.css"), 1).replace("/*JS*/", _asset("dashboard.js"), 1)
    return page.replace("/*DATA*/", embedded, 1)  # last: the data's text is never searched for a placeholder
