"""OpInfos of indexing ops: t[key], t[key] = value, gather/scatter and the index_* family."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from opinfos._base import ALL_NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor
from thunder_ir import ops as ltorch

DTYPES = (*ALL_NUMERIC, torch.bool)
FEW = (torch.float32, torch.bfloat16, torch.int64)


def _idx(*values: Any) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _perm_index(shape: tuple[int, ...], dim: int, size: int) -> torch.Tensor:
    """An int64 index of ``shape`` whose values along ``dim`` are distinct positions below ``size``."""
    full = list(shape)
    full[dim] = size
    order = torch.rand(full).argsort(dim)
    return order.narrow(dim, 0, shape[dim]).contiguous()


BASIC_KEYS: list[Any] = [
    0,
    -1,
    (slice(None), 1),
    (Ellipsis, 2),
    (None, 1, slice(1, None, 2)),
    (slice(None), None, slice(0, 3), Ellipsis, None),
    True,
    False,
    slice(5, 1),
    (Ellipsis,),
    slice(None),
    (slice(-100, 100, 3),),
    (1, -2, 3),
]

ADVANCED_KEYS: list[Any] = [
    (1, [0, 2]),
    ([0, 1], slice(None), [1, 2]),
    (slice(None), [0, 1], [1, 2]),
    (slice(None), [[0, 1], [1, 2]]),
    ([0, 1], 0, [1, 2]),
    (None, [0, 1], slice(None), [-1, 2]),
    [2, 0, 1, 0],
]


def getitem_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    for key in BASIC_KEYS + ADVANCED_KEYS:
        yield SampleInput((t, key))
    yield SampleInput((t, _idx(2, 0, -1)))
    yield SampleInput((t, (slice(None), _idx(1, 3), _idx(0, -1))))
    yield SampleInput((t, (_idx(2, 0), slice(1, 3), torch.tensor(4))))
    yield SampleInput((t, (Ellipsis, torch.tensor([[0, 1], [2, 3]], dtype=torch.int32))))
    yield SampleInput((make_tensor((), dtype), None))
    yield SampleInput((make_tensor((), dtype), ...))


def getitem_errors() -> Iterator[ErrorInput]:
    t = make_tensor((3, 4), torch.float32)
    yield ErrorInput(
        SampleInput((t, 3)), IndexError, r"index 3 is out of bounds for dimension 0 with size 3"
    )
    yield ErrorInput(
        SampleInput((t, (0, 1, 2))), IndexError, r"too many indices for tensor of dimension 2"
    )
    yield ErrorInput(
        SampleInput((t, slice(None, None, -1))), ValueError, r"step must be greater than zero"
    )
    yield ErrorInput(
        SampleInput((t, _idx(0).float())),
        IndexError,
        r"tensors used as indices must be long, int, byte or bool tensors",
    )
    yield ErrorInput(
        SampleInput((make_tensor((), torch.float32), 0)),
        IndexError,
        r"invalid index of a 0-dim tensor",
    )


def _setitem_ref(a: torch.Tensor, key: Any, value: Any) -> torch.Tensor:
    a = a.clone()
    a[key] = value
    return a


def setitem_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    scalar = True if dtype == torch.bool else 3
    for key in BASIC_KEYS:
        yield SampleInput((t, key, scalar))
    yield SampleInput((t, 1, make_tensor((4, 5), dtype)))
    yield SampleInput(
        (t, (slice(None), slice(1, 4, 2)), make_tensor((5,), dtype))
    )  # broadcast value
    yield SampleInput((t, (Ellipsis, 2), make_tensor((3, 1), torch.float64)))  # converted value
    yield SampleInput((t, (None, 0), make_tensor((1, 1, 4, 5), dtype)))  # leading 1s dropped
    yield SampleInput((t, (slice(None), _idx(1, 3)), make_tensor((3, 2, 5), dtype)))
    yield SampleInput((t, ([0, 2], slice(None), [-1, 1]), scalar))
    yield SampleInput((t, make_tensor((3, 4), torch.bool), scalar))
    yield SampleInput((t, make_tensor((3, 4, 5), torch.bool), make_tensor((), dtype)))
    yield SampleInput((t, make_tensor((3,), torch.bool), make_tensor((4, 5), dtype)))


def setitem_errors() -> Iterator[ErrorInput]:
    t = make_tensor((3, 4), torch.float32)
    yield ErrorInput(
        SampleInput((t, 0, make_tensor((3,), torch.float32))),
        RuntimeError,
        r"must match the size of tensor b|shape mismatch",
    )
    yield ErrorInput(
        SampleInput((t, 5, 1.0)),
        IndexError,
        r"index 5 is out of bounds for dimension 0 with size 3",
    )


def index_select_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, 0, _idx(2, 0, 0, 1)))
    yield SampleInput((t, -1, _idx(4, 1).int()))
    yield SampleInput((t, 1, torch.tensor(3)))
    yield SampleInput((t, 2, _idx()))
    yield SampleInput((make_tensor((), dtype), 0, _idx(0)))


def index_select_errors() -> Iterator[ErrorInput]:
    t = make_tensor((3, 4), torch.float32)
    yield ErrorInput(
        SampleInput((t, 0, _idx(0).float())),
        RuntimeError,
        r"index_select\(\): Expected dtype int32/int64 for index",
    )
    yield ErrorInput(
        SampleInput((t, 0, torch.zeros(2, 2, dtype=torch.int64))),
        IndexError,
        r"Index is supposed to be a vector",
    )
    yield ErrorInput(SampleInput((t, 2, _idx(0))), IndexError, r"Dimension out of range")


def gather_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, 0, torch.randint(0, 3, (2, 4, 5))))
    yield SampleInput((t, -1, torch.randint(0, 5, (3, 2, 7))))
    yield SampleInput((t, 1, torch.randint(0, 4, (1, 1, 1), dtype=torch.int32)))
    yield SampleInput((make_tensor((), dtype), 0, _idx(0)[0]))


def gather_errors() -> Iterator[ErrorInput]:
    t = make_tensor((3, 4), torch.float32)
    yield ErrorInput(
        SampleInput((t, 0, torch.zeros(2, 5, dtype=torch.int64))),
        RuntimeError,
        r"Size does not match at dimension 1 expected index \[2, 5\] to be no larger than self \[3, 4\] apart from dimension 0",
    )
    yield ErrorInput(
        SampleInput((t, 0, torch.zeros(2, dtype=torch.int64))),
        RuntimeError,
        r"Index tensor must have the same number of dimensions as input tensor",
    )
    yield ErrorInput(
        SampleInput((t, 0, torch.zeros(2, 2))),
        RuntimeError,
        r"gather\(\): Expected dtype int32/int64 for index",
    )


def take_along_dim_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, torch.randint(0, 60, (7,))))
    yield SampleInput((t, torch.randint(0, 4, (3, 2, 5)), 1))
    yield SampleInput((t, torch.randint(0, 5, (1, 4, 2)), -1))  # broadcast
    yield SampleInput((t, torch.randint(0, 3, (2, 1, 1))), {"dim": 0})


def take_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4), dtype, noncontiguous=True)
    yield SampleInput((t, torch.randint(-12, 12, (5,))))
    yield SampleInput((t, torch.randint(0, 12, (2, 3))))
    yield SampleInput((t, torch.tensor(7)))


def scatter_add_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, 0, torch.randint(0, 3, (6, 4, 5)), make_tensor((6, 4, 5), dtype)))
    yield SampleInput((t, -1, torch.randint(0, 5, (3, 2, 3)), make_tensor((3, 4, 5), dtype)))
    yield SampleInput(
        (t, 1, torch.randint(0, 4, (1, 1, 1), dtype=torch.int32), make_tensor((2, 2, 2), dtype))
    )


def scatter_add_errors() -> Iterator[ErrorInput]:
    t = make_tensor((3, 4), torch.float32)
    yield ErrorInput(
        SampleInput(
            (t, 0, torch.zeros(2, 4, dtype=torch.int64), make_tensor((2, 4), torch.float64))
        ),
        RuntimeError,
        r"Expected self.dtype to be equal to src.dtype",
    )
    yield ErrorInput(
        SampleInput((t, 0, torch.zeros(2, 4), make_tensor((2, 4), torch.float32))),
        RuntimeError,
        r"Expected dtype int32/int64 for index",
    )


def scatter_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, 0, _perm_index((2, 4, 5), 0, 3), make_tensor((2, 4, 5), dtype)))
    yield SampleInput((t, -1, _perm_index((3, 2, 3), 2, 5), make_tensor((3, 4, 5), dtype)))
    yield SampleInput(
        (t, 1, _perm_index((2, 3, 1), 1, 4)), {"value": True if dtype == torch.bool else 2}
    )


def index_put_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, (_idx(2, 0),), make_tensor((2, 4, 5), dtype)))
    yield SampleInput((t, (_idx(2, 0), _idx(1, -1)), make_tensor((5,), dtype)))
    yield SampleInput((t, (_idx(0, 1), _idx(1, 2), _idx(3, 4)), make_tensor((), dtype)))
    yield SampleInput((t, (_idx(2, 0, 2),), make_tensor((3, 4, 5), dtype), True))
    yield SampleInput((t, [make_tensor((3, 4), torch.bool)], make_tensor((), dtype)))


def index_put_errors() -> Iterator[ErrorInput]:
    t = make_tensor((3, 4), torch.float32)
    yield ErrorInput(
        SampleInput((t, (_idx(0),), make_tensor((4,), torch.float64))),
        RuntimeError,
        r"Index put requires the source and destination dtypes match",
    )
    yield ErrorInput(
        SampleInput((t, (_idx(0), _idx(0), _idx(0)), make_tensor((), torch.float32))),
        IndexError,
        r"too many indices for tensor of dimension 2",
    )


def index_add_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    # Repeated indices accumulate; in low precision the order of the additions shows.
    yield SampleInput(
        (
            t,
            0,
            _idx(2, 0, 2) if dtype.itemsize > 2 else _idx(2, 0, 1),
            make_tensor((3, 4, 5), dtype),
        )
    )
    yield SampleInput((t, -1, _idx(1, 4).int(), make_tensor((3, 4, 2), dtype)))
    if dtype != torch.bool:
        yield SampleInput((t, 1, _idx(3), make_tensor((3, 1, 5), dtype)), {"alpha": 2})
    yield SampleInput((make_tensor((), dtype), 0, _idx(0), make_tensor((), dtype)))


def index_add_errors() -> Iterator[ErrorInput]:
    t = make_tensor((3, 4), torch.float32)
    yield ErrorInput(
        SampleInput((t, 0, _idx(0, 1), make_tensor((3, 4), torch.float32))),
        IndexError,
        r"Number of indices \(2\) should be equal to source.size\(dim\) \(3\)",
    )


def index_copy_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    yield SampleInput((t, 0, _idx(2, 0), make_tensor((2, 4, 5), dtype)))
    yield SampleInput((t, -1, _idx(1, 4, 0), make_tensor((3, 4, 3), dtype)))


def index_fill_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, noncontiguous=True)
    value = True if dtype == torch.bool else 2
    yield SampleInput((t, 0, _idx(2, 0), value))
    yield SampleInput((t, -1, _idx(1, 4, 0, 1), value))
    yield SampleInput((t, 1, _idx(3), make_tensor((), dtype)))


def _inplace(method: str) -> Any:
    def ref(a: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return getattr(a.clone(), method)(*args, **kwargs)  # type: ignore[no-any-return]

    return ref


OPINFOS = [
    OpInfo(
        ltorch.getitem,
        lambda a, key: a[key],
        getitem_samples,
        dtypes=DTYPES,
        error_inputs=getitem_errors,
    ),
    OpInfo(
        ltorch.setitem_, _setitem_ref, setitem_samples, dtypes=DTYPES, error_inputs=setitem_errors
    ),
    OpInfo(
        ltorch.index_select,
        torch.index_select,
        index_select_samples,
        dtypes=DTYPES,
        error_inputs=index_select_errors,
    ),
    OpInfo(ltorch.gather, torch.gather, gather_samples, dtypes=DTYPES, error_inputs=gather_errors),
    OpInfo(ltorch.take_along_dim, torch.take_along_dim, take_along_dim_samples, dtypes=FEW),
    OpInfo(ltorch.take, torch.take, take_samples, dtypes=FEW),
    OpInfo(
        ltorch.scatter_add,
        torch.scatter_add,
        scatter_add_samples,
        dtypes=ALL_NUMERIC,
        error_inputs=scatter_add_errors,
    ),
    OpInfo(ltorch.scatter_add_, _inplace("scatter_add_"), scatter_add_samples, dtypes=FEW),
    OpInfo(ltorch.scatter, torch.scatter, scatter_samples, dtypes=DTYPES),
    OpInfo(ltorch.scatter_, _inplace("scatter_"), scatter_samples, dtypes=FEW),
    OpInfo(
        ltorch.index_put,
        torch.index_put,
        index_put_samples,
        dtypes=ALL_NUMERIC,
        error_inputs=index_put_errors,
    ),
    OpInfo(ltorch.index_put_, _inplace("index_put_"), index_put_samples, dtypes=FEW),
    OpInfo(
        ltorch.index_add,
        torch.index_add,
        index_add_samples,
        dtypes=ALL_NUMERIC,
        error_inputs=index_add_errors,
    ),
    OpInfo(ltorch.index_add_, _inplace("index_add_"), index_add_samples, dtypes=FEW),
    OpInfo(ltorch.index_copy, torch.index_copy, index_copy_samples, dtypes=DTYPES),
    OpInfo(ltorch.index_copy_, _inplace("index_copy_"), index_copy_samples, dtypes=FEW),
    OpInfo(ltorch.index_fill, torch.index_fill, index_fill_samples, dtypes=DTYPES),
    OpInfo(ltorch.index_fill_, _inplace("index_fill_"), index_fill_samples, dtypes=FEW),
]
