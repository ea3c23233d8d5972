"""Job traces: read the published workloads, generate synthetic ones, and keep one canonical table.

Everything here produces :class:`~dlsched.core.JobSpec` lists sorted by submission time, each job tagged
with the input line it came from, and validates its input at the edge (``InputError`` naming file, line
and column). See ``docs/trace-format.md`` for the canonical columns and the supported formats.

Layout: :mod:`~dlsched.traces.schema` is the canonical table (columns, rows <-> jobs, reading and writing
it); :mod:`~dlsched.traces.cells` parses single cells and :mod:`~dlsched.traces.validation` holds the rules
every job obeys; :mod:`~dlsched.traces.files` does file handling; :mod:`~dlsched.traces.readers` and
:mod:`~dlsched.traces.gavel` read the foreign formats; :mod:`~dlsched.traces.resolve` turns a trace name
into jobs, with :mod:`~dlsched.traces.synthetic` and :mod:`~dlsched.traces.synergy` generating them.
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
