"""thunder_interp."""

from thunder_interp.__about__ import __version__

__all__ = ["__version__"]
