"""How the service tests bound response times on a shared two-core host.

A request the service blocks on (a planted FIFO, a 1 GiB log read whole, a body parsed before the token is
known) takes seconds every time, or runs into the client's timeout. A lone answer a little over the second,
on a host whose other test worker holds the second core, is the host, not the service. So of a series of
answers at most one in fifty (one, in a series shorter than that) may take ``typical_s`` or more, and none
may take ``worst_s``.
"""

from __future__ import annotations


def assert_prompt(samples: list[float], what: str, *, typical_s: float = 1.0, worst_s: float = 3.0) -> None:
    """Fail naming ``what`` when the answers timed in ``samples`` (seconds) were not prompt (see above)."""
    assert samples, f"{what}: nothing was timed"
    ordered = sorted(samples)
    allowed_late = max(1, len(ordered) // 50)
    late = [s for s in ordered if s >= typical_s]
    assert len(late) <= allowed_late and ordered[-1] < worst_s, (
        f"{what}: {len(late)} of {len(ordered)} answers took {typical_s:g} s or more (at most {allowed_late} "
        f"may), the slowest {ordered[-1]:.2f} s (bound {worst_s:g} s)")
