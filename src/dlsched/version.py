"""The package's version, in a module that imports nothing, so any part of dlsched can name it without
importing the package's public API (which would close a circle of imports)."""

__version__ = "0.1.0"
