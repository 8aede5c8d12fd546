"""thunder_transforms: pure Trace -> Trace passes. Each returns a new trace recording that it ran.

``autodiff`` registers the grad rules (at import) and splits a trace into forward and backward
traces wired to ``torch.autograd`` (``autodiff.make_differentiable``)."""

from thunder_transforms import autodiff
from thunder_transforms.__about__ import __version__
from thunder_transforms.autocast import autocast
from thunder_transforms.checkpoint import checkpoint
from thunder_transforms.constant_fold import constant_fold
from thunder_transforms.cse import cse
from thunder_transforms.dce import dce
from thunder_transforms.passes import run_pass, substitute, substitute_proxies
from thunder_transforms.rewrites import recognize_composites, sign_flipped_rotary

__all__ = [
    "__version__",
    "autocast",
    "autodiff",
    "checkpoint",
    "constant_fold",
    "cse",
    "dce",
    "recognize_composites",
    "run_pass",
    "sign_flipped_rotary",
    "substitute",
    "substitute_proxies",
]
