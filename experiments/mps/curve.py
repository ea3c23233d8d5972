"""Turn measurements of training under MPS share limits into a curve file the simulator's world reads.

``measure.py`` prints one line per measurement, ``pct=<active-thread %> solo|pair samples_per_s=<x>``; this
module parses such a log, normalises every speed by the unrestricted one (100 %, solo), fits the world's
saturating curve to the solo points (:meth:`dlsched.world.sharing.MpsCurve.fit`) and writes::

    {"gpu": "...", "model": "...", "points": [[10, 0.31], ..., [100, 1.0]], "k": 4.4,
     "pair": [[10, 0.97], ...]}

``points`` (percentage, speed relative to 100 %) is what ``--set world.mps_curve=FILE`` reads; ``pair`` keeps
the partner's speed beside the restricted worker, for comparison with ``world.mps_isolation``. Parsing and
fitting need no GPU (they are tested on CPU).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from dlsched.core.errors import InputError
from dlsched.world.sharing import MpsCurve

LINE = re.compile(r"^pct=(?P<pct>\d+(?:\.\d+)?)\s+(?P<kind>solo|pair)\s+samples_per_s=(?P<sps>[0-9.eE+-]+)\s*$")


def parse_log(text: str, source: str = "<log>") -> dict[str, dict[float, float]]:
    """``{"solo": {pct: samples/s}, "pair": {...}}`` from a measurement log; other lines are ignored, a
    malformed measurement line is an :class:`InputError` naming its line."""
    out: dict[str, dict[float, float]] = {"solo": {}, "pair": {}}
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("pct="):
            continue
        m = LINE.match(line.strip())
        if m is None:
            raise InputError(f"expected 'pct=P solo|pair samples_per_s=X', got {line.strip()!r}", source=source, line=i)
        pct, sps = float(m["pct"]), float(m["sps"])
        if not (0 < pct <= 100) or not (sps >= 0):
            raise InputError(f"percentage must be in (0, 100] and speed >= 0, got {line.strip()!r}", source=source,
                             line=i)
        out[m["kind"]][pct] = sps
    return out


def curve_file(measured: dict[str, dict[float, float]], gpu: str, model: str) -> dict:
    """The curve file's content: solo speeds relative to 100 %, the fitted ``k``, and the pair speeds."""
    solo = measured["solo"]
    if 100.0 not in solo or solo[100.0] <= 0:
        raise InputError("the log has no unrestricted (pct=100 solo) measurement to normalise by")
    base = solo[100.0]
    points = [[p, round(v / base, 4)] for p, v in sorted(solo.items())]
    if len(points) < 2:
        raise InputError("a curve needs at least two solo measurements")
    k = MpsCurve.fit([(p / 100.0, v) for p, v in points]).k
    pair = [[p, round(v / base, 4)] for p, v in sorted(measured["pair"].items())]
    return {"gpu": gpu, "model": model, "points": points, "k": round(k, 4), "pair": pair}


def write(content: dict, path: Path) -> None:
    path.write_text(json.dumps(content, indent=1) + "\n")
