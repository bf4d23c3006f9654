"""perflab: a performance-regression lab for systems software."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("perflab")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"
