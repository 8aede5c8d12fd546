"""thunder_executors."""

from thunder_executors.__about__ import __version__

__all__ = ["__version__"]
