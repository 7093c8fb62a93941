"""The sporal service: FastAPI application, settings, routes and services."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("sporal")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
