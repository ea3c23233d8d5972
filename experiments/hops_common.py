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
#: The fragment count of runs made before waits were counted from the waiting queue (see :func:`queue_records`).
EARLIER_FRAGMENTS = ("fragments_profiling_excluded_per_round", "fragments/round (earlier count: profiling excluded)",
                     1.0, "{:.2f}")


def restart_cost(records: Any) -> dict[str, float | None]:
    """The run's mean checkpoint-restore delay per restart over its jobs (an ``extract`` for sia_common)."""
    from dlsched.world.hops import restart_delay_s

    config = records.config.world_config()
    delays = [restart_delay_s(j.model, config) for j in records.jobs]
    return {"restart_delay_s": sum(delays) / len(delays) if delays else None}


def queue_records(data: dict[str, Any]) -> list[dict | None]:
    """A Hops result file's runs (as ``sia_common.records_of`` gives them), with the latency ratio and the
    waiting-queue fragment count of a run made before they were counted from the waiting queue moved to
    where they belong: such a run has no ``latency_ratio_submit_max``, its ``latency_ratio_*`` counted from
    submission (now ``latency_ratio_submit_*``), and its ``fragments_waiting_per_round`` counted a job being
    profiled as not waiting but one still to be profiled as waiting (now ``fragments_profiling_excluded_per_round``,
    :data:`EARLIER_FRAGMENTS`), so both waiting-queue columns show "-" for it."""
    import sia_common as sc

    out: list[dict | None] = []
    for record in sc.records_of(data):
        summary = record["summary"] if record is not None else None
        if summary is None or "latency_ratio_submit_max" in summary:
            out.append(record)
            continue
        moved = dict(summary)
        for stat in ("max", "avg", "p99"):
            if f"latency_ratio_{stat}" in moved:
                moved[f"latency_ratio_submit_{stat}"] = moved.pop(f"latency_ratio_{stat}")
        if "fragments_waiting_per_round" in moved:
            moved[EARLIER_FRAGMENTS[0]] = moved.pop("fragments_waiting_per_round")
        out.append({**record, "summary": moved})
    return out
