"""Job traces: read the published workloads, generate synthetic ones, and keep one canonical table.

Everything here produces :class:`~dlsched.core.JobSpec` lists sorted by submission time, each job tagged
with the input line it came from, and validates its input at the edge (``InputError`` naming file, line
and column). See ``docs/trace-format.md`` for the canonical columns and the supported formats.
"""

from dlsched.traces.readers import (
    FORMATS,
    detect_format,
    read_gavel_trace,
    read_pal_trace,
    read_philly_log,
    read_sia_workload,
    read_tiresias_trace,
    read_trace,
)
from dlsched.traces.resolve import NAMED_TRACES, limit_jobs, resolve_trace
from dlsched.traces.schema import COLUMNS, from_frame, read_canonical, to_frame, write_trace
from dlsched.traces.stats import trace_stats
from dlsched.traces.synthetic import synthetic

__all__ = [
    "COLUMNS", "FORMATS", "NAMED_TRACES", "detect_format", "from_frame", "limit_jobs", "read_canonical",
    "read_gavel_trace", "read_pal_trace", "read_philly_log", "read_sia_workload", "read_tiresias_trace",
    "read_trace", "resolve_trace", "synthetic", "to_frame", "trace_stats", "write_trace",
]
