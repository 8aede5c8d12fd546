"""Shape and view torch-language ops.

Views (``OpTag.VIEW``) always alias their input in torch; ``OpTag.MAY_RETURN_VIEW`` ops (reshape,
flatten, contiguous) alias it for some inputs, by its strides (``OpTag.STRIDE_DEPENDENT``). In
the IR every op is functional: the tags are what alias analysis (``thunder_ir.aliasing``) and
in-place functionalization look at. An op that returns its input unchanged records
``prims.shallow_copy`` so that its output is a fresh proxy. ``as_strided`` reads memory, not
values: it has no decomposition and always runs as ``torch.as_strided``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.ops._helpers import broadcast_shapes, to_dtype, to_shape
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise import check_number_fits
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.sizes import same_size
from thunder_ir.tags import OpTag
from thunder_ir.utils import canonicalize_dim, check, promote_types

_VIEW = (OpTag.SHAPE_OP, OpTag.VIEW)
_MAY_VIEW = (OpTag.SHAPE_OP, OpTag.MAY_RETURN_VIEW, OpTag.STRIDE_DEPENDENT)
_SHAPE = (OpTag.SHAPE_OP,)


def check_tensor_arg(a: Any, op: str, what: str = "input") -> TensorProxy:
    check(
        isinstance(a, TensorProxy),
        lambda: f"{op}(): argument '{what}' must be Tensor, not {type(a).__name__}",
        TypeError,
    )
    return a  # type: ignore[no-any-return]


def is_int(x: Any) -> bool:
    return (isinstance(x, int) and not isinstance(x, bool)) or (
        isinstance(x, NumberProxy) and x.python_type is int
    )


def zero_of(dtype: dtypes.DType) -> Any:
    """The Python zero of a dtype's kind (False, 0, 0.0, 0j)."""
    return dtypes.python_type_of(dtype)(0)


def shape_str(shape: Sequence[Any]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def infer_shape(a: TensorProxy, shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """Resolves one ``-1`` in a requested shape, with torch's message on a mismatch."""
    numel = a.numel()
    unknown = [i for i, s in enumerate(shape) if isinstance(s, int) and s == -1]
    check(len(unknown) <= 1, "only one dimension can be inferred")
    for s in shape:
        check(not isinstance(s, int) or s >= -1, lambda: f"invalid shape dimension {s}")
    if not unknown:
        known_total: Any = 1
        for s in shape:
            known_total = known_total * s
        # With symbolic sizes, the program relies on the sizes matching (a constraint).
        check(
            same_size(known_total, numel) or bool(known_total == numel),
            lambda: f"shape '{list(shape)}' is invalid for input of size {numel}",
        )
        return shape
    known: Any = 1
    for s in shape:
        if not (isinstance(s, int) and s == -1):
            known = known * s
    check(known != 0, lambda: f"shape '{list(shape)}' is invalid for input of size {numel}")
    check(
        bool(numel % known == 0),
        lambda: f"shape '{list(shape)}' is invalid for input of size {numel}",
    )
    out = list(shape)
    out[unknown[0]] = numel // known
    return tuple(out)


def index_arg(x: Any) -> Any:
    """An int argument as torch reads it: a 0-d integer tensor is its value (``__index__``, a
    read of tensor data), anything else is left to the op's own checks."""
    if isinstance(x, TensorProxy) and x.ndim == 0 and x.dtype.is_exact and not x.dtype.is_boolean:
        from thunder_ir.known_numbers import index_value

        return index_value(x)
    return x


def sizes_arg(args: tuple[Any, ...], kwargs: dict[str, Any], key: str, op: str) -> tuple[Any, ...]:
    """Sizes given as varargs (``view(2, 3)``), one sequence (``view((2, 3))``) or by keyword;
    0-d integer tensors among them are read as ints (``index_arg``)."""
    if kwargs:
        check(
            set(kwargs) == {key} and not args,
            lambda: f"{op}() got unexpected arguments {sorted(kwargs)}",
            TypeError,
        )
        args = (kwargs[key],)
    return tuple(index_arg(s) for s in to_shape(args))


def same_shape(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(
        x is y or (isinstance(x, int) and isinstance(y, int) and x == y) for x, y in zip(a, b)
    )


def _equal_shapes(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether two shapes are equal; symbolic sizes that are equal on this call are taken as
    equal, a constraint of the program (two sizes computed apart are different proxies)."""
    return len(a) == len(b) and all(same_size(x, y) or bool(x == y) for x, y in zip(a, b))


def reshape_to(a: TensorProxy, shape: Sequence[Any]) -> TensorProxy:
    """``a`` with ``shape`` (a fresh alias when it already has it)."""
    if same_shape(shape, a.shape):
        return prims.shallow_copy(a)  # type: ignore[no-any-return]
    return prims.reshape(a, tuple(shape))  # type: ignore[no-any-return]


def slice_in_dim(a: TensorProxy, dim: int, start: Any, stop: Any, step: int = 1) -> TensorProxy:
    """``a`` restricted to ``start:stop:step`` in ``dim`` (bounds already canonical)."""
    starts = [0] * a.ndim
    stops = list(a.shape)
    steps = [1] * a.ndim
    starts[dim], stops[dim], steps[dim] = start, stop, step
    return prims.slice_prim(a, starts, stops, steps)  # type: ignore[no-any-return]


def expand_to_shape(a: TensorProxy, shape: Sequence[Any]) -> TensorProxy:
    """``a`` broadcast to ``shape`` (a fresh alias when it already has it)."""
    if same_shape(shape, a.shape):
        return prims.shallow_copy(a)  # type: ignore[no-any-return]
    offset = len(shape) - a.ndim
    return prims.broadcast_in_dim(a, tuple(shape), tuple(range(offset, len(shape))))  # type: ignore[no-any-return]


# Reshaping -------------------------------------------------------------------------------------


@torchop("torch.reshape", "torch.Tensor.reshape", tags=_MAY_VIEW)
def reshape(a: Any, *shape: Any, **kwargs: Any) -> Any:
    a = check_tensor_arg(a, "reshape")
    return reshape_to(a, infer_shape(a, sizes_arg(shape, kwargs, "shape", "reshape")))


@torchop("torch.Tensor.view", tags=(*_VIEW, OpTag.LAYOUT_ERRORS))
def view(a: Any, *shape: Any, **kwargs: Any) -> Any:
    a = check_tensor_arg(a, "view")
    if (
        len(shape) == 1
        and not isinstance(shape[0], (tuple, list, int, NumberProxy))
        and type(shape[0]).__name__ != "Size"
    ):
        raise UnsupportedOptionError(
            "Tensor.view(dtype) (reinterpreting the bits as another dtype) is not supported"
        )
    return reshape_to(a, infer_shape(a, sizes_arg(shape, kwargs, "size", "view")))


@torchop("torch.Tensor.view_as", tags=(*_VIEW, OpTag.LAYOUT_ERRORS))
def view_as(a: Any, other: Any) -> Any:
    return view(a, check_tensor_arg(other, "view_as", "other").shape)


@torchop("torch.Tensor.reshape_as", tags=_MAY_VIEW)
def reshape_as(a: Any, other: Any) -> Any:
    return reshape(a, check_tensor_arg(other, "reshape_as", "other").shape)


@torchop("torch.flatten", "torch.Tensor.flatten", tags=_MAY_VIEW)
def flatten(a: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    a = check_tensor_arg(a, "flatten")
    if a.ndim == 0:
        return prims.reshape(a, (1,))
    s, e = canonicalize_dim(a.ndim, start_dim), canonicalize_dim(a.ndim, end_dim)
    check(s <= e, "flatten() has invalid args: start_dim cannot come after end_dim")
    n: Any = 1
    for d in a.shape[s : e + 1]:
        n = n * d
    return reshape_to(a, (*a.shape[:s], n, *a.shape[e + 1 :]))


@torchop("torch.ravel", "torch.Tensor.ravel", tags=_MAY_VIEW)
def ravel(a: Any) -> Any:
    a = check_tensor_arg(a, "ravel")
    return reshape_to(a, (a.numel(),))


@torchop("torch.unflatten", "torch.Tensor.unflatten", tags=_VIEW)
def unflatten(a: Any, dim: int, sizes: Sequence[Any]) -> Any:
    a = check_tensor_arg(a, "unflatten")
    d = canonicalize_dim(a.ndim, dim)
    sizes = tuple(sizes)
    check(len(sizes) > 0, "unflatten: sizes must be non-empty")
    size = a.shape[d] if a.ndim else 1
    unknown = [i for i, s in enumerate(sizes) if isinstance(s, int) and s == -1]
    check(len(unknown) <= 1, "only one dimension can be inferred")
    known: Any = 1
    for s in sizes:
        if not (isinstance(s, int) and s == -1):
            known = known * s
    if unknown:
        check(
            known != 0 and size % known == 0,
            lambda: (
                f"unflatten: Provided sizes {shape_str(sizes)} don't multiply up to the size of dim {dim} ({size}) in the input tensor"
            ),
        )
        sizes = tuple(size // known if i == unknown[0] else s for i, s in enumerate(sizes))
    else:
        check(
            known == size,
            lambda: (
                f"unflatten: Provided sizes {shape_str(sizes)} don't multiply up to the size of dim {dim} ({size}) in the input tensor"
            ),
        )
    return reshape_to(a, (*a.shape[:d], *sizes, *a.shape[d + 1 :]))


@torchop("torch.squeeze", "torch.Tensor.squeeze", tags=_VIEW)
def squeeze(a: Any, dim: int | Sequence[int] | None = None) -> Any:
    a = check_tensor_arg(a, "squeeze")
    if dim is None:
        dims = tuple(i for i, s in enumerate(a.shape) if isinstance(s, int) and s == 1)
    else:
        candidates = (dim,) if not isinstance(dim, (tuple, list)) else tuple(dim)
        canon = [canonicalize_dim(a.ndim, d) for d in candidates]
        dims = tuple(sorted({d for d in canon if a.ndim and a.shape[d] == 1}))
    if not dims:
        return prims.shallow_copy(a)
    return prims.squeeze(a, dims)


@torchop("torch.unsqueeze", "torch.Tensor.unsqueeze", tags=_VIEW)
def unsqueeze(a: Any, dim: int) -> Any:
    a = check_tensor_arg(a, "unsqueeze")
    return prims.unsqueeze(a, canonicalize_dim(a.ndim + 1, dim))


@torchop("torch.atleast_1d", tags=_VIEW)
def atleast_1d(*tensors: Any) -> Any:
    return _atleast(tensors, 1)


@torchop("torch.atleast_2d", tags=_VIEW)
def atleast_2d(*tensors: Any) -> Any:
    return _atleast(tensors, 2)


@torchop("torch.atleast_3d", tags=_VIEW)
def atleast_3d(*tensors: Any) -> Any:
    return _atleast(tensors, 3)


def _atleast_one(a: TensorProxy, n: int) -> TensorProxy:
    if a.ndim >= n:
        return prims.shallow_copy(a)  # type: ignore[no-any-return]
    if n == 3 and a.ndim == 2:
        return prims.unsqueeze(a, 2)  # type: ignore[no-any-return]
    if n == 3 and a.ndim == 1:
        return prims.reshape(a, (1, a.shape[0], 1))  # type: ignore[no-any-return]
    return prims.reshape(a, (1,) * (n - a.ndim) + tuple(a.shape))  # type: ignore[no-any-return]


def _atleast(tensors: tuple[Any, ...], n: int) -> Any:
    single = len(tensors) == 1 and isinstance(tensors[0], TensorProxy)
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)) else tensors
    if all(isinstance(t, TensorProxy) and t.ndim >= n for t in ts):
        # Torch returns the tensors themselves (``torch.atleast_1d(x) is x``).
        return ts[0] if single else tuple(ts)
    out = tuple(_atleast_one(check_tensor_arg(t, f"atleast_{n}d"), n) for t in ts)
    return out[0] if single else out


# Permuting -------------------------------------------------------------------------------------


@torchop("torch.permute", "torch.Tensor.permute", tags=_VIEW)
def permute(a: Any, *dims: Any, **kwargs: Any) -> Any:
    a = check_tensor_arg(a, "permute")
    ds = sizes_arg(dims, kwargs, "dims", "permute")
    check(
        len(ds) == a.ndim,
        lambda: (
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = {a.ndim} is not equal to len(dims) = {len(ds)}"
        ),
    )
    perm = tuple(canonicalize_dim(a.ndim, d) for d in ds)
    check(len(set(perm)) == len(perm), "permute(): duplicate dims are not allowed.")
    return prims.transpose(a, perm)


@torchop(
    "torch.transpose",
    "torch.Tensor.transpose",
    "torch.swapaxes",
    "torch.Tensor.swapaxes",
    "torch.swapdims",
    "torch.Tensor.swapdims",
    tags=_VIEW,
)
def transpose(a: Any, dim0: int, dim1: int) -> Any:
    a = check_tensor_arg(a, "transpose")
    d0, d1 = canonicalize_dim(a.ndim, dim0), canonicalize_dim(a.ndim, dim1)
    perm = list(range(a.ndim))
    if a.ndim:
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return prims.transpose(a, tuple(perm))


@torchop("torch.t", "torch.Tensor.t", tags=_VIEW)
def t(a: Any) -> Any:
    a = check_tensor_arg(a, "t")
    check(a.ndim <= 2, lambda: f"t() expects a tensor with <= 2 dimensions, but self is {a.ndim}D")
    return prims.transpose(a, tuple(reversed(range(a.ndim))))


@torchop("torch.Tensor.T", tags=_VIEW)
def T(a: Any) -> Any:
    a = check_tensor_arg(a, "T")
    return prims.transpose(a, tuple(reversed(range(a.ndim))))


@torchop("torch.Tensor.mT", tags=_VIEW)
def mT(a: Any) -> Any:
    a = check_tensor_arg(a, "mT")
    check(
        a.ndim >= 2,
        lambda: (
            f"tensor.mT is only supported on matrices or batches of matrices. Got {a.ndim}-D tensor."
        ),
    )
    return transpose(a, -2, -1)


def _adjoint_of_real(a: Any, name: str) -> None:
    if a.dtype.is_complex:  # the IR has no conjugation
        raise UnsupportedOptionError(f"Tensor.{name} of a complex tensor is not supported")


@torchop("torch.Tensor.H", tags=_VIEW)
def H(a: Any) -> Any:
    """The conjugate transpose of a matrix: its transpose, for the real dtypes the IR has."""
    a = check_tensor_arg(a, "H")
    check(
        a.ndim in (0, 2),
        lambda: (
            f"tensor.H is only supported on matrices (2-D tensors). Got {a.ndim}-D tensor."
            + (" For batches of matrices, consider using tensor.mH" if a.ndim > 2 else "")
        ),
    )
    _adjoint_of_real(a, "H")
    return prims.transpose(a, tuple(reversed(range(a.ndim))))


@torchop("torch.Tensor.mH", tags=_VIEW)
def mH(a: Any) -> Any:
    """The conjugate transpose of the last two dimensions (a 0-D tensor as it is)."""
    a = check_tensor_arg(a, "mH")
    check(
        a.ndim != 1,
        lambda: (
            f"tensor.mH is only supported on matrices or batches of matrices. Got {a.ndim}-D tensor."
        ),
    )
    _adjoint_of_real(a, "mH")
    return prims.transpose(a, ()) if a.ndim == 0 else transpose(a, -2, -1)


@torchop(
    "torch.movedim", "torch.Tensor.movedim", "torch.moveaxis", "torch.Tensor.moveaxis", tags=_VIEW
)
def movedim(a: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Any:
    a = check_tensor_arg(a, "movedim")
    src = (source,) if not isinstance(source, (tuple, list)) else tuple(source)
    dst = (destination,) if not isinstance(destination, (tuple, list)) else tuple(destination)
    check(
        len(src) == len(dst),
        lambda: (
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain the same number of dims as destination ({list(dst)} dims)"
        ),
    )
    s = [canonicalize_dim(a.ndim, d) for d in src]
    t_ = [canonicalize_dim(a.ndim, d) for d in dst]
    check(len(set(s)) == len(s), lambda: f"movedim: repeated dim in `source` ({list(src)})")
    check(len(set(t_)) == len(t_), lambda: f"movedim: repeated dim in `destination` ({list(dst)})")
    if a.ndim == 0:
        return prims.transpose(a, ())
    perm = [-1] * a.ndim
    for si, di in zip(s, t_):
        perm[di] = si
    rest = iter(d for d in range(a.ndim) if d not in s)
    perm = [p if p != -1 else next(rest) for p in perm]
    return prims.transpose(a, tuple(perm))


# Broadcasting ----------------------------------------------------------------------------------


def _expand_shape(a: TensorProxy, sizes: tuple[Any, ...]) -> tuple[Any, ...]:
    check(
        len(sizes) >= a.ndim,
        lambda: (
            f"expand(size={shape_str(sizes)}): the number of sizes provided ({len(sizes)}) must be greater or equal to the number of dimensions in the tensor ({a.ndim})"
        ),
    )
    offset = len(sizes) - a.ndim
    out = []
    for i, s in enumerate(sizes):
        if i < offset:
            check(
                not (isinstance(s, int) and s < 0),
                lambda: (
                    f"The expanded size of the tensor ({s}) isn't allowed in a leading, non-existing dimension {i}"
                ),
            )
            out.append(s)
            continue
        cur = a.shape[i - offset]
        if isinstance(s, int) and s == -1:
            out.append(cur)
        elif isinstance(cur, int) and cur == 1:
            check(
                not isinstance(s, int) or s >= 0,
                lambda: f"The expanded size of the tensor ({s}) isn't allowed",
            )
            out.append(s)
        else:
            check(
                not (isinstance(cur, int) and isinstance(s, int)) or cur == s,
                lambda: (
                    f"The expanded size of the tensor ({s}) must match the existing size ({cur}) at non-singleton dimension {i}.  Target sizes: {shape_str(sizes)}.  Tensor sizes: {shape_str(a.shape)}"
                ),
            )
            out.append(s)
    return tuple(out)


@torchop("torch.Tensor.expand", tags=_VIEW)
def expand(a: Any, *sizes: Any, implicit: bool = False, **kwargs: Any) -> Any:
    a = check_tensor_arg(a, "expand")
    return expand_to_shape(a, _expand_shape(a, sizes_arg(sizes, kwargs, "size", "expand")))


@torchop("torch.Tensor.expand_as", tags=_VIEW)
def expand_as(a: Any, other: Any) -> Any:
    return expand(a, check_tensor_arg(other, "expand_as", "other").shape)


@torchop("torch.broadcast_to", "torch.Tensor.broadcast_to", tags=_VIEW)
def broadcast_to(a: Any, *size: Any, **kwargs: Any) -> Any:
    """``torch.broadcast_to(a, size)``; the method also takes the sizes as varargs
    (``a.broadcast_to(2, 3)``)."""
    a = check_tensor_arg(a, "broadcast_to")
    return expand_to_shape(a, _expand_shape(a, sizes_arg(size, kwargs, "size", "broadcast_to")))


@torchop("torch.broadcast_tensors", tags=_VIEW)
def broadcast_tensors(*tensors: Any) -> Any:
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)) else tensors
    ts = tuple(check_tensor_arg(x, "broadcast_tensors", "tensors") for x in ts)
    shape = broadcast_shapes(*(x.shape for x in ts))
    return tuple(expand_to_shape(x, shape) for x in ts)


# Copies ------------------------------------------------------------------------------------------


@torchop("torch.Tensor.contiguous", tags=_MAY_VIEW)
def contiguous(a: Any, *, memory_format: Any = None) -> Any:
    a = check_tensor_arg(a, "contiguous")
    return prims.shallow_copy(a)


@torchop("torch.clone", "torch.Tensor.clone")
def clone(a: Any, *, memory_format: Any = None) -> Any:
    a = check_tensor_arg(a, "clone")
    return prims.clone(a)


# Joining -----------------------------------------------------------------------------------------


def _tensor_list(tensors: Any, op: str) -> list[TensorProxy]:
    check(
        isinstance(tensors, (tuple, list)),
        lambda: (
            f"{op}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}"
        ),
        TypeError,
    )
    return [check_tensor_arg(x, op, "tensors") for x in tensors]


@torchop("torch.cat", "torch.concat", "torch.concatenate", tags=_SHAPE)
def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    ts = _tensor_list(tensors, "cat")
    check(len(ts) > 0, "torch.cat(): expected a non-empty list of Tensors", ValueError)
    for i, x in enumerate(ts):
        check(
            x.ndim > 0, lambda: f"zero-dimensional tensor (at position {i}) cannot be concatenated"
        )
    dtype = ts[0].dtype
    for x in ts[1:]:
        dtype = promote_types(dtype, x.dtype)
    # torch skips 1-D empty tensors (legacy behavior) when joining others.
    kept = [
        x for x in ts if not (x.ndim == 1 and isinstance(x.shape[0], int) and x.shape[0] == 0)
    ] or ts[:1]
    ref = kept[0]
    d = canonicalize_dim(ref.ndim, dim)
    for x in kept:
        check(
            x.ndim == ref.ndim,
            lambda: f"Tensors must have same number of dimensions: got {ref.ndim} and {x.ndim}",
        )
        for j in range(ref.ndim):
            if j == d:
                continue
            r, s = ref.shape[j], x.shape[j]
            check(
                not (isinstance(r, int) and isinstance(s, int)) or r == s,
                lambda: (
                    f"Sizes of tensors must match except in dimension {d}. Expected size {r} but got size {s} for tensor number {next(k for k, y in enumerate(ts) if y is x)} in the list."
                ),
            )
    # a skipped tensor that requires grad joins as an empty block (eager's graph reaches it:
    # its gradient is zeros, not None)
    if ref.ndim == 1:  # a skipped 1-D tensor is empty: it joins as it is
        kept = [x for x in ts if x.requires_grad or any(x is k for k in kept)]
    else:
        empty_shape = tuple(0 if j == d else ref.shape[j] for j in range(ref.ndim))
        kept = [
            prims.reshape(x, empty_shape)
            if x.requires_grad and not any(x is k for k in kept)
            else x
            for x in ts
            if x.requires_grad or any(x is k for k in kept)
        ]
    return prims.cat([to_dtype(x, dtype) for x in kept], d)


@torchop("torch.stack", tags=_SHAPE)
def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    ts = _tensor_list(tensors, "stack")
    check(len(ts) > 0, "stack expects a non-empty TensorList")
    for i, x in enumerate(ts):
        check(
            _equal_shapes(x.shape, ts[0].shape),
            lambda: (
                f"stack expects each tensor to be equal size, but got {shape_str(ts[0].shape)} at entry 0 and {shape_str(x.shape)} at entry {i}"
            ),
        )
    d = canonicalize_dim(ts[0].ndim + 1, dim)
    return cat([prims.unsqueeze(x, d) for x in ts], d)


@torchop("torch.hstack", tags=_SHAPE)
def hstack(tensors: Sequence[Any]) -> Any:
    ts = _atleast(tuple(_tensor_list(tensors, "hstack")), 1)
    check(len(ts) > 0, "hstack expects a non-empty TensorList")
    return cat(list(ts), 0 if ts[0].ndim == 1 else 1)


@torchop("torch.vstack", "torch.row_stack", tags=_SHAPE)
def vstack(tensors: Sequence[Any]) -> Any:
    ts = _atleast(tuple(_tensor_list(tensors, "vstack")), 2)
    check(len(ts) > 0, "vstack expects a non-empty TensorList")
    return cat(list(ts), 0)


@torchop("torch.dstack", tags=_SHAPE)
def dstack(tensors: Sequence[Any]) -> Any:
    ts = _atleast(tuple(_tensor_list(tensors, "dstack")), 3)
    check(len(ts) > 0, "dstack expects a non-empty TensorList")
    return cat(list(ts), 2)


@torchop("torch.column_stack", tags=_SHAPE)
def column_stack(tensors: Sequence[Any]) -> Any:
    ts = _tensor_list(tensors, "column_stack")
    check(len(ts) > 0, "column_stack expects a non-empty TensorList")
    cols = [prims.reshape(x, (x.numel(), 1)) if x.ndim <= 1 else x for x in ts]
    return cat(cols, 1)


# Splitting ---------------------------------------------------------------------------------------


def _dim_size(a: TensorProxy, d: int) -> Any:
    return a.shape[d] if a.ndim else 1


def _split_sizes(a: TensorProxy, d: int, split_sizes: Sequence[Any]) -> tuple[TensorProxy, ...]:
    out = []
    start: Any = 0
    src = a if a.ndim else prims.reshape(a, (1,))
    for s in split_sizes:
        out.append(slice_in_dim(src, d, start, start + s))
        start = start + s
    return tuple(out)


@torchop("torch.split_with_sizes", "torch.Tensor.split_with_sizes", tags=_VIEW)
def split_with_sizes(a: Any, split_sizes: Sequence[Any], dim: int = 0) -> Any:
    a = check_tensor_arg(a, "split_with_sizes")
    d = canonicalize_dim(a.ndim, dim)
    n = _dim_size(a, d)
    total: Any = 0
    for s in split_sizes:
        check(
            not isinstance(s, int) or s >= 0,
            lambda: (
                f"split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={list(split_sizes)}"
            ),
        )
        total = total + s
    check(
        not (isinstance(total, int) and isinstance(n, int)) or total == n,
        lambda: (
            f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension {d}), but got split_sizes={list(split_sizes)}"
        ),
    )
    return _split_sizes(a, d, split_sizes)


@torchop("torch.split", "torch.Tensor.split", tags=_VIEW)
def split(a: Any, split_size_or_sections: Any, dim: int = 0) -> Any:
    a = check_tensor_arg(a, "split")
    if isinstance(split_size_or_sections, (tuple, list)):
        return split_with_sizes(a, split_size_or_sections, dim)
    size = split_size_or_sections
    d = canonicalize_dim(a.ndim, dim)
    n = int(_dim_size(a, d))
    check(size >= 0, lambda: f"split expects split_size be non-negative, but got split_size={size}")
    if size == 0:
        check(
            n == 0,
            lambda: (
                f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}"
            ),
        )
        return (prims.shallow_copy(a),)
    pieces = max((n + size - 1) // size, 1)
    sizes = [size] * (pieces - 1) + [n - size * (pieces - 1)]
    return _split_sizes(a, d, sizes)


@torchop("torch.chunk", "torch.Tensor.chunk", tags=_VIEW)
def chunk(a: Any, chunks: int, dim: int = 0) -> Any:
    a = check_tensor_arg(a, "chunk")
    check(a.ndim > 0, "chunk expects at least a 1-dimensional tensor")
    check(chunks > 0, lambda: f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = canonicalize_dim(a.ndim, dim)
    n = int(a.shape[d])
    if n == 0:
        return tuple(slice_in_dim(a, d, 0, 0) for _ in range(chunks))
    return split(a, (n + chunks - 1) // chunks, d)


@torchop("torch.tensor_split", "torch.Tensor.tensor_split", tags=_VIEW)
def tensor_split(a: Any, indices_or_sections: Any, dim: int = 0) -> Any:
    a = check_tensor_arg(a, "tensor_split")
    check(
        a.ndim > 0,
        lambda: (
            f"tensor_split expected at least a 1-dimensional tensor, but got a tensor with {a.ndim} dims"
        ),
    )
    if isinstance(indices_or_sections, TensorProxy):
        raise UnsupportedOptionError(
            "tensor_split with a tensor of indices is data-dependent; pass a Python int or a list of ints"
        )
    d = canonicalize_dim(a.ndim, dim)
    n = int(a.shape[d])
    if isinstance(indices_or_sections, (tuple, list)):
        bounds = [0, *(int(i) for i in indices_or_sections), n]
        out = []
        for lo, hi in zip(bounds, bounds[1:]):
            lo = min(max(lo + n if lo < 0 else lo, 0), n)
            hi = min(max(hi + n if hi < 0 else hi, 0), n)
            out.append(slice_in_dim(a, d, lo, max(lo, hi)))
        return tuple(out)
    sections = int(indices_or_sections)
    check(sections > 0, lambda: f"number of sections must be larger than 0, got {sections}")
    base, extra = divmod(n, sections)
    return _split_sizes(a, d, [base + 1 if i < extra else base for i in range(sections)])


@torchop("torch.unbind", "torch.Tensor.unbind", tags=_VIEW)
def unbind(a: Any, dim: int = 0) -> Any:
    a = check_tensor_arg(a, "unbind")
    check(a.ndim > 0, "Dimension specified as 0 but tensor has no dimensions", IndexError)
    d = canonicalize_dim(a.ndim, dim)
    return tuple(prims.squeeze(slice_in_dim(a, d, i, i + 1), (d,)) for i in range(int(a.shape[d])))


@torchop("torch.narrow", "torch.Tensor.narrow", tags=_VIEW)
def narrow(a: Any, dim: int, start: Any, length: Any) -> Any:
    a = check_tensor_arg(a, "narrow")
    check(a.ndim > 0, "narrow() cannot be applied to a 0-dim tensor.", IndexError)
    d = canonicalize_dim(a.ndim, dim)
    n = a.shape[d]
    check(length >= 0, "narrow(): length must be non-negative.")
    if isinstance(start, TensorProxy):
        return _narrow_at(a, d, start, length)
    check(
        -n <= start <= n,
        lambda: f"start out of range (expected to be in range of [{-n}, {n}], but got {start})",
        IndexError,
    )
    if start < 0:
        start = start + n
    check(
        start + length <= n,
        lambda: f"start ({start}) + length ({length}) exceeds dimension size ({n}).",
    )
    return slice_in_dim(a, d, start, start + length)


def _narrow_at(a: TensorProxy, d: int, start: TensorProxy, length: Any) -> Any:
    """``narrow`` at a 0-dim tensor ``start``: the shape is static (``length``), the positions
    are ``arange(length) + start`` (gathered; still a view for alias analysis, by the tag). Torch
    reads ``start.item()`` and raises on an out-of-range value; a value cannot raise here, so
    ``start`` is wrapped (negative from the end) and clamped to ``[0, n - length]``."""
    check(
        start.ndim == 0 and start.dtype.kind == "int",
        "start must be an 0-dim integral Tensor.",
    )
    n = a.shape[d]
    check(
        length <= n,
        lambda: f"start + length ({length}) exceeds dimension size ({n}).",
    )
    s = to_dtype(start, dtypes.int64)
    if s.device != a.device:
        s = prims.device_put(s, a.device)
    s = prims.where(prims.lt(s, 0), prims.add(s, n), s)
    s = prims.maximum(prims.minimum(s, n - length), 0)
    positions = prims.iota(length, start=0, step=1, device=a.device, dtype=dtypes.int64)
    index = prims.add(positions, prims.broadcast_in_dim(s, (length,), ()))
    return prims.index_select(a, d, index)


@torchop("torch.select", "torch.Tensor.select", tags=_VIEW)
def select(a: Any, dim: int, index: Any) -> Any:
    a = check_tensor_arg(a, "select")
    check(a.ndim > 0, "select() cannot be applied to a 0-dim tensor.", IndexError)
    d = canonicalize_dim(a.ndim, dim)
    n = a.shape[d]
    check(
        -n <= index < n,
        lambda: (
            f"select(): index {index} out of range for tensor of size {shape_str(a.shape)} at dimension {dim}"
        ),
        IndexError,
    )
    if index < 0:
        index = index + n
    return prims.squeeze(slice_in_dim(a, d, index, index + 1), (d,))


# Reordering and repeating ----------------------------------------------------------------------


@torchop("torch.flip", "torch.Tensor.flip", tags=_SHAPE)
def flip(a: Any, *dims: Any, **kwargs: Any) -> Any:
    a = check_tensor_arg(a, "flip")
    ds = sizes_arg(dims, kwargs, "dims", "flip")
    canon = tuple(canonicalize_dim(a.ndim, d) for d in ds)
    check(
        len(set(canon)) == len(canon),
        lambda: (
            f"dims has duplicates, original flip dims size={len(canon)}, but unique flip dims size={len(set(canon))}"
        ),
    )
    if not canon or a.ndim == 0:
        return prims.clone(a)
    return prims.flip(a, canon)


@torchop("torch.fliplr", "torch.Tensor.fliplr", tags=_SHAPE)
def fliplr(a: Any) -> Any:
    a = check_tensor_arg(a, "fliplr")
    check(a.ndim >= 2, "Input must be >= 2-d.")
    return prims.flip(a, (1,))


@torchop("torch.flipud", "torch.Tensor.flipud", tags=_SHAPE)
def flipud(a: Any) -> Any:
    a = check_tensor_arg(a, "flipud")
    check(a.ndim >= 1, "Input must be >= 1-d.")
    return prims.flip(a, (0,))


@torchop("torch.roll", "torch.Tensor.roll", tags=_SHAPE)
def roll(a: Any, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Any:
    a = check_tensor_arg(a, "roll")
    sh = (shifts,) if not isinstance(shifts, (tuple, list)) else tuple(shifts)
    if dims is None or (isinstance(dims, (tuple, list)) and len(dims) == 0):
        check(len(sh) == 1, lambda: f"shifts and dimensions must align. shifts: {len(sh)}, dims:0")
        flat = prims.reshape(a, (a.numel(),))
        return prims.reshape(roll(flat, sh[0], 0), a.shape)
    ds = (dims,) if not isinstance(dims, (tuple, list)) else tuple(dims)
    check(
        len(sh) == len(ds),
        lambda: f"shifts and dimensions must align. shifts: {len(sh)}, dims:{len(ds)}",
    )
    out = a
    for s, dim in zip(sh, ds):
        d = canonicalize_dim(a.ndim, dim)
        n = int(_dim_size(a, d))
        if n == 0 or s % n == 0 or a.ndim == 0:
            continue
        s = s % n
        out = prims.cat([slice_in_dim(out, d, n - s, n), slice_in_dim(out, d, 0, n - s)], d)
    return out if out is not a else prims.clone(a)


@torchop("torch.Tensor.repeat", tags=_SHAPE)
def repeat(a: Any, *sizes: Any, **kwargs: Any) -> Any:
    a = check_tensor_arg(a, "repeat")
    reps = sizes_arg(sizes, kwargs, "repeats", "repeat")
    check(
        len(reps) >= a.ndim,
        "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
    )
    for r in reps:
        check(
            not isinstance(r, int) or r >= 0,
            lambda: f"Trying to create tensor with negative dimension {r}: {shape_str(reps)}",
        )
    shape = (1,) * (len(reps) - a.ndim) + tuple(a.shape)
    src = reshape_to(a, shape) if len(shape) != a.ndim else a
    interleaved: list[Any] = []
    for r, s in zip(reps, shape):
        interleaved += [r, s]
    b = prims.broadcast_in_dim(src, tuple(interleaved), tuple(range(1, 2 * len(shape), 2)))
    return prims.reshape(b, tuple(r * s for r, s in zip(reps, shape)))


@torchop("torch.repeat_interleave", "torch.Tensor.repeat_interleave", tags=_SHAPE)
def repeat_interleave(
    a: Any, repeats: Any = None, dim: Any = None, *, output_size: Any = None
) -> Any:
    """Each element repeated ``repeats`` times along ``dim`` (the flattened tensor for None),
    for a number of repeats; tensor repeats (sizes from data) take the torch fallback."""
    if not isinstance(a, TensorProxy) or isinstance(repeats, TensorProxy) or repeats is None:
        raise UnsupportedOptionError(
            "repeat_interleave with tensor repeats: the result's size depends on their values "
            "(pass output_size=, or repeats as a number)"
        )
    check(
        type(repeats) is int or (isinstance(repeats, NumberProxy) and repeats.python_type is int),
        lambda: (
            f"repeat_interleave(): argument 'repeats' must be int or Tensor, not {type(repeats).__name__}"
        ),
        TypeError,
    )
    check(bool(repeats >= 0), "repeats can not be negative")
    if dim is None:
        a, d = prims.reshape(a, (a.numel(),)), 0
    else:
        if a.ndim == 0:  # torch's own error for a dimension of a 0-d tensor
            raise UnsupportedOptionError("repeat_interleave of a 0-d tensor along a dimension")
        d = canonicalize_dim(a.ndim, dim)
    shape = tuple(a.shape)
    out = (*shape[:d], shape[d] * repeats, *shape[d + 1 :])
    check(
        output_size is None or bool(output_size == out[d]),
        lambda: f"repeat_interleave(): output_size {output_size} does not match {out[d]}",
    )
    b = prims.broadcast_in_dim(
        a, (*shape[: d + 1], repeats, *shape[d + 1 :]), tuple(i + (i > d) for i in range(a.ndim))
    )
    return prims.reshape(b, out)


@torchop("torch.tile", "torch.Tensor.tile", tags=_SHAPE)
def tile(a: Any, *dims: Any, **kwargs: Any) -> Any:
    """``torch.tile(a, dims)``; the method also takes the repetitions as varargs
    (``a.tile(2, 1)``, ``a.tile(2)``)."""
    a = check_tensor_arg(a, "tile")
    check(dims or kwargs, 'tile() missing 1 required positional arguments: "dims"', TypeError)
    reps = sizes_arg(dims, kwargs, "dims", "tile")
    reps = (1,) * (a.ndim - len(reps)) + reps
    return repeat(a, reps)


def _triangle_mask(a: TensorProxy, diagonal: int, lower: bool) -> TensorProxy:
    diagonal = index_arg(diagonal)
    n, m = a.shape[-2], a.shape[-1]
    rows = prims.broadcast_in_dim(
        prims.iota(n, start=0, step=1, device=a.device, dtype=dtypes.int64), (n, m), (0,)
    )
    cols = prims.broadcast_in_dim(
        prims.iota(m, start=0, step=1, device=a.device, dtype=dtypes.int64), (n, m), (1,)
    )
    diff = prims.sub(cols, rows)
    mask = prims.le(diff, diagonal) if lower else prims.ge(diff, diagonal)
    return prims.broadcast_in_dim(mask, a.shape, (a.ndim - 2, a.ndim - 1))  # type: ignore[no-any-return]


@torchop("torch.tril", "torch.Tensor.tril", tags=_SHAPE)
def tril(a: Any, diagonal: int = 0) -> Any:
    a = check_tensor_arg(a, "tril")
    check(a.ndim >= 2, "tril: input tensor must have at least 2 dimensions")
    return prims.where(_triangle_mask(a, diagonal, True), a, zero_of(a.dtype))


@torchop("torch.triu", "torch.Tensor.triu", tags=_SHAPE)
def triu(a: Any, diagonal: int = 0) -> Any:
    a = check_tensor_arg(a, "triu")
    check(a.ndim >= 2, "triu: input tensor must have at least 2 dimensions")
    return prims.where(_triangle_mask(a, diagonal, False), a, zero_of(a.dtype))


@torchop("torch.diagonal", "torch.Tensor.diagonal", tags=_VIEW)
def diagonal(a: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    a = check_tensor_arg(a, "diagonal")
    d1, d2 = canonicalize_dim(a.ndim, dim1), canonicalize_dim(a.ndim, dim2)
    check(d1 != d2, lambda: f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rest = [d for d in range(a.ndim) if d not in (d1, d2)]
    moved = prims.transpose(a, (*rest, d1, d2))
    n, m = int(a.shape[d1]), int(a.shape[d2])
    length = max(min(n, m - offset), 0) if offset >= 0 else max(min(n + offset, m), 0)
    start = offset if offset >= 0 else -offset * m
    flat = prims.reshape(moved, (*moved.shape[:-2], n * m))
    if length == 0:
        return slice_in_dim(flat, flat.ndim - 1, 0, 0)
    return slice_in_dim(flat, flat.ndim - 1, start, start + (length - 1) * (m + 1) + 1, m + 1)


@torchop("torch.Tensor.unfold", tags=_VIEW)
def unfold(a: Any, dimension: int, size: int, step: int) -> Any:
    """Every ``size``-long window of ``dimension`` taken ``step`` apart, as a new last dimension
    (computed here by gathering; torch returns a view)."""
    a = check_tensor_arg(a, "unfold")
    src = a if a.ndim else prims.reshape(a, (1,))
    d = canonicalize_dim(src.ndim, dimension)
    n = src.shape[d]
    check(
        size <= n,
        lambda: f"maximum size for tensor at dimension {d} is {n} but size is {size}",
    )
    check(step > 0, lambda: f"step is {step} but must be > 0")
    windows = (n - size) // step + 1
    starts = prims.broadcast_in_dim(
        prims.iota(windows, start=0, step=step, device=a.device, dtype=dtypes.int64),
        (windows, size),
        (0,),
    )
    offsets = prims.broadcast_in_dim(
        prims.iota(size, start=0, step=1, device=a.device, dtype=dtypes.int64),
        (windows, size),
        (1,),
    )
    index = prims.reshape(prims.add(starts, offsets), (windows * size,))
    gathered = prims.index_select(src, d, index)
    shape = (*src.shape[:d], windows, size, *src.shape[d + 1 :])
    out = prims.reshape(gathered, shape)
    perm = (*range(d + 1), *range(d + 2, len(shape)), d + 1)
    out = prims.transpose(out, perm)
    return out if a.ndim else prims.reshape(out, (size,))  # a 0-d tensor: one window


@torchop(
    "torch.as_strided",
    "torch.Tensor.as_strided",
    tags=(*_VIEW, OpTag.STRIDE_DEPENDENT, OpTag.LAYOUT_ERRORS),
)
def as_strided(
    a: Any, size: Sequence[Any], stride: Sequence[Any], storage_offset: Any = None
) -> Any:
    """A view of ``a``'s memory with the given sizes and strides. What it holds depends on how
    ``a`` lies in memory, which the IR does not model: no decomposition, it runs as
    ``torch.as_strided`` (and has no gradient here)."""
    a = check_tensor_arg(a, "as_strided")
    size, stride = tuple(size), tuple(stride)
    check(
        len(size) == len(stride),
        "mismatch in length of strides and shape",
    )
    for s in (*size, *stride):
        check(
            not isinstance(s, int) or s >= 0,
            "as_strided: negative sizes or strides are not supported",
        )
    return TensorProxy(shape=size, dtype=a.dtype, device=a.device, requires_grad=a.requires_grad)


@torchop("torch.nn.functional.pad", tags=_SHAPE)
def pad(a: Any, pad: Sequence[Any], mode: str = "constant", value: Any = None) -> Any:
    a = check_tensor_arg(a, "pad")
    check(len(pad) % 2 == 0, "Padding length must be divisible by 2")
    check(
        len(pad) // 2 <= a.ndim,
        lambda: (
            f"Padding length should be less than or equal to two times the input dimension but got padding length {len(pad)} and input of dimension {a.ndim}"
        ),
    )
    if mode != "constant":
        raise UnsupportedOptionError(
            f"pad(mode={mode!r}) is not supported; only mode='constant' is"
        )
    if value is not None:
        check_number_fits(value, a.dtype)  # torch converts the value to the dtype, checked
    fill = zero_of(a.dtype) if value is None else dtypes.python_type_of(a.dtype)(value)
    lows, highs = [0] * a.ndim, [0] * a.ndim
    for i in range(len(pad) // 2):
        d = a.ndim - 1 - i
        lows[d], highs[d] = pad[2 * i], pad[2 * i + 1]
    for d in range(a.ndim):
        size = a.shape[d]
        new = size + lows[d] + highs[d]
        check(
            new >= 0,
            lambda: (
                f"The input size {size}, plus negative padding {lows[d]} and {highs[d]} resulted in a negative output size, which is invalid. Check dimension {d} of your input."
            ),
        )
    # Negative padding crops: a slice; positive padding: prims.pad.
    out = a
    if any(lo < 0 for lo in lows) or any(hi < 0 for hi in highs):
        starts = [_positive_part(-lo) for lo in lows]
        stops = [s - _positive_part(-hi) for s, hi in zip(a.shape, highs)]
        stops = [max(st, lo) for st, lo in zip(stops, starts)]
        out = prims.slice_prim(a, starts, stops, [1] * a.ndim)
    if any(lo > 0 for lo in lows) or any(hi > 0 for hi in highs):
        config = [(_positive_part(lo), _positive_part(hi), 0) for lo, hi in zip(lows, highs)]
        return prims.pad(out, fill, config)
    # Eager's constant_pad_nd always returns a new tensor, also for a pure crop (a clone of
    # the narrowed input): never hand back a view of ``a``.
    return prims.clone(out)


def _positive_part(n: Any) -> Any:
    """``max(n, 0)``, deciding whether ``n > 0``: for an amount read from tensor data, the
    computation then checks the sign the grad of ``prims.pad`` also decides on (a zero amount
    is a literal 0 to it, where ``max`` would leave a value it must decide on again)."""
    return n if n > 0 else 0
