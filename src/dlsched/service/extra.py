"""The ``service`` extra: the service and its client need packages the simulator does without.

Checking them in one place lets every service command refuse with the same one line that names the extra,
instead of an ImportError traceback from deep inside a module.
"""

from __future__ import annotations

import importlib.util

from dlsched.core import InputError

#: Import names of the packages the ``service`` extra installs that the service's code imports.
SERVICE_MODULES = ("fastapi", "uvicorn", "sqlalchemy", "alembic", "httpx")
#: What the client commands alone need.
CLIENT_MODULES = ("httpx",)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module blocked in sys.modules has no spec
        return False


def require(modules: tuple[str, ...] = SERVICE_MODULES) -> None:
    """Raise InputError naming the extra when any of ``modules`` cannot be imported."""
    missing = [m for m in modules if not _importable(m)]
    if missing:
        raise InputError(f"this command needs the 'service' extra ({', '.join(missing)} missing): "
                         "pip install 'dlsched[service]'")
