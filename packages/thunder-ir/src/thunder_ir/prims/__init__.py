"""The primitive ops: every trace decomposes into these, and every executor can run them.

Meta functions validate strictly (shapes, dtypes, devices must already agree: broadcasting and
type promotion belong to the torch-language ops) and infer the outputs' metadata.
"""

from thunder_ir.prims._common import ALL_PRIMS
from thunder_ir.prims.elementwise import *  # noqa: F403
from thunder_ir.prims.factories import copy_, full, iota, normal, uniform
from thunder_ir.prims.indexing import (
    convolution,
    embedding,
    gather,
    index_put,
    index_select,
    linear,
    matmul,
    scatter_add,
    take,
)
from thunder_ir.prims.prologue import *  # noqa: F403
from thunder_ir.prims.prologue import GuardFailure
from thunder_ir.prims.reductions import amax, amin, argmax, argmin, cumprod, cumsum, prod, sum, var, var_mean
from thunder_ir.prims.shape import broadcast_in_dim, cat, flip, pad, reshape, slice_prim, squeeze, transpose, unsqueeze

__all__ = ["ALL_PRIMS", "GuardFailure", *ALL_PRIMS]  # noqa: PLE0604
globals().update({name: sym for name, sym in ALL_PRIMS.items() if name not in globals()})
