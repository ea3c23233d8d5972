"""The what-if tests drive a real service with the service tests' kit (``tests/service/servicekit.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

_SERVICE = str(Path(__file__).resolve().parents[1] / "service")
if _SERVICE not in sys.path:
    sys.path.append(_SERVICE)
