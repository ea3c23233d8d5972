"""Plain data shared by every part of dlsched; depends on nothing else in the package."""

from dlsched.core.cluster import Cluster, Node, make_cluster
from dlsched.core.decision import Allocation, Decision
from dlsched.core.errors import InputError
from dlsched.core.gpu import KNOWN_GPU_TYPES, GpuType, gpu_type
from dlsched.core.job import Adaptivity, Job, JobSpec, JobStatus
from dlsched.core.placement import Configuration, Placement
from dlsched.core.quota import QuotaEntry, Quotas, load_quotas
from dlsched.core.view import ClusterView, GradientObservation, JobView, ThroughputObservation

__all__ = [
    "Adaptivity", "Allocation", "Cluster", "ClusterView", "Configuration", "Decision", "GpuType",
    "GradientObservation", "InputError", "Job", "JobSpec", "JobStatus", "JobView", "KNOWN_GPU_TYPES", "Node",
    "Placement", "QuotaEntry", "Quotas", "ThroughputObservation", "gpu_type", "load_quotas", "make_cluster",
]
