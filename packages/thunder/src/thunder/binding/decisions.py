"""Decisions on values read from tensor data (``prims.check_data``): what may run before them.

A check that fails stops the computation and the call runs another program, so nothing before
the last check may have an effect a second run would repeat. Checks are first moved as early as
what they read allows (``hoist_decisions``); writes into inputs still before one are deferred
past it (``defer_input_writes``); random draws before one are undone by it (the generators'
states are taken first). What remains (a collective before a decision, writes that cannot be
deferred) raises ``DataDependentError``: the call runs eagerly.
"""

from __future__ import annotations

from typing import Any

import torch

from thunder.binding.data_reads import has_effects, replayable
from thunder.binding.state import Inputs
from thunder_ir import (
    BoundSymbol,
    DataDependentError,
    OpTag,
    Proxy,
    TensorProxy,
    Trace,
    prims,
    tracectx,
)
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import alias_info, with_writes_exposed, writes_in_place, written_inputs
from thunder_ir.ops.fallback import FALLBACK_SYMBOLS, SIZED_SYMBOLS
from thunder_ir.pytree import tree_iter, tree_map
from thunder_ir.symbol import call_again

__all__ = ["check_data_decisions", "defer_input_writes", "hoist_decisions"]


def check_data_decisions(trace: Trace, inputs: Inputs) -> None:
    """Where the computation decides on a value read from tensor data (``prims.check_data``), a
    call where the decision differs stops there and runs another program: nothing before the last
    check may have an effect that running again would repeat. Writes into inputs are deferred
    past it (made on copies of the inputs, copied into them last: ``defer_input_writes``).
    Random draws may come first: the generators' states are taken where the computation starts
    and a failing check puts them back (the next program draws the same numbers, as eager's one
    run does). Runs on the finished trace (its arguments and return recorded).

    An op that may raise on values, called inside the program's ``try`` (``Trace.
    caught_op_outputs``), is such a stop too: where it raises at run time, the call runs again
    eagerly (``jit_function._reruns_after_error``), so that the program's handler decides, as
    in eager; where random draws come before it, the generators' states the call found are
    taken for that run (``Trace.caught_after_draws_on``)."""
    last = _last_check(trace)
    observed = [p.name for p, _ in inputs.in_order]
    writes_first = last > 0 and _writes_an_input(trace.bound_symbols[:last], observed)
    # A failing check cannot put back a generator passed in (only the default ones): checks
    # go before such draws where they can.
    given_first = last > 0 and _given_generator_draw(trace.bound_symbols[:last]) is not None
    # Inputs sharing memory alias unseen.
    if (writes_first or given_first) and not _sharing_memory(inputs):
        hoist_decisions(trace)
        last = _last_check(trace)
    if last > 0 and _writes_an_input(trace.bound_symbols[:last], observed):
        defer_input_writes(trace, inputs)
        last = _last_check(trace)
    before = trace.bound_symbols[: max(last, 0)]
    info = alias_info(before, observed=observed)
    draws: list[BoundSymbol] = []
    for b in before:
        if _stops(b, trace):
            continue
        # A write into memory only the program sees is discarded with the rest of the call.
        seen = writes_in_place(b) and any(map(info.is_observed, written_inputs(b)))
        # A random draw, also one in place into memory only the program sees (the copy of an
        # input whose writes are deferred): undone by the check.
        if not seen and replayable(b) and has_effects(b) and (_draws(b) or not writes_in_place(b)):
            draws.append(b)
            continue
        if seen or (has_effects(b) and not writes_in_place(b)):
            what = "a write into an input" if seen else "an op with effects (a collective)"
            at = f" at {b.location}" if b.location else ""
            stop = trace.bound_symbols[last]
            decides = (
                f"may catch the error of {_op_name(stop)}{stop.where()}"
                if _caught(stop, trace)
                else "decides on a value read from tensor data"
            )
            raise DataDependentError(
                f"the program {decides} after {what} ({b.sym.name}{at}), which is not supported yet"
            )
    if draws:
        first = trace.bound_symbols.index(draws[0])
        given = _given_generator_draw(draws)
        if given is not None:
            after = trace.bound_symbols[trace.bound_symbols.index(given) : last + 1]
            decision = next((b for b in after if not _caught(b, trace) and _stops(b, trace)), None)
            if decision is not None:  # (a caught op's error reruns eagerly from their states)
                raise DataDependentError(
                    f"the program decides on a value read from tensor data{decision.where()} "
                    f"after drawing from a torch.Generator it was given ({given.sym.name}"
                    f"{given.where()}), whose state a call deciding otherwise cannot put back; "
                    "this is not supported yet"
                )
        if any(_caught(b, trace) for b in trace.bound_symbols[first : last + 1]):
            # The eager run after its error draws from the generators as the call found them.
            trace.caught_after_draws_on = _devices(draws)
        sized = [b for b in trace.bound_symbols[first : last + 1] if b.sym in SIZED_SYMBOLS]
        if sized:  # its structure check cannot put the generators back
            raise DataDependentError(
                f"{sized[0].args[0]}, whose result's shape is read from data, is called after "
                f"random draws ({draws[0].sym.name}{draws[0].where()}), which is not supported yet"
            )
        _restoring_random_state(trace, draws)


def _given_generator_draw(bsyms: list[BoundSymbol]) -> BoundSymbol | None:
    """The first of ``bsyms`` that draws from a torch.Generator given to (or read by) the
    program rather than a default one."""

    def given(b: BoundSymbol) -> bool:
        return any(isinstance(x, torch.Generator) for x in b.flat_args) or any(
            map(given, b.subsymbols)
        )

    return next((b for b in bsyms if _draws(b) and given(b)), None)


def _draws(b: BoundSymbol) -> bool:
    return b.has_tag(OpTag.RANDOM) or any(map(_draws, b.subsymbols))


def _writes_an_input(bsyms: list[BoundSymbol], observed: list[str]) -> bool:
    info = alias_info(bsyms, observed=observed)
    return any(writes_in_place(b) and any(map(info.is_observed, written_inputs(b))) for b in bsyms)


def _sharing_memory(inputs: Inputs) -> bool:
    """Whether two tensor inputs share memory (a write into one changes the other, unseen by
    the trace's alias groups)."""
    from thunder.signature import storage_address

    addresses = [storage_address(t) for t, _ in inputs.tensors.values()]
    addresses = [a for a in addresses if a != 0]  # no memory: nothing to share
    return len(set(addresses)) < len(addresses)


def _stops(b: BoundSymbol, trace: Trace) -> bool:
    """Whether ``b`` may stop the computation (``DataChanged``): a check, or a torch callable
    whose result's structure is read from data (its count of tensors is checked); or an op whose
    error the program may catch (the call then runs again eagerly)."""
    return b.sym is prims.check_data or b.sym in SIZED_SYMBOLS or _caught(b, trace)


def _caught(b: BoundSymbol, trace: Trace) -> bool:
    caught = trace.caught_op_outputs
    return bool(caught) and any(p.name in caught for p in b.flat_proxy_outs)


def _op_name(b: BoundSymbol) -> str:
    return str(b.args[0]) if b.sym in FALLBACK_SYMBOLS and b.args else b.sym.name


def _last_check(trace: Trace) -> int:
    return max((i for i, b in enumerate(trace.bound_symbols) if _stops(b, trace)), default=-1)


def hoist_decisions(trace: Trace) -> None:
    """Each check, with what it reads, moved before the ops that need not run first: a read of
    ``input_pos`` decided on after a KV-cache write then stops the call before the write, and
    the write stays in place (deferring it would copy the whole cache). Ops move only past ops
    they do not depend on: never past a write into memory they read, never a write or an op with
    effects (random draws keep their order)."""
    body = trace.bound_symbols
    producer, uses = _definitions_and_uses(body, trace.args)
    needed: set[int] = set()
    stack = [i for i, b in enumerate(body) if _stops(b, trace)]
    while stack:
        i = stack.pop()
        if i not in needed:
            needed.add(i)
            stack.extend(producer[n] for n in uses[i] if n in producer)
    info = alias_info(body)
    hoisted: list[int] = []
    moved: set[int] = set()
    written: set[str] = set()  # alias roots written by the ops that stay
    for i, b in enumerate(body):
        reads = {info.root(p.name) for p in b.flat_proxy_args}
        movable = (
            i in needed
            and not writes_in_place(b)
            and (b.sym is prims.check_data or not has_effects(b))
            and not b.has_tag(OpTag.RETURN)
            and not reads & written
            and all(producer[n] in moved for n in uses[i] if n in producer)
        )
        if movable:
            hoisted.append(i)
            moved.add(i)
        elif writes_in_place(b):
            written.update(info.root(n) for n in written_inputs(b))
            written.update(info.root(p.name) for p in b.flat_proxy_outs)
    if hoisted:
        # In place: the recording's scope is this list (symbols recorded later land in it).
        trace.bound_symbols[:] = [body[i] for i in hoisted] + [
            b for i, b in enumerate(body) if i not in moved
        ]


def _definitions_and_uses(
    body: list[BoundSymbol], inputs: tuple[Proxy, ...]
) -> tuple[dict[str, int], list[set[str]]]:
    """Where each value of ``body`` is defined (by index) and the values each op uses. Beyond
    the listed arguments and outputs: a symbolic size an op's decomposition computes (the
    ``-1`` of ``view(B, L, -1, 8)``) is defined by that op, and the sizes in the shapes of the
    tensors it takes or makes are used by it (``zeros((B, n, 8))``'s ``n``); the first op whose
    output shape names a size defines it."""
    producer: dict[str, int] = {}
    uses: list[set[str]] = []
    seen = {p.name for p in inputs} | {n for p in inputs for n in _size_names(p)}
    for i, b in enumerate(body):
        defined_inside, read_inside = _inside(b.subsymbols)
        read = {p.name for p in b.flat_proxy_args} | read_inside
        read |= {n for x in b.flat_proxy_args for n in _size_names(x)}
        outs = {p.name for p in b.flat_proxy_outs} | defined_inside
        for n in (n for x in b.flat_proxy_outs for n in _size_names(x)):
            (read if n in seen or n in read else outs).add(n)
        read -= outs
        for n in outs:
            producer.setdefault(n, i)
        seen |= read | outs
        uses.append(read)
    return producer, uses


def _inside(subsymbols: Any) -> tuple[set[str], set[str]]:
    """The values a decomposition defines, and those it reads without defining them."""
    defined: set[str] = set()
    read: set[str] = set()
    for sub in subsymbols:
        sub_defined, sub_read = _inside(sub.subsymbols)
        read |= {p.name for p in sub.flat_proxy_args} - defined
        read |= sub_read - defined
        defined |= sub_defined | {p.name for p in sub.flat_proxy_outs}
    return defined, read


def _size_names(x: Proxy) -> list[str]:
    return [d.name for d in x.shape if isinstance(d, Proxy)] if isinstance(x, TensorProxy) else []


def defer_input_writes(trace: Trace, inputs: Inputs) -> None:
    """``trace`` writing, in place of each input it writes before its last check, a copy of it
    with its strides (``prims.clone_layout``), copied into the input last (``prims.copy_``), so
    that a decision after a write stops the call before any effect. The program computes on
    the copy what eager computes on the input: values, layouts, views or copies by strides,
    autograd's errors. A returned view of the copy is made again from the input after its final
    write (eager returns a view of the caller's tensor). Refused (the call runs eagerly) where
    that cannot be told: inputs that share memory (a write into one changes the other under the
    trace's feet), a returned result of a ``reshape`` of a copy written after it (a view of the
    input or a copy of older values, by strides)."""
    body = trace.bound_symbols
    last = _last_check(trace)
    info = alias_info(body[:last], observed=[p.name for p, _ in inputs.in_order])
    written = [p for _, p in inputs.tensors.values() if info.is_written(p.name)]
    names = ", ".join(p.name for p in written)
    if _sharing_memory(inputs):
        raise _not_deferred(names, "inputs that share memory")
    from thunder_transforms.passes import substitute

    original, ret = list(body), body[-1]
    assert ret.has_tag(OpTag.RETURN)
    program = body[:-1]
    with tracectx(trace):  # recorded at the end of ``body``, moved below
        copies: dict[str, Proxy] = {p.name: prims.clone_layout(p) for p in written}
    made = body[len(original) :]
    reading = [i for i, b in enumerate(program) if any(p.name in copies for p in b.flat_proxy_args)]
    first = min(reading, default=len(program))
    program = [substitute(b, copies) for b in program]
    # In place: symbols recorded later (the generators' states) go into the same list.
    body[:] = program[:first] + made + program[first:]
    returned = substitute(ret, copies).args
    effects = _eager_write_effects(original[:-1])
    with tracectx(trace):
        finals = {copies[p.name].name: _final_write(copies[p.name], p, effects) for p in written}
        try:
            returned = _views_of_inputs_remade(body[: -len(finals)], returned, finals)
        except NotImplementedError as e:
            body[:] = original
            raise _not_deferred(names, str(e)) from None
        prims.python_return(*returned)


def _eager_write_effects(program: list[BoundSymbol]) -> tuple[set[str], dict[str, int]]:
    """What eager's writes in ``program`` do to autograd's view of the memory they write, by
    the names of ``program``'s values: those some write autograd records goes into (a write
    with grad enabled into a tensor that requires grad: eager gives it a new ``grad_fn``; on a
    leaf it raises), and how many writes move each one's version counter. A write under
    ``no_grad`` (its value made by ``prims.written_without_grad``) is not recorded; one through
    ``.data`` is neither (``.data`` has a version counter of its own)."""
    info = alias_info(program)
    behind_data: set[str] = set()
    bumps: dict[str, int] = {}
    for b in program:
        args = {p.name for p in b.flat_proxy_args}
        if b.sym is ltorch.data or (OpTag.VIEW in b.sym.tags and args & behind_data):
            behind_data.update(o.name for o in b.flat_proxy_outs)
        if writes_in_place(b):
            for root in {info.root(n) for n in written_inputs(b) if n not in behind_data}:
                bumps[root] = bumps.get(root, 0) + 1
    exposed = with_writes_exposed(program)
    made_by = {o.name: b for b in exposed for o in b.flat_proxy_outs}
    recorded: set[str] = set()
    for b in exposed:
        if not writes_in_place(b):
            continue
        if b.sym is prims.copy_:
            src, dst = b.args[:2]
            if not getattr(dst, "requires_grad", False):
                continue
            maker = made_by.get(src.name) if isinstance(src, Proxy) else None
            if (
                maker is not None
                and maker.sym is prims.written_without_grad
                and (len(maker.args) < 3 or maker.args[2])
            ):
                continue
        recorded.update(info.root(n) for n in written_inputs(b))
    names = {p.name for b in program for p in (*b.flat_proxy_args, *b.flat_proxy_outs)}
    return (
        {n for n in names if info.root(n) in recorded},
        {n: bumps.get(info.root(n), 0) for n in names},
    )


def _final_write(copy: Proxy, target: TensorProxy, effects: tuple[set[str], dict[str, int]]) -> Any:
    """``copy`` written into the input ``target`` with the effects of eager's writes into it:
    where autograd recorded none of them (writes under ``no_grad``: weight clipping, an EMA),
    the deferred one is not recorded either (a leaf stays a leaf, ``target`` keeps its
    ``grad_fn``, the gradient of the values read after the writes flows to it); its version
    counter moves by as many writes as eager's moved it."""
    recorded, bumps = effects
    count = bumps.get(target.name, 1)
    bumps_version: bool | int = count if count > 1 else bool(count)
    if target.requires_grad and target.name not in recorded:
        copy = prims.written_without_grad(target, copy)
    if bumps_version is True:
        return prims.copy_(copy, target)
    return prims.copy_(copy, target, bumps_version=bumps_version)


def _not_deferred(names: str, why: str) -> DataDependentError:
    return DataDependentError(
        f"the program decides on a value read from tensor data after writing into inputs "
        f"({names}), and the writes cannot be deferred past the decision ({why})"
    )


def _views_of_inputs_remade(
    program: list[BoundSymbol], returned: Any, finals: dict[str, Proxy]
) -> Any:
    """``returned`` with each value that aliases a copy in ``finals`` (by its name) made again
    from the input it was copied into, after its final write: the same views of it (the copy
    has its strides, so each view op makes what it made of the copy)."""
    from thunder_transforms.functionalize import view_origins

    exposed = with_writes_exposed(program)
    views = view_origins(exposed)
    info = alias_info(program)
    position = {p.name: i for i, b in enumerate(exposed) for p in b.flat_proxy_outs}
    groups = {info.root(name) for name in finals}
    last_write = {
        g: max(
            (
                i
                for i, b in enumerate(exposed)
                if writes_in_place(b) and any(info.root(n) == g for n in written_inputs(b))
            ),
            default=-1,
        )
        for g in groups
    }
    remade: dict[str, Proxy] = {}

    def remake(x: Any) -> Any:
        if not isinstance(x, Proxy) or info.root(x.name) not in groups:
            return x
        if x.name in remade:
            return remade[x.name]
        chain = []
        name = x.name
        while name in views and name not in finals:
            chain.append(name)
            name = views[name].base
        if name not in finals:
            raise NotImplementedError(f"returning {x.name}, which aliases an input not by views")
        base_name, base = name, finals[name]
        for link in reversed(chain):
            view = views[link]
            if view.bsym is not None and view.kind != "identity":
                if view.kind == "strides" and position[link] < last_write[info.root(link)]:
                    raise NotImplementedError(
                        f"returning the result of {view.bsym.sym.qualified_name} ({link})"
                        f"{view.bsym.where()} of an input written after it: a view of the "
                        f"input or a copy of older values, by its strides"
                    )
                swapped = tree_map(
                    lambda a: base if isinstance(a, Proxy) and a.name == base_name else a,
                    (view.bsym.args, view.bsym.kwargs),
                )
                outs = call_again(view.bsym, *swapped)
                made = dict(
                    zip(
                        (o.name for o in view.bsym.flat_proxy_outs),
                        (o for o in tree_iter(outs) if isinstance(o, Proxy)),
                    )
                )
                base = made[link]
            base_name = link
        remade[x.name] = base
        return base

    return tree_map(remake, returned)


def _devices(draws: list[BoundSymbol]) -> tuple[str, ...]:
    """The devices whose generators ``draws`` draw from."""
    found = {str(o.device) for b in draws for o in b.flat_proxy_outs if isinstance(o, TensorProxy)}
    return tuple(sorted(found)) or ("cpu",)


def _restoring_random_state(trace: Trace, draws: list[BoundSymbol]) -> None:
    """The generators' states of the devices ``draws`` draw on, taken first in the computation;
    each check after the first draw puts them back where it fails."""
    devices = list(_devices(draws))
    body = trace.bound_symbols
    first = body.index(draws[0])
    with tracectx(trace):
        states = tuple((ltorch.get_rng_state(device), device) for device in devices)
    taken = body[len(body) - len(devices) :]
    del body[len(body) - len(devices) :]
    body[0:0] = taken
    first += len(taken)
    for i in range(first, len(body)):
        b = body[i]
        if b.sym is prims.check_data:
            body[i] = b.replace(kwargs={**b.kwargs, "restore": states})
