"""Tags on symbols: facts about an op that passes and executors key on."""

from __future__ import annotations

import enum

__all__ = ["OpTag"]


class OpTag(enum.Enum):
    """What an op does, beyond its meta function."""

    # Members are singletons compared by identity: hashed by identity too, in C (``Enum`` hashes
    # the member's name in Python), as passes test ``tag in sym.tags`` for every bound symbol.
    __hash__ = object.__hash__

    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    SHAPE_OP = "shape_op"
    MATMUL = "matmul"
    IN_PLACE = "in_place"  # mutates an input (copy_ and the in-place variants built on it)
    VIEW = "view"  # the output always aliases an input
    MAY_RETURN_VIEW = "may_return_view"  # the output aliases an input for some inputs (reshape)
    # Which elements of the input the output holds, or whether it shares their memory, depends on
    # the input's strides and not only on its values: reshape, flatten and contiguous return a
    # view or a copy by strides, as_strided reads memory. The IR cannot replay such an op on
    # values alone (see thunder_transforms.functionalize).
    STRIDE_DEPENDENT = "stride_dependent"
    # Raises for some memory layouts of its input (``view`` of a tensor whose strides do not allow
    # it, ``as_strided`` past the end of the storage): dead code elimination keeps it, unused,
    # where it reads the caller's memory, so that the call raises as eager torch does.
    LAYOUT_ERRORS = "layout_errors"
    # Its kernel checks the values of its tensor inputs and raises (an index out of range, a
    # matrix not positive-definite or singular): dead code elimination keeps it unused, and a
    # handler of the program around it may catch that error at run time
    # (``thunder_ir.symbol.raises_on_values``; torch callables no op mirrors are named in
    # ``thunder_ir.ops.fallback.checks_values``).
    VALUE_ERRORS = "value_errors"
    RANDOM = "random"  # consumes RNG state; never CSE'd or constant-folded
    DONT_DCE = "dont_dce"  # has effects beyond its outputs
    PROLOGUE = "prologue"  # unpacks or checks inputs in a prologue trace
    FACTORY = "factory"  # creates a tensor from nothing but numbers
    RETURN = "return"
    DELETE = "delete"  # frees the names of its arguments: printed as a ``del`` statement
    # A composite whose subsymbols are an activation-checkpointed region: autodiff saves none of
    # the region's intermediates, the backward recomputes them from the region's inputs.
    CHECKPOINT = "checkpoint"
    # A composite that autodiff recomputes in the backward from its inputs rather than saving
    # its output (a sharded parameter gathered for use: FSDP ZeRO-3 frees it after the forward).
    RECOMPUTE = "recompute"
    # A torch callable no op mirrors, run by torch (``thunder_ir.ops.fallback``).
    TORCH_FALLBACK = "torch_fallback"
    # Writes its first argument into its second and returns it (``prims.copy_``, the write every
    # ``IN_PLACE`` op is built on). Recorded in a no-grad region, the value written carries no
    # gradient history, as a write under ``torch.no_grad()`` in eager.
    WRITE = "write"
    # Its output carries no gradient from (some of) its inputs in any grad mode, and its meta
    # sets the output's ``requires_grad`` itself (``prims.stop_gradient``,
    # ``prims.written_without_grad``): recorded as the meta says in no-grad regions, and a
    # decomposition holding one stops gradients where the torch callable it mirrors may not.
    STOPS_GRADIENT = "stops_gradient"
    # Takes functions as sub-traces (``thunder_ir.higher_order``: cond, while_loop, map, scan...):
    # printed with each function as a local ``def`` before the call; passes that look inside
    # functions map over them (``map_subtraces``).
    HIGHER_ORDER = "higher_order"
    # Reads tensor data while the program is traced (``prims.item``, ``nonzero``, ``tolist``, the
    # sized fallback): a pass that records the trace again keeps its outputs, values read on the
    # call's tensors, instead of calling its meta (``symbol.call_again``).
    READS_DATA = "reads_data"
