"""The dashboard: one page design for a live ``dlsched serve`` and for a finished simulation.

Both sides build the same JSON (a *snapshot*: nodes and the jobs on their GPUs, jobs with queue rank,
priority, wait and latency ratio, the allocation timeline, usage against quota; and per job its series and
explanations) and hand it to the same page (``assets/``): the service serves it and the page polls, the
report writes it into the HTML so the file opens without a server. Nothing here imports FastAPI or the
simulator; :mod:`dlsched.service.dashboard` and :mod:`dlsched.dashboard.simulation` fill the snapshot in.
"""

from dlsched.dashboard.page import docs_html, page_html
from dlsched.dashboard.views import goodput_series, merge_timeline

__all__ = ["docs_html", "goodput_series", "merge_timeline", "page_html"]
