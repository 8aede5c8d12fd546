"""thunder."""

from thunder.__about__ import __version__

__all__ = ["__version__"]
