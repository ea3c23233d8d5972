"""What the Hops experiments share: the restart cost each run charged, stated in their tables' headers.

Hops replans running jobs every round and restarts them often, so what a restart costs decides much of its
average JCT; every Hops table therefore shows, per row, the checkpoint-restore delay the world charged per
restart (mean over the run's jobs; 0 where ``world.restart_delay_scale=0`` switched it off). A result file
made before the world charged restarts has no such figure and shows "-".
"""

from __future__ import annotations

from typing import Any

#: The column every Hops table adds (summary key, header, scale, format).
RESTART_METRIC = ("restart_delay_s", "restart cost (s)", 1.0, "{:.0f}")


def restart_cost(records: Any) -> dict[str, float | None]:
    """The run's mean checkpoint-restore delay per restart over its jobs (an ``extract`` for sia_common)."""
    from dlsched.world.hops import restart_delay_s

    config = records.config.world_config()
    delays = [restart_delay_s(j.model, config) for j in records.jobs]
    return {"restart_delay_s": sum(delays) / len(delays) if delays else None}
