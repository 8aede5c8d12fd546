"""In-place Tensor methods that no op mirrors (``exponential_``, ``uniform_``, ``logit_``,
``polygamma_``): the aten operator's functional variant, recorded as a fallback op, then copied
into the tensor by ``ltorch.copy_``.

torch declares, for each in-place aten operator, a functional variant with the same arguments
that returns the new values (``aten::exponential``, ``aten::normal_functional``,
``aten::bernoulli.p``); its kernel is the in-place one on a copy, so it draws the same random
numbers. The overload the call binds to is the one eager's dispatcher picks (found by running the
call on fake tensors), its defaults filled in, and the functional overload is the one with the
same argument names and types that returns a new tensor. The in-place call itself runs on fake
tensors first, so a call eager refuses (a result dtype the tensor cannot hold, a shape that does
not match) raises eager's error. A method that runs a Python callable on the tensor's values
(``apply_``, ``map_``, ``map2_``) has no functional variant and never runs on fake tensors (they
have no data to hand it): torch runs it. A method whose functional variant returns a view (``t_``,
``squeeze_``: they change the tensor's shape, not its values) is refused, as before.
"""

from __future__ import annotations

import contextlib
import functools
import keyword
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from thunder_ir.devices import to_torch_device
from thunder_ir.dtypes import to_torch_dtype
from thunder_ir.proxies import TensorProxy
from thunder_ir.pytree import tree_iter, tree_map

__all__ = ["fake_tensor_log_quiet", "functional_variant_call"]

# In-place methods that call a Python function on each element of the tensor's data.
_RUNS_PYTHON_ON_VALUES = frozenset({"apply_", "map_", "map2_"})


def _runs_python_on_values(method: str, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether the call hands a Python callable to torch, which would run it on the values."""
    return method in _RUNS_PYTHON_ON_VALUES or any(
        callable(x) and not isinstance(x, (torch.Tensor, TensorProxy, type))
        for x in tree_iter((tuple(args), dict(kwargs)))
    )


class _FirstOp(torch.utils._python_dispatch.TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Notes the aten operators the call reaches, with their arguments."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None
    ) -> Any:
        self.calls.append((func, tuple(args), dict(kwargs or {})))
        return func(*args, **(kwargs or {}))


def functional_variant_call(
    method: str, fn: Any, args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[Any, tuple[Any, ...], dict[str, Any]] | None:
    """For the in-place method ``fn`` (``torch.Tensor.<method>``, or a function such as
    ``torch.relu_``) called on ``args[0]`` (a proxy, or a tensor for ``thunder.examine``): the
    functional aten overload and the arguments that compute the values it writes, or None where
    there is none. Raises eager's error where eager refuses the call."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert isinstance(args[0], (TensorProxy, torch.Tensor))
    if _runs_python_on_values(method, args, kwargs):
        return None  # fake tensors have no values to run it on (torch would crash)
    mode = FakeTensorMode(allow_fallback_kernels=False)
    recorder = _FirstOp()
    by_fake: dict[int, Any] = {}  # id of each fake tensor: the proxy (or tensor) it stands for
    with mode:

        def fake(x: Any) -> Any:
            if isinstance(x, TensorProxy):
                t = torch.empty(
                    tuple(int(s) for s in x.shape),
                    dtype=to_torch_dtype(x.dtype),
                    device=to_torch_device(x.device),
                )
            elif isinstance(x, torch.Tensor):  # thunder.examine's real tensors
                t = torch.empty(x.shape, dtype=x.dtype, device=x.device)
            else:
                return x
            by_fake[id(t)] = x
            return t

        # A generator is left out: torch's meta kernels refuse one, and it changes no metadata.
        fargs = list(tree_map(fake, tree_map(_without_generators, tuple(args))))
        fkwargs = tree_map(fake, tree_map(_without_generators, dict(kwargs)))
        with recorder, fake_tensor_log_quiet():
            fn(*fargs, **fkwargs)  # eager's own checks: its error, if any, is the call's
    calls = [c for c in recorder.calls if c[0]._schema.name == f"aten::{method}"]
    if not calls and len(recorder.calls) == 1 and recorder.calls[0][0]._schema.is_mutable:
        calls = recorder.calls  # a composite function (selu_ is one elu_): the op it calls
    if len(calls) != 1 or calls[0][1][:1] != (fargs[0],):
        return None
    inplace, dispatched_args, dispatched_kwargs = calls[0]
    if any(c[0]._schema.is_mutable for c in recorder.calls if c is not calls[0]):
        return None  # it writes more than its tensor
    written = [a for a in inplace._schema.arguments if a.alias_info and a.alias_info.is_write]
    if written != inplace._schema.arguments[:1]:
        return None
    functional = _functional_overload(inplace)
    if functional is None:
        return None
    # The dispatcher hands a generator on as a new Python object: the caller's is the one kept.
    given = [g for g in (*args, *kwargs.values()) if isinstance(g, torch.Generator)]

    def back(x: Any) -> Any:
        if isinstance(x, torch.Generator) and len(given) == 1:
            return given[0]
        return by_fake.get(id(x), x) if isinstance(x, torch.Tensor) else x

    schema = inplace._schema
    positional = [a for a in schema.arguments if not a.kwarg_only]
    values = [tree_map(back, x) for x in dispatched_args]
    for a in positional[len(values) :]:  # the defaults eager's dispatcher left out
        values.append(a.default_value)
    by_name = dict(zip((a.name for a in positional), values))
    call_kwargs = tree_map(back, dict(dispatched_kwargs))
    made = (dispatched_args, dispatched_kwargs)
    if any(isinstance(x, torch.Tensor) and id(x) not in by_fake for x in tree_iter(made)):
        return None  # a tensor the call made itself (a wrapped number): not expressible
    if len(given) == 1:
        # The fake run had none (torch's meta kernels refuse one): the caller's is drawn from.
        for a in schema.arguments:
            if str(a.type) == "Optional[Generator]":
                (call_kwargs if a.kwarg_only else by_name)[a.name] = given[0]
    op, order = functional
    return op, tuple(by_name[n] for n in order), call_kwargs


def _without_generators(x: Any) -> Any:
    return None if isinstance(x, torch.Generator) else x


@contextlib.contextmanager
def fake_tensor_log_quiet() -> Iterator[None]:
    """FakeTensorMode logs, at error level with a traceback, any exception of a meta kernel
    (``normal_(0, -1)``'s own error): the exception raised is the report."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


@functools.cache
def _functional_overload(inplace: Any) -> tuple[Any, tuple[str, ...]] | None:
    """The functional overload of ``inplace`` and the names of its positional arguments in its
    order (``polygamma_(self, n)`` is ``polygamma(n, self)``)."""
    stem = inplace._schema.name.removeprefix("aten::").removesuffix("_")
    wanted = sorted((a.name, str(a.type), a.kwarg_only) for a in inplace._schema.arguments)
    for candidate in (f"{stem}_functional", stem):
        packet = getattr(torch.ops.aten, candidate, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():  # type: ignore[no-untyped-call]
            op = getattr(packet, overload)
            schema = op._schema
            if schema.is_mutable or any(r.alias_info is not None for r in schema.returns):
                continue
            found = sorted((a.name, str(a.type), a.kwarg_only) for a in schema.arguments)
            if len(schema.returns) == 1 and found == wanted:
                # An overload named by a Python keyword (``random.from``) cannot be printed as
                # an attribute: the packet, given every argument, resolves to it.
                callable_op = packet if keyword.iskeyword(overload) else op
                order = tuple(a.name for a in schema.arguments if not a.kwarg_only)
                return callable_op, order
    return None
