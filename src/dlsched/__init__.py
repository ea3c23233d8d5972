"""dlsched: schedule deep-learning training jobs on shared, heterogeneous GPU clusters."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``dlsched.explain(run_dir_or_result, job, round=None)``: a job's explanation records, imported on first
    use (see :mod:`dlsched.explain`)."""
    if name == "explain":
        import importlib

        return importlib.import_module("dlsched.explain")
    raise AttributeError(f"module 'dlsched' has no attribute {name!r}")
