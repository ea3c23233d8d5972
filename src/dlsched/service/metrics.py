"""``/metrics``: the service in Prometheus's text format, for an operator's scraper and alerts.

The numbers are read from the store at scrape time by a custom collector (nothing is counted twice, and a
restarted service reports what its database holds, not zero), as aggregates the database computes (a
scrape reads no job's row, however many jobs there ever were): jobs by status, GPUs allocated per type and
in all, the last round's wall time and the policy's (solver's) share of it, the queue length, restarts
summed over every job, and the number of rounds. The route needs no token, like ``/healthz``: it names
no job and no user.

======================================  =======  ===============================================
metric                                  type     meaning
======================================  =======  ===============================================
``dlsched_jobs{status}``                gauge    jobs in each status (every status, 0 included)
``dlsched_gpus_allocated{gpu_type}``    gauge    GPUs held after the last round, per type
``dlsched_gpus_allocated_total``        gauge    GPUs held after the last round
``dlsched_gpus``                        gauge    GPUs in the cluster at the last round
``dlsched_queue_length``                gauge    jobs without GPUs after the last round
``dlsched_round_seconds``               gauge    the last round's wall time (decision to commit)
``dlsched_policy_seconds``              gauge    the policy's (solver's) time in the last round
``dlsched_rounds_total``                counter  rounds run
``dlsched_job_restarts_total``          counter  restarts of every job, finished ones included
======================================  =======  ===============================================
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dlsched.service.records import STATUSES
from dlsched.service.store import Store

_TYPE_PREFIX = "gpus_"


class StoreCollector(Collector):
    """Reads the service's numbers from its store on every scrape."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        counts, restarts = self.store.job_totals()
        by_status = GaugeMetricFamily("dlsched_jobs", "Jobs in each status.", labels=["status"])
        for name in STATUSES:
            by_status.add_metric([name], counts.get(name, 0))
        yield by_status
        yield CounterMetricFamily("dlsched_job_restarts", "Restarts of every job, finished ones included.",
                                  value=restarts)
        last = self.store.recent_rounds(1)
        summary = last[0]["summary"] if last else {}
        per_type = GaugeMetricFamily("dlsched_gpus_allocated", "GPUs held after the last round, per GPU type.",
                                     labels=["gpu_type"])
        for key, value in sorted(summary.items()):
            if key.startswith(_TYPE_PREFIX):
                per_type.add_metric([key[len(_TYPE_PREFIX):]], float(value))
        yield per_type
        for name, key, text in (
                ("dlsched_gpus_allocated_total", "allocated_gpus", "GPUs held after the last round."),
                ("dlsched_gpus", "gpus", "GPUs in the cluster at the last round."),
                ("dlsched_queue_length", "queued", "Jobs without GPUs after the last round."),
                ("dlsched_round_seconds", "round_s", "The last round's wall time, decision to commit."),
                ("dlsched_policy_seconds", "policy_s", "The policy's (solver's) time in the last round.")):
            yield GaugeMetricFamily(name, text, value=float(summary.get(key, 0.0) or 0.0))
        last_no = self.store.last_round_no()
        yield CounterMetricFamily("dlsched_rounds", "Rounds run.", value=0 if last_no is None else last_no + 1)


def metrics_registry(store: Store) -> CollectorRegistry:
    """A registry of its own (not the process-wide default), so several services in one process, as in
    tests, never mix their numbers."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store))
    return registry


def add_metrics(app: FastAPI, store: Store) -> None:
    """Serve ``/metrics`` on ``app``."""
    registry = metrics_registry(store)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
