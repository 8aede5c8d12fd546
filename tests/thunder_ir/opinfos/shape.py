"""OpInfos of shape and view ops."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F

from opinfos._base import ALL_NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor
from thunder_ir import ops as ltorch

# Shape ops move values without computing: every dtype, bool included, must come through.
SHAPE_DTYPES = (*ALL_NUMERIC, torch.float16, torch.bool)
FEW_DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.bool)

Samples = Callable[[torch.dtype, bool], Iterator[SampleInput]]


def _t(dtype: torch.dtype, *shape: int, nc: bool = False) -> torch.Tensor:
    return make_tensor(shape, dtype, noncontiguous=nc)


def _err(
    fn: Callable[[], Iterator[tuple[tuple[Any, ...], dict[str, Any], type[Exception], str]]],
) -> Callable[[], Iterator[ErrorInput]]:
    def errors() -> Iterator[ErrorInput]:
        for args, kwargs, exc, match in fn():
            yield ErrorInput(SampleInput(args, kwargs), exc, match)

    return errors


def _f32(*shape: int) -> torch.Tensor:
    return make_tensor(shape, torch.float32)


# Reshaping -------------------------------------------------------------------------------------


def reshape_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3, 4), dtype, requires_grad=requires_grad)
    yield SampleInput((t, (6, 4)))
    yield SampleInput((t, (-1,)))
    yield SampleInput((t, (4, -1)))
    yield SampleInput((t, (2, 3, 4)))  # no-op
    yield SampleInput((make_tensor((), dtype), (1, 1)))
    yield SampleInput((make_tensor((1, 1), dtype), ()))
    yield SampleInput((make_tensor((4, 6), dtype, noncontiguous=True), (24,)))
    yield SampleInput((make_tensor((0, 3), dtype), (3, 0)))


def reshape_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(2, 3), (4, 2))),
        RuntimeError,
        r"shape '\[4, 2\]' is invalid for input of size 6",
    )
    yield ErrorInput(
        SampleInput((_f32(2, 3), (-1, -1))), RuntimeError, r"only one dimension can be inferred"
    )
    yield ErrorInput(
        SampleInput((_f32(2, 3), (4, -1))),
        RuntimeError,
        r"shape '\[4, -1\]' is invalid for input of size 6",
    )


def view_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3, 4), dtype)
    yield SampleInput((t, 6, 4))
    yield SampleInput((t, (-1,)))
    yield SampleInput((t, 2, -1, 2))
    yield SampleInput((make_tensor((), dtype), 1))


def view_as_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((2, 6), dtype), make_tensor((3, 4), dtype)))
    yield SampleInput((make_tensor((1,), dtype), make_tensor((), torch.float64)))


def reshape_as_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield from view_as_samples(dtype, requires_grad)
    yield SampleInput((make_tensor((4, 6), dtype, noncontiguous=True), make_tensor((2, 12), dtype)))


def flatten_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3, 4, 5), dtype)
    yield SampleInput((t,))
    yield SampleInput((t, 1))
    yield SampleInput((t, 1, 2))
    yield SampleInput((t, -3, -2))
    yield SampleInput((t, 2, 2))
    yield SampleInput((make_tensor((), dtype),))
    yield SampleInput(
        (make_tensor((4, 6), dtype, noncontiguous=True),), {"start_dim": 0, "end_dim": -1}
    )


def flatten_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(2, 3), 1, 0)), RuntimeError, r"start_dim cannot come after end_dim"
    )
    yield ErrorInput(SampleInput((_f32(2, 3), 2)), IndexError, r"Dimension out of range")


def ravel_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((2, 3), dtype),))
    yield SampleInput((make_tensor((), dtype),))
    yield SampleInput((make_tensor((4, 6), dtype, noncontiguous=True),))


def unflatten_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((6, 4), dtype)
    yield SampleInput((t, 0, (2, 3)))
    yield SampleInput((t, -1, (2, -1)))
    yield SampleInput((t, 1, (4,)))
    yield SampleInput((make_tensor((4, 6), dtype, noncontiguous=True), 1, (3, 1, 2)))


def unflatten_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(6), 0, (2, 2))),
        RuntimeError,
        r"unflatten: Provided sizes \[2, 2\] don't multiply up to the size of dim 0 \(6\)",
    )


def squeeze_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((1, 3, 1, 4), dtype)
    yield SampleInput((t,))
    yield SampleInput((t, 0))
    yield SampleInput((t, -2))
    yield SampleInput((t, 1))  # not of size 1: unchanged
    yield SampleInput((t, (0, 2)))
    yield SampleInput((make_tensor((), dtype),))
    yield SampleInput((make_tensor((), dtype), 0))
    yield SampleInput((make_tensor((1, 4), dtype, noncontiguous=True),), {"dim": 0})


def squeeze_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(2, 3), 2)),
        IndexError,
        r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)",
    )


def unsqueeze_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4), dtype, noncontiguous=True)
    for d in (0, 1, 2, -1, -3):
        yield SampleInput((t, d))
    yield SampleInput((make_tensor((), dtype), 0))
    yield SampleInput((make_tensor((), dtype), -1))


def unsqueeze_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(2, 3), 3)),
        IndexError,
        r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)",
    )


def atleast_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    for shape in ((), (3,), (2, 3), (2, 3, 4)):
        yield SampleInput((make_tensor(shape, dtype),))
    yield SampleInput((make_tensor((), dtype), make_tensor((3,), dtype)))
    yield SampleInput(([make_tensor((2,), dtype), make_tensor((2, 2), dtype)],))


# Permuting -------------------------------------------------------------------------------------


def permute_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3, 4), dtype, noncontiguous=True)
    yield SampleInput((t, (2, 0, 1)))
    yield SampleInput((t, (-1, 0, -2)))
    yield SampleInput((t, (0, 1, 2)))
    yield SampleInput((make_tensor((), dtype), ()))


def permute_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(2, 3), (0, 1, 2))),
        RuntimeError,
        r"number of dimensions in the tensor input does not match the length of the desired ordering",
    )
    yield ErrorInput(
        SampleInput((_f32(2, 3), (0, 0))), RuntimeError, r"duplicate dims are not allowed"
    )


def method_permute_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3, 4), dtype)
    yield SampleInput((t, 2, 0, 1))
    yield SampleInput((t,), {"dims": (1, 2, 0)})


def transpose_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3, 4), dtype, noncontiguous=True)
    yield SampleInput((t, 0, 2))
    yield SampleInput((t, -1, -2))
    yield SampleInput((t, 1, 1))
    yield SampleInput((make_tensor((5,), dtype), 0, -1))
    yield SampleInput((make_tensor((), dtype), 0, -1))


def transpose_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(SampleInput((_f32(2, 3), 0, 2)), IndexError, r"Dimension out of range")


def t_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((3, 4), dtype, noncontiguous=True),))
    yield SampleInput((make_tensor((3,), dtype),))
    yield SampleInput((make_tensor((), dtype),))


def t_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(2, 3, 4),)),
        RuntimeError,
        r"t\(\) expects a tensor with <= 2 dimensions, but self is 3D",
    )


def matrix_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((3, 4), dtype, noncontiguous=True),))
    yield SampleInput((make_tensor((2, 3, 4), dtype),))
    yield SampleInput((make_tensor((0, 3), dtype),))


def T_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((3, 4), dtype, noncontiguous=True),))
    yield SampleInput((make_tensor((0, 3), dtype),))


def mT_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3),)),
        RuntimeError,
        r"tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor",
    )


def movedim_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, 0, -1))
    yield SampleInput((t, (0, 1), (2, 0)))
    yield SampleInput((t, [3, 0], [0, 3]))
    yield SampleInput((make_tensor((), dtype), 0, 0))


def movedim_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3, 4), (0, 1), (0, 0))),
        RuntimeError,
        r"movedim: repeated dim in `destination`",
    )
    yield ErrorInput(
        SampleInput((_f32(3, 4), (0, 1), (0,))),
        RuntimeError,
        r"movedim: Invalid source or destination dims",
    )


# Broadcasting ----------------------------------------------------------------------------------


def expand_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 1), dtype)
    yield SampleInput((t, 3, 4))
    yield SampleInput((t, (2, 3, 4)))
    yield SampleInput((t, -1, 5))
    yield SampleInput((t, 2, -1, -1))
    yield SampleInput((make_tensor((), dtype), 2, 2))
    yield SampleInput((make_tensor((1, 4), dtype, noncontiguous=True), 3, 4))
    yield SampleInput((t,), {"size": (3, 2)})


def expand_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3), 2, 4)),
        RuntimeError,
        r"The expanded size of the tensor \(4\) must match the existing size \(3\) at non-singleton dimension 1",
    )
    yield ErrorInput(
        SampleInput((_f32(3), -1, 3)),
        RuntimeError,
        r"The expanded size of the tensor \(-1\) isn't allowed in a leading, non-existing dimension 0",
    )
    yield ErrorInput(
        SampleInput((_f32(3, 4), 4)),
        RuntimeError,
        r"the number of sizes provided \(1\) must be greater or equal to the number of dimensions in the tensor \(2\)",
    )


def expand_as_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((3, 1), dtype), make_tensor((2, 3, 4), torch.float32)))
    yield SampleInput((make_tensor((), dtype), make_tensor((2,), dtype)))


def broadcast_to_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((3, 1), dtype), (2, 3, 4)))
    yield SampleInput((make_tensor((3, 1), dtype, noncontiguous=True), (-1, 5)))
    yield SampleInput((make_tensor((), dtype), (2,)))


def broadcast_to_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3), (2, 4))),
        RuntimeError,
        r"The expanded size of the tensor \(4\) must match the existing size \(3\)",
    )


def broadcast_tensors_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput(
        (make_tensor((3, 1), dtype), make_tensor((4,), dtype), make_tensor((), dtype))
    )
    yield SampleInput((make_tensor((2, 3), dtype, noncontiguous=True),))


def broadcast_tensors_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3), _f32(4))),
        RuntimeError,
        r"The size of tensor a \(3\) must match the size of tensor b \(4\)",
    )


def unary_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    for shape in ((), (5,), (3, 4), (2, 0)):
        yield SampleInput((make_tensor(shape, dtype),))
    yield SampleInput((make_tensor((4, 6), dtype, noncontiguous=True),))


# Joining ---------------------------------------------------------------------------------------


def cat_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput(([_t(dtype, 2, 3), _t(dtype, 4, 3)],))
    yield SampleInput(([_t(dtype, 2, 3), _t(dtype, 2, 1), _t(dtype, 2, 4, nc=True)], 1))
    yield SampleInput(([_t(dtype, 2, 3), _t(dtype, 2, 2)], -1))
    yield SampleInput(([_t(dtype, 3), _t(dtype, 0)],))  # legacy: 1-D empty tensors are skipped
    yield SampleInput(([_t(dtype, 2, 3), _t(dtype, 0)], 1))
    yield SampleInput(((_t(dtype, 2), _t(torch.float64, 3)),))  # promotes
    yield SampleInput(([_t(dtype, 2, 3)],), {"dim": 1})


def cat_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(SampleInput(([],)), ValueError, r"expected a non-empty list of Tensors")
    yield ErrorInput(
        SampleInput(([_f32(2, 3), _f32(2, 4)],)),
        RuntimeError,
        r"Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor number 1 in the list",
    )
    yield ErrorInput(
        SampleInput(([_f32(2, 3), _f32(3)], 1)),
        RuntimeError,
        r"Tensors must have same number of dimensions: got 2 and 1",
    )
    yield ErrorInput(
        SampleInput(([_f32(), _f32()],)),
        RuntimeError,
        r"zero-dimensional tensor \(at position 0\) cannot be concatenated",
    )
    yield ErrorInput(
        SampleInput(([_f32(2, 3), _f32(2, 3)], 2)), IndexError, r"Dimension out of range"
    )


def stack_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput(([_t(dtype, 2, 3), _t(dtype, 2, 3, nc=True)],))
    yield SampleInput(([_t(dtype, 2, 3), _t(dtype, 2, 3), _t(dtype, 2, 3)], -1))
    yield SampleInput(([_t(dtype), _t(dtype)],))
    yield SampleInput(((_t(dtype, 2), _t(torch.float64, 2)),), {"dim": 1})


def stack_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput(([_f32(2, 3), _f32(2, 4)],)),
        RuntimeError,
        r"stack expects each tensor to be equal size, but got \[2, 3\] at entry 0 and \[2, 4\] at entry 1",
    )
    yield ErrorInput(SampleInput(([],)), RuntimeError, r"stack expects a non-empty TensorList")
    yield ErrorInput(SampleInput(([_f32(2), _f32(2)], 2)), IndexError, r"Dimension out of range")


def stacking_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput(([_t(dtype, 3), _t(dtype, 3)],))
    yield SampleInput(([_t(dtype, 2, 3), _t(dtype, 2, 3, nc=True)],))
    yield SampleInput(([_t(dtype), _t(dtype)],))
    yield SampleInput(([_t(dtype, 2, 3, 4), _t(dtype, 2, 3, 4)],))


# Splitting -------------------------------------------------------------------------------------


def split_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((5, 6), dtype, noncontiguous=True)
    yield SampleInput((t, 2))
    yield SampleInput((t, 3, 1))
    yield SampleInput((t, 7, -1))
    yield SampleInput((t, [1, 4], 0))
    yield SampleInput((t, (2, 0, 4)), {"dim": 1})


def split_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(5), [2, 2])),
        RuntimeError,
        r"split_with_sizes expects split_sizes to sum exactly to 5",
    )
    yield ErrorInput(
        SampleInput((_f32(3), 0)), RuntimeError, r"split_size can only be 0 if dimension size is 0"
    )


def split_with_sizes_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((5, 6), dtype)
    yield SampleInput((t, [1, 4]))
    yield SampleInput((t, [2, 0, 4], 1))
    yield SampleInput((t, [6], -1))


def chunk_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((6, 5), dtype, noncontiguous=True)
    yield SampleInput((t, 2))
    yield SampleInput((t, 4))
    yield SampleInput((t, 3, 1))
    yield SampleInput((t, 10, -1))
    yield SampleInput((make_tensor((0,), dtype), 3))


def chunk_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3), 0)),
        RuntimeError,
        r"chunk expects `chunks` to be greater than 0, got: 0",
    )


def tensor_split_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((7, 4), dtype, noncontiguous=True)
    yield SampleInput((t, 3))
    yield SampleInput((t, 2, 1))
    yield SampleInput((t, [1, 5]))
    yield SampleInput((t, [5, 2, -1, 10]))
    yield SampleInput((t, (1,)), {"dim": -1})


def unbind_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4), dtype, noncontiguous=True)
    yield SampleInput((t,))
    yield SampleInput((t, 1))
    yield SampleInput((t, -1))
    yield SampleInput((make_tensor((2, 0), dtype), 1))


def unbind_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(SampleInput((_f32(3), 1)), IndexError, r"Dimension out of range")


def narrow_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((5, 6), dtype, noncontiguous=True)
    yield SampleInput((t, 0, 1, 3))
    yield SampleInput((t, -1, -4, 2))
    yield SampleInput((t, 1, 6, 0))
    # A 0-dim integer tensor start: static shape, positions gathered at run time.
    yield SampleInput((t, 1, torch.tensor(2), 3))
    yield SampleInput((t, 0, torch.tensor(-3, dtype=torch.int32), 2))
    yield SampleInput((t, -1, torch.tensor(6), 0))


def narrow_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3), 0, 2, 3)),
        RuntimeError,
        r"start \(2\) \+ length \(3\) exceeds dimension size \(3\)",
    )
    yield ErrorInput(SampleInput((_f32(3), 0, 0, -1)), RuntimeError, r"length must be non-negative")
    for start in (torch.tensor(1.0), torch.tensor([1]), torch.tensor(True)):
        yield ErrorInput(
            SampleInput((_f32(3), 0, start, 1)), RuntimeError, r"start must be an 0-dim integral"
        )


def select_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, 0, 1))
    yield SampleInput((t, -1, -1))
    yield SampleInput((t, 1, 3))
    yield SampleInput((make_tensor((4,), dtype), 0, 2))


def select_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3, 4), 0, 5)),
        IndexError,
        r"select\(\): index 5 out of range for tensor of size \[3, 4\] at dimension 0",
    )
    yield ErrorInput(
        SampleInput((_f32(3, 4), 0, -4)), IndexError, r"select\(\): index -4 out of range"
    )


# Reordering and repeating ----------------------------------------------------------------------


def flip_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, (0,)))
    yield SampleInput((t, (0, -1)))
    yield SampleInput((t, [1, 2, 0]))
    yield SampleInput((t, ()))
    yield SampleInput((make_tensor((), dtype), (0,)))


def flip_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(SampleInput((_f32(3, 4), (0, 0))), RuntimeError, r"dims has duplicates")
    yield ErrorInput(SampleInput((_f32(3, 4), (2,))), IndexError, r"Dimension out of range")


def fliplr_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((3, 4), dtype, noncontiguous=True),))
    yield SampleInput((make_tensor((2, 3, 4), dtype),))


def roll_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, 1, 0))
    yield SampleInput((t, -2, -1))
    yield SampleInput((t, (1, 7), (0, 2)))
    yield SampleInput((t, 5))  # flattened
    yield SampleInput((t, 0, 1))
    yield SampleInput((make_tensor((0, 3), dtype), 1, 0))


def roll_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3), (1, 2), (0,))),
        RuntimeError,
        r"shifts and dimensions must align. shifts: 2, dims:1",
    )


def repeat_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3), dtype, noncontiguous=True)
    yield SampleInput((t, 2, 1))
    yield SampleInput((t, (3, 2, 2)))
    yield SampleInput((t, 1, 0))
    yield SampleInput((make_tensor((), dtype), 3))
    yield SampleInput((make_tensor((), dtype), ()))


def repeat_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3, 4), 2)),
        RuntimeError,
        r"Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
    )


def tile_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3), dtype, noncontiguous=True)
    yield SampleInput((t, (2,)))
    yield SampleInput((t, (2, 1, 2)))
    yield SampleInput((make_tensor((), dtype), (2, 2)))


def triangle_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((4, 5), dtype, noncontiguous=True)
    yield SampleInput((t,))
    yield SampleInput((t, 1))
    yield SampleInput((t, -2))
    yield SampleInput((make_tensor((2, 3, 3), dtype),), {"diagonal": 10})
    yield SampleInput((make_tensor((0, 3), dtype),))


def tril_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3),)), RuntimeError, r"tril: input tensor must have at least 2 dimensions"
    )


def triu_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3),)), RuntimeError, r"triu: input tensor must have at least 2 dimensions"
    )


def diagonal_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((make_tensor((4, 4), dtype),))
    yield SampleInput((t,))
    yield SampleInput((t, 1))
    yield SampleInput((t, -2, 0, 2))
    yield SampleInput((t, 2, -1, 1))
    yield SampleInput((t, 7))
    yield SampleInput((t,), {"offset": -1, "dim1": 2, "dim2": 0})


def diagonal_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3, 3), 0, 0, 0)),
        RuntimeError,
        r"diagonal dimensions cannot be identical 0, 0",
    )
    yield ErrorInput(SampleInput((_f32(3),)), IndexError, r"Dimension out of range")


def unfold_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 5, 4), dtype, noncontiguous=True)
    yield SampleInput((t, 1, 2, 1))
    yield SampleInput((t, 1, 2, 2))
    yield SampleInput((t, -1, 4, 3))
    yield SampleInput((t, 0, 1, 1))
    yield SampleInput((make_tensor((6,), dtype), 0, 3, 2))
    yield SampleInput((make_tensor((), dtype), 0, 1, 1))
    yield SampleInput((make_tensor((4,), dtype), 0, 0, 1))


def unfold_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3, 3), 0, 4, 1)),
        RuntimeError,
        r"maximum size for tensor at dimension 0 is 3 but size is 4",
    )
    yield ErrorInput(SampleInput((_f32(3, 3), 0, 2, 0)), RuntimeError, r"step is 0 but must be > 0")


def as_strided_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((3, 4), dtype), (2, 2), (1, 4)))
    yield SampleInput((make_tensor((3, 4), dtype), (2, 3), (4, 1), 1))
    yield SampleInput((make_tensor((3, 4), dtype, noncontiguous=True), (3,), (5,)))
    yield SampleInput((make_tensor((5,), dtype), (2, 2), (1, 2)), {"storage_offset": 0})


def as_strided_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3, 3), (2, 2), (1,))),
        RuntimeError,
        r"mismatch in length of strides and shape",
    )


def pad_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, (1, 2)))
    yield SampleInput((t, (1, 0, 0, 2, 3, 1)))
    yield SampleInput((t, (-1, 2, 1, -2)))
    yield SampleInput((t, (-1, -1)))
    yield SampleInput((t, (0, 0)))
    fill = True if dtype == torch.bool else 3
    yield SampleInput((t, (2, 1)), {"value": fill})
    yield SampleInput((t, (1, 1)), {"mode": "constant", "value": 0})


def pad_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_f32(3, 3), (1,))), RuntimeError, r"Padding length must be divisible by 2"
    )
    yield ErrorInput(
        SampleInput((_f32(3, 3), (1, 1, 1, 1, 1, 1))),
        RuntimeError,
        r"Padding length should be less than or equal to two times the input dimension",
    )
    yield ErrorInput(SampleInput((_f32(3, 3), (-2, -2))), RuntimeError, r"negative")


# Copies ----------------------------------------------------------------------------------------


def contiguous_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield from unary_samples(dtype, requires_grad)
    yield SampleInput(
        (make_tensor((4, 6), dtype, noncontiguous=True),),
        {"memory_format": torch.contiguous_format},
    )


OPINFOS = [
    OpInfo(
        ltorch.reshape,
        torch.reshape,
        reshape_samples,
        dtypes=SHAPE_DTYPES,
        error_inputs=reshape_errors,
    ),
    OpInfo(ltorch.view, torch.Tensor.view, view_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.view_as, torch.Tensor.view_as, view_as_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.reshape_as, torch.Tensor.reshape_as, reshape_as_samples, dtypes=FEW_DTYPES),
    OpInfo(
        ltorch.flatten,
        torch.flatten,
        flatten_samples,
        dtypes=SHAPE_DTYPES,
        error_inputs=flatten_errors,
    ),
    OpInfo(ltorch.ravel, torch.ravel, ravel_samples, dtypes=FEW_DTYPES),
    OpInfo(
        ltorch.unflatten,
        torch.unflatten,
        unflatten_samples,
        dtypes=FEW_DTYPES,
        error_inputs=unflatten_errors,
    ),
    OpInfo(
        ltorch.squeeze,
        torch.squeeze,
        squeeze_samples,
        dtypes=SHAPE_DTYPES,
        error_inputs=squeeze_errors,
    ),
    OpInfo(
        ltorch.unsqueeze,
        torch.unsqueeze,
        unsqueeze_samples,
        dtypes=SHAPE_DTYPES,
        error_inputs=unsqueeze_errors,
    ),
    OpInfo(ltorch.atleast_1d, torch.atleast_1d, atleast_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.atleast_2d, torch.atleast_2d, atleast_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.atleast_3d, torch.atleast_3d, atleast_samples, dtypes=FEW_DTYPES),
    OpInfo(
        ltorch.permute,
        torch.permute,
        permute_samples,
        dtypes=SHAPE_DTYPES,
        error_inputs=permute_errors,
        torch_names=("torch.permute",),
    ),
    OpInfo(
        ltorch.permute,
        torch.Tensor.permute,
        method_permute_samples,
        dtypes=FEW_DTYPES,
        name="permute_method",
        torch_names=("torch.Tensor.permute",),
    ),
    OpInfo(
        ltorch.transpose,
        torch.transpose,
        transpose_samples,
        dtypes=SHAPE_DTYPES,
        error_inputs=transpose_errors,
    ),
    OpInfo(ltorch.t, torch.t, t_samples, dtypes=FEW_DTYPES, error_inputs=t_errors),
    OpInfo(ltorch.T, lambda a: a.T, T_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.mT, lambda a: a.mT, matrix_samples, dtypes=FEW_DTYPES, error_inputs=mT_errors),
    OpInfo(
        ltorch.movedim,
        torch.movedim,
        movedim_samples,
        dtypes=FEW_DTYPES,
        error_inputs=movedim_errors,
    ),
    OpInfo(
        ltorch.expand,
        torch.Tensor.expand,
        expand_samples,
        dtypes=SHAPE_DTYPES,
        error_inputs=expand_errors,
    ),
    OpInfo(ltorch.expand_as, torch.Tensor.expand_as, expand_as_samples, dtypes=FEW_DTYPES),
    OpInfo(
        ltorch.broadcast_to,
        torch.broadcast_to,
        broadcast_to_samples,
        dtypes=FEW_DTYPES,
        error_inputs=broadcast_to_errors,
    ),
    OpInfo(
        ltorch.broadcast_tensors,
        torch.broadcast_tensors,
        broadcast_tensors_samples,
        dtypes=FEW_DTYPES,
        error_inputs=broadcast_tensors_errors,
    ),
    OpInfo(ltorch.contiguous, torch.Tensor.contiguous, contiguous_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.clone, torch.clone, unary_samples, dtypes=SHAPE_DTYPES),
    OpInfo(ltorch.cat, torch.cat, cat_samples, dtypes=SHAPE_DTYPES, error_inputs=cat_errors),
    OpInfo(
        ltorch.stack, torch.stack, stack_samples, dtypes=SHAPE_DTYPES, error_inputs=stack_errors
    ),
    OpInfo(ltorch.hstack, torch.hstack, stacking_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.vstack, torch.vstack, stacking_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.dstack, torch.dstack, stacking_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.column_stack, torch.column_stack, stacking_samples, dtypes=FEW_DTYPES),
    OpInfo(
        ltorch.split, torch.split, split_samples, dtypes=SHAPE_DTYPES, error_inputs=split_errors
    ),
    OpInfo(
        ltorch.split_with_sizes, torch.split_with_sizes, split_with_sizes_samples, dtypes=FEW_DTYPES
    ),
    OpInfo(
        ltorch.chunk, torch.chunk, chunk_samples, dtypes=SHAPE_DTYPES, error_inputs=chunk_errors
    ),
    OpInfo(ltorch.tensor_split, torch.tensor_split, tensor_split_samples, dtypes=FEW_DTYPES),
    OpInfo(
        ltorch.unbind, torch.unbind, unbind_samples, dtypes=SHAPE_DTYPES, error_inputs=unbind_errors
    ),
    OpInfo(
        ltorch.narrow, torch.narrow, narrow_samples, dtypes=FEW_DTYPES, error_inputs=narrow_errors
    ),
    OpInfo(
        ltorch.select, torch.select, select_samples, dtypes=SHAPE_DTYPES, error_inputs=select_errors
    ),
    OpInfo(ltorch.flip, torch.flip, flip_samples, dtypes=SHAPE_DTYPES, error_inputs=flip_errors),
    OpInfo(ltorch.fliplr, torch.fliplr, fliplr_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.flipud, torch.flipud, fliplr_samples, dtypes=FEW_DTYPES),
    OpInfo(ltorch.roll, torch.roll, roll_samples, dtypes=SHAPE_DTYPES, error_inputs=roll_errors),
    OpInfo(
        ltorch.repeat,
        torch.Tensor.repeat,
        repeat_samples,
        dtypes=SHAPE_DTYPES,
        error_inputs=repeat_errors,
    ),
    OpInfo(ltorch.tile, torch.tile, tile_samples, dtypes=FEW_DTYPES),
    OpInfo(
        ltorch.tril, torch.tril, triangle_samples, dtypes=SHAPE_DTYPES, error_inputs=tril_errors
    ),
    OpInfo(
        ltorch.triu, torch.triu, triangle_samples, dtypes=SHAPE_DTYPES, error_inputs=triu_errors
    ),
    OpInfo(
        ltorch.diagonal,
        torch.diagonal,
        diagonal_samples,
        dtypes=SHAPE_DTYPES,
        error_inputs=diagonal_errors,
    ),
    OpInfo(
        ltorch.unfold,
        torch.Tensor.unfold,
        unfold_samples,
        dtypes=SHAPE_DTYPES,
        error_inputs=unfold_errors,
    ),
    OpInfo(
        ltorch.as_strided,
        torch.as_strided,
        as_strided_samples,
        dtypes=FEW_DTYPES,
        error_inputs=as_strided_errors,
        supports_grad=False,
    ),
    OpInfo(ltorch.pad, F.pad, pad_samples, dtypes=SHAPE_DTYPES, error_inputs=pad_errors),
]
