"""thunder_transforms: pure Trace -> Trace passes. Each returns a new trace recording that it ran."""

from thunder_transforms.__about__ import __version__
from thunder_transforms.cse import cse
from thunder_transforms.dce import dce
from thunder_transforms.passes import run_pass, substitute_proxies

__all__ = ["__version__", "cse", "dce", "run_pass", "substitute_proxies"]
