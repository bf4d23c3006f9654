"""perflab: a performance-regression lab for systems software."""

# One place for the version (pyproject.toml reads it from here): importlib.metadata
# would cost every command about 80 ms of start-up.
__version__ = "0.1.0"
