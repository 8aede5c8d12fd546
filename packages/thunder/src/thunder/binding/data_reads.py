"""Reading a traced tensor's values while tracing (``t.item()``, ``if t.sum() > 0:``).

The trace recorded so far is a program of the call's inputs, which the binder holds: the bound
symbols a tensor depends on are run on them (with the torch executor, without gradients), and
the value is this call's. Values read before are inputs of the next read, so a program that
reads in every layer runs each layer once. Where the tensor depends on memory written in place
or on random numbers, the whole trace so far runs, on copies of the inputs it writes into, from
the random state the call starts from (put back afterwards: the program draws the same numbers).
Refused (the call then runs eagerly) after an op with effects outside the program (a collective
would wait for the other ranks) or draws from a ``torch.Generator`` passed in.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from thunder.binding.state import Inputs
from thunder_executors import transform_for_execution
from thunder_ir import (
    BoundSymbol,
    DataDependentError,
    NumberProxy,
    OpTag,
    Proxy,
    TensorProxy,
    Trace,
    prims,
    tracectx,
)
from thunder_ir.aliasing import alias_info, writes_in_place
from thunder_ir.sizes import size_facts

__all__ = ["TensorDataReader", "has_effects", "replayable"]


class TensorDataReader:
    """``reader(t)``: the traced tensor ``t`` as this call computes it (a ``torch.Tensor``; see
    the module docstring)."""

    def __init__(self, trace: Trace, inputs: Inputs) -> None:
        self.trace = trace
        self.inputs = inputs
        self.values: dict[str, Any] = {}  # tensors computed by earlier reads, by name

    def __call__(self, t: Any) -> Any:
        try:
            return self._read(t)
        except DataDependentError:
            raise
        except Exception as e:
            # Never the program's to catch: its except clause would take a path eager does not.
            raise DataDependentError(
                f"reading the values of {t.name} while tracing raised {type(e).__name__}: {e} "
                "(please report this)"
            ) from e

    def _read(self, t: Any) -> Any:
        bsyms = self.trace.bound_symbols
        known = self._known()
        needed, args = _slice(bsyms, t.name, known)
        written = alias_info(bsyms).is_written if any(map(writes_in_place, bsyms)) else None
        reads = {t.name, *(p.name for b in needed for p in b.flat_proxy_args)}
        if written is not None and any(map(written, reads)):
            return self._whole_trace(t, written)  # the writes are part of its value
        if t.name in known:  # an input, or read before
            return known[t.name]
        if any(map(has_effects, needed)):
            return self._whole_trace(t, written)  # the random draws before it are too
        value = _run(self.trace, needed, args, t, known)
        self.values[t.name] = value
        return value

    def _whole_trace(self, t: Any, written: Any) -> Any:
        """``t`` where memory it depends on was written in place or random numbers it depends
        on were drawn: the whole trace so far runs, on the inputs (copies of those written into)
        from the random state the call starts from, which is put back afterwards, so that the
        program draws the same numbers."""
        bsyms = list(self.trace.bound_symbols)
        acting = [b for b in bsyms if not replayable(b)]
        if acting:
            raise DataDependentError(
                f"the values of {t.name} are read after {acting[0].sym.name}, an op with effects "
                "outside the program (a collective), which is not supported yet"
            )
        if any(isinstance(x, torch.Generator) for b in bsyms for x in b.flat_args):
            raise DataDependentError(
                f"the values of {t.name} depend on numbers drawn from a torch.Generator passed "
                "in, which a read while tracing would advance"
            )
        base = _input_values(self.inputs)
        made = {p.name for b in bsyms for p in b.flat_proxy_outs}
        args: dict[str, Proxy] = {}
        for b in bsyms:
            for p in b.flat_proxy_args:
                if p.name not in made and p.name in base:
                    args[p.name] = p
        _add_sizes_read(bsyms, {k: v for k, v in base.items() if k not in made}, args)
        values = {
            name: base[name].clone()
            if written is not None and isinstance(base[name], torch.Tensor) and written(name)
            else base[name]
            for name in args
        }
        with _random_state_kept():
            return _run(self.trace, bsyms, list(args.values()), t, values)

    def _known(self) -> dict[str, Any]:
        known = _input_values(self.inputs)
        known.update(self.values)
        known.update((name, p.value) for name, p in self.trace.data_values.items())
        return known


def _input_values(inputs: Inputs) -> dict[str, Any]:
    """This call's values of the trace's inputs by name: tensors, numbers, and the symbolic sizes
    of the tensors (``cache="symbolic values"``)."""
    values: dict[str, Any] = {}
    for x, p in inputs.tensors.values():
        values[p.name] = x
        for size in p.shape:
            if isinstance(size, NumberProxy):
                values.setdefault(size.name, size.value)
    values.update((name, obj) for name, (obj, _) in inputs.numbers.items())
    return values


def _slice(
    bsyms: list[BoundSymbol], name: str, known: dict[str, Any]
) -> tuple[list[BoundSymbol], list[Proxy]]:
    """The bound symbols ``name`` depends on, back to values in ``known`` (in order), and the
    proxies of those values they read."""
    wanted = {name} - set(known)
    needed: list[BoundSymbol] = []
    args: dict[str, Proxy] = {}
    for b in reversed(bsyms):
        if wanted.isdisjoint(p.name for p in b.flat_proxy_outs):
            continue
        needed.append(b)
        wanted.difference_update(p.name for p in b.flat_proxy_outs)
        for p in b.flat_proxy_args:
            if p.name in known:
                args[p.name] = p
            else:
                wanted.add(p.name)
    if wanted:
        raise DataDependentError(
            f"the values of {name} depend on {', '.join(sorted(wanted))}, which tracing cannot "
            "compute on this call's inputs"
        )
    needed.reverse()
    _add_sizes_read(needed, known, args)
    return needed, list(args.values())


def _add_sizes_read(
    bsyms: list[BoundSymbol], known: dict[str, Any], args: dict[str, Proxy]
) -> None:
    """The symbolic sizes of the tensors ``bsyms`` use, where known: their decompositions read
    them (a broadcast to ``(x_size0,)``) without taking them as arguments."""
    for b in bsyms:
        for p in (*b.flat_proxy_args, *b.flat_proxy_outs):
            if isinstance(p, TensorProxy):
                for size in p.shape:
                    if isinstance(size, NumberProxy) and size.name in known:
                        args.setdefault(size.name, size)


def has_effects(b: BoundSymbol) -> bool:
    """Whether running ``b`` again would draw random numbers or act outside its outputs."""
    if b.sym is prims.check_values:  # raises, or does nothing: run again, it does the same
        return False
    if b.has_tag(OpTag.RANDOM) or b.has_tag(OpTag.DONT_DCE):
        return True
    return any(has_effects(s) for s in b.subsymbols)


def replayable(b: BoundSymbol) -> bool:
    """Whether running ``b`` again while tracing leaves nothing behind: no effect, or an in-place
    write (replayed on copies), a random draw (from a state put back), a check of a value read
    before (it holds)."""
    if not b.has_tag(OpTag.DONT_DCE) or b.has_tag(OpTag.RANDOM) or writes_in_place(b):
        return all(map(replayable, b.subsymbols))
    return b.sym is prims.check_data or b.sym is prims.check_values


@contextmanager
def _random_state_kept() -> Iterator[None]:
    """The default generators' states (CPU, and each CUDA device in use) put back afterwards."""
    cpu = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        torch.random.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def _run(
    trace: Trace, needed: list[BoundSymbol], args: list[Proxy], t: Any, known: dict[str, Any]
) -> Any:
    """Runs ``needed`` on the known values of ``args`` and returns the value of ``t``."""
    scratch = Trace.like(trace, fn_name="data_read", args=args, bound_symbols=(), constraints=())
    scratch.bound_symbols.extend(needed)
    scratch.bound_symbols.append(prims.python_return.bind(t, output=None))
    # Its own trace context and size facts: nothing of this run is part of the compilation.
    with tracectx(Trace("data_read_scratch")), size_facts(), torch.no_grad():
        run = transform_for_execution(scratch, ("torch",)).python_callable()
        return run(*(known[a.name] for a in args))
