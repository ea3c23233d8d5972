"""dlsched: schedule deep-learning training jobs on shared, heterogeneous GPU clusters."""

__version__ = "0.1.0"
