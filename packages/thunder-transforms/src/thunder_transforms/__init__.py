"""thunder_transforms."""

from thunder_transforms.__about__ import __version__

__all__ = ["__version__"]
