"""Differential fuzzing of views and in-place ops ("never wrong, never crash").

Each example generates ``f(a)``: a chain of views (stepped slices, select, diagonal,
transpose/permute, expand, narrow, unfold, as_strided, view, reshape, flatten, unsqueeze, split,
unbind, ...), in-place ops on them (add_, mul_, copy_, fill_, zero_, ``+=``, setitem, out=, ...)
and plain computations, built against a concrete sample input so that every step is valid in
eager PyTorch for the first call. The function is then called 2-5 times with inputs of one
logical shape in different memory layouts (contiguous, transposed, stepped, with a storage
offset, expanded), eagerly and through ``thunder.jit``, each on its own copy. After every call:
the outputs (values, shapes, strides, storage offsets, whether each aliases the input and
whether it *is* the input) and the whole base storage of the input (values) and the input's
strides must match; an exception must have the same type. A ``JitError`` refusal is acceptable
when the input's storage is untouched.

A failure prints the generated source, the calls and a standalone reproducer script.
Budget: ``THUNDER_FUZZ_EXAMPLES`` (see fuzz_common).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from fuzz_common import (
    Differential,
    check_example,
    diff,
    exec_helpers,
    exec_source,
    fuzz_settings,
    output_grad,
    repro_jit_function,
    snapshot,
    try_line,
)
from hypothesis import given
from hypothesis import strategies as st

import thunder

SHAPES = [(4,), (6,), (3, 4), (4, 4), (2, 3), (3, 3), (2, 3, 4), (2, 2, 3)]
LAYOUTS = ["contiguous", "transposed", "stepped", "offset", "transposed_stepped", "expanded"]
DTYPES = ["float32", "float32", "float64"]

# Builds (base, a) for a layout; shared verbatim by the test and the reproducer script.
MAKE_INPUT = """\
def make_input(shape, layout, dtype, seed):
    import math
    import torch
    dt = getattr(torch, dtype)
    n = math.prod(shape)

    def vals(m):
        return (torch.arange(m, dtype=dt) * 0.25 - 1.0 + seed) * torch.where(
            torch.arange(m) % 3 == 0, -1.0, 1.0).to(dt)

    nd = len(shape)
    if layout == "contiguous":
        base = vals(n).reshape(shape)
        return base, base
    if layout == "transposed":
        if nd == 1:
            base = vals(2 * n).reshape(n, 2)
            return base, base[:, 1]
        base = vals(n).reshape(shape[::-1])
        return base, base.permute(*range(nd - 1, -1, -1))
    if layout == "stepped":
        base = vals(2 * n).reshape(*shape[:-1], 2 * shape[-1])
        return base, base[..., ::2]
    if layout == "offset":
        base = vals(n + 3)
        return base, base[3:].view(shape)
    if layout == "transposed_stepped":
        rev = shape[::-1]
        base = vals(2 * n).reshape(2 * rev[0], *rev[1:])
        return base, base[::2].permute(*range(nd - 1, -1, -1))
    if layout == "expanded":
        small = (1, *shape[1:])
        base = vals(math.prod(small)).reshape(small)
        return base, base.expand(shape)
    raise ValueError(layout)


def make_weight(shape):
    import math
    import torch
    n = math.prod(shape)
    return (torch.linspace(-1.0, 1.5, n).reshape(shape) + 0.1).requires_grad_()
"""

_helpers = exec_helpers(MAKE_INPUT)
make_input = _helpers["make_input"]
make_weight = _helpers["make_weight"]


# -- statement generators: each takes (draw, env, var) and returns a source line --------------


def _idx_slice(draw, t: torch.Tensor) -> str:
    d = draw(st.integers(0, t.ndim - 1))
    size = t.shape[d]
    start = draw(st.integers(0, max(size - 1, 0)))
    stop = draw(st.sampled_from([None, size, max(start + 1, size - 1)]))
    step = draw(st.integers(1, 3))
    part = f"{start}:{'' if stop is None else stop}:{step}"
    return "[" + ":, " * d + part + "]"


def _idx_any(draw, t: torch.Tensor) -> str:
    kind = draw(st.sampled_from(["slice", "int", "ellipsis_int", "none", "list", "mask"]))
    if t.ndim and 0 in (t.shape[0], t.shape[-1]) and kind in ("int", "ellipsis_int", "list"):
        kind = "slice"  # no element to index (a view the program emptied)
    if kind == "slice" or t.ndim == 0:
        return _idx_slice(draw, t) if t.ndim else "[...]"
    if kind == "int":
        return f"[{draw(st.integers(-t.shape[0], t.shape[0] - 1))}]"
    if kind == "ellipsis_int":
        return f"[..., {draw(st.integers(0, t.shape[-1] - 1))}]"
    if kind == "none":
        return "[None, ..., 0:1]" if t.ndim else "[None]"
    if kind == "list":
        return f"[[{draw(st.integers(0, t.shape[0] - 1))}, 0]]"
    return "[{v} > 0]"


def view_expr(draw, t: torch.Tensor, v: str) -> str:
    nd = t.ndim
    ops = [
        "slice",
        "narrow",
        "unsqueeze",
        "flatten",
        "reshape",
        "view",
        "as_strided",
        "detach",
        "expand",
        "split",
        "getitem_int",
    ]
    if nd >= 1:
        ops += ["select", "unfold", "movedim"]
    if nd >= 2:
        ops += ["diagonal", "transpose", "permute", "t", "mT", "unbind", "view_split"]
    if nd <= 2:
        ops.append("t")
    op = draw(st.sampled_from(ops))
    shape = tuple(t.shape)
    if nd == 0:
        return f"{v}.unsqueeze(0)"
    d = draw(st.integers(0, nd - 1))
    size = shape[d]
    if (size == 0 and op in ("narrow", "select", "unfold", "unbind", "split")) or (
        op == "getitem_int" and shape[0] == 0
    ):
        return f"{v}.narrow({d}, 0, 0)"  # no element to pick in an empty dimension
    if op == "slice":
        return v + _idx_slice(draw, t)
    if op == "getitem_int":
        return f"{v}[{draw(st.integers(-shape[0], shape[0] - 1))}]"
    if op == "narrow":
        start = draw(st.integers(0, size - 1))
        return f"{v}.narrow({d}, {start}, {draw(st.integers(1, size - start))})"
    if op == "unsqueeze":
        return f"{v}.unsqueeze({draw(st.integers(-nd - 1, nd))})"
    if op == "flatten":
        return f"{v}.flatten()" if nd < 2 or draw(st.booleans()) else f"{v}.flatten(0, 1)"
    if op == "reshape":
        return f"{v}.reshape(-1)" if draw(st.booleans()) else f"{v}.reshape({shape[-1]}, -1)"
    if op == "view":
        return f"{v}.view(-1)" if draw(st.booleans()) else f"{v}.view({shape[-1]}, -1)"
    if op == "as_strided":
        n = max(1, min(2, shape[0]))
        m = max(1, min(2, shape[-1]))
        st0 = draw(st.sampled_from([1, 2, t.stride()[0] if t.stride() else 1]))
        off = draw(st.integers(0, 1))
        # the offset is absolute (into the storage): a constant fit for the first call's layout;
        # rarely read from the tensor (``storage_offset()`` is refused by thunder today)
        if draw(st.integers(0, 9)) == 0:
            return f"{v}.as_strided(({n}, {m}), ({st0}, 1), {v}.storage_offset() + {off})"
        return f"{v}.as_strided(({n}, {m}), ({st0}, 1), {t.storage_offset() + off})"
    if op == "detach":
        return f"{v}.detach()"
    if op == "expand":
        return f"{v}.unsqueeze(0).expand(2, *{v}.shape)"
    if op == "split":
        return f"{v}.split({max(1, size // 2)}, {d})[{draw(st.integers(0, 1))}]"
    if op == "select":
        return f"{v}.select({d}, {draw(st.integers(-size, size - 1))})"
    if op == "unfold":
        sz = draw(st.integers(1, size))
        return f"{v}.unfold({d}, {sz}, {draw(st.integers(1, 2))})"
    if op == "movedim":
        return f"{v}.movedim({d}, {draw(st.integers(0, nd - 1))})"
    if op == "diagonal":
        d1, d2 = draw(st.sampled_from(list(itertools.permutations(range(nd), 2))))
        return f"{v}.diagonal({draw(st.integers(-1, 1))}, {d1}, {d2})"
    if op == "transpose":
        d1, d2 = draw(st.sampled_from(list(itertools.combinations(range(nd), 2))))
        return f"{v}.transpose({d1}, {d2})"
    if op == "permute":
        return f"{v}.permute{tuple(draw(st.permutations(range(nd))))}"
    if op == "t":
        return f"{v}.t()" if nd <= 2 else f"{v}.transpose(0, 1)"
    if op == "mT":
        return f"{v}.mT"
    if op == "unbind":
        return f"{v}.unbind({d})[{draw(st.integers(0, size - 1))}]"
    if op == "view_split":
        return f"{v}.view({shape[0]}, -1)"
    raise AssertionError(op)


def inplace_stmt(draw, env: dict, v: str) -> str:
    t = env[v]
    others = [o for o in env if o != v and _broadcastable(env[o].shape, t.shape)]
    c = draw(st.sampled_from(["1.5", "-2", "0.5", "3"]))
    ops = [
        "add_",
        "mul_",
        "fill_",
        "zero_",
        "iadd",
        "imul",
        "setitem",
        "clamp_",
        "neg_",
        "masked_fill_",
        "div_",
        "setitem_expr",
        "copy_self_flip",
    ]
    if others:
        ops += ["add_other", "copy_", "sub_other", "imul_other", "out", "addcmul_", "lerp_"]
    op = draw(st.sampled_from(ops))
    o = draw(st.sampled_from(others)) if others else None
    if op == "add_":
        return f"{v}.add_({c})"
    if op == "mul_":
        return f"{v}.mul_({c})"
    if op == "fill_":
        return f"{v}.fill_({c})"
    if op == "zero_":
        return f"{v}.zero_()"
    if op == "iadd":
        return f"{v} += {c}"
    if op == "imul":
        return f"{v} *= {c}"
    if op == "setitem":
        idx = _idx_any(draw, t).format(v=v)
        return f"{v}{idx} = {c}"
    if op == "setitem_expr":
        idx = _idx_any(draw, t).format(v=v)
        return f"{v}{idx} = {v}{idx} * 2 + 1"
    if op == "clamp_":
        return f"{v}.clamp_(min=0.0)"
    if op == "neg_":
        return f"{v}.neg_()"
    if op == "masked_fill_":
        return f"{v}.masked_fill_({v} > 0, {c})"
    if op == "div_":
        return f"{v}.div_(2)"
    if op == "copy_self_flip":
        return f"{v}.copy_({v}.flip(0))" if t.ndim else f"{v}.copy_({v} * 2)"
    if op == "add_other":
        return f"{v}.add_({o})"
    if op == "copy_":
        return f"{v}.copy_({o})"
    if op == "sub_other":
        return f"{v}.sub_({o}, alpha=2)"
    if op == "imul_other":
        return f"{v} *= {o}"
    if op == "out":
        return f"torch.add({o}, 1, out={v})"
    if op == "addcmul_":
        return f"{v}.addcmul_({o}, {o}, value=0.5)"
    if op == "lerp_":
        return f"{v}.lerp_({o}, 0.25)"
    raise AssertionError(op)


def compute_expr(draw, env: dict, v: str) -> str:
    t = env[v]
    ops = ["arith", "clone", "contiguous", "sum", "exp", "flip", "cat", "mul_other"]
    op = draw(st.sampled_from(ops))
    if op == "arith":
        return f"{v} * 2 + 1"
    if op == "clone":
        return f"{v}.clone()"
    if op == "contiguous":
        return f"{v}.contiguous()"
    if op == "sum":
        return f"{v}.sum({draw(st.integers(0, t.ndim - 1))})" if t.ndim else f"{v} + 0"
    if op == "exp":
        return f"{v}.exp()"
    if op == "flip":
        return f"{v}.flip(0)" if t.ndim else f"{v} - 1"
    if op == "cat":
        return f"torch.cat([{v}, {v}])" if t.ndim else f"{v} * {v}"
    others = [o for o in env if _broadcastable(env[o].shape, t.shape)] or [v]
    return f"{v} * {draw(st.sampled_from(others))}"


def _broadcastable(src: torch.Size, dst: torch.Size) -> bool:
    """``src`` broadcasts to ``dst`` (for writes into ``dst``)."""
    if len(src) > len(dst):
        return False
    return all(s in (1, d) for s, d in zip(reversed(src), reversed(dst), strict=False))


@dataclass
class Program:
    source: str
    shape: tuple[int, ...]
    calls: list[tuple]  # (layout, dtype) or (layout, dtype, shape) for another input shape
    cache: str | None
    grad: bool = False  # f(a, w): w a leaf that requires grad; gradients compared too

    def reproducer(self) -> str:
        return f"""\
{repro_jit_function(MAKE_INPUT, self.source, self.cache)}\
for i, (layout, dtype, *shape) in enumerate({self.calls!r}):
    shape = shape[0] if shape else {self.shape!r}
    for tag, fn in (("eager", f), ("thunder", jf)):
        base, a = make_input(shape, layout, dtype, i)
        args = (a, make_weight(shape)) if {self.grad!r} else (a,)
        try:
            out = fn(*args)
            outs = out if isinstance(out, tuple) else (out,)
            desc = [(o.tolist(), o.stride(), o.storage_offset()) if isinstance(o, torch.Tensor)
                    else o for o in outs]
            if {self.grad!r}:
                loss = sum(o.sum() for o in outs if isinstance(o, torch.Tensor) and o.requires_grad)
                if isinstance(loss, torch.Tensor):
                    desc.append(("w.grad", torch.autograd.grad(loss, args[1])[0].tolist()))
        except Exception as e:
            desc = f"raised {{type(e).__name__}}: {{e}}"
        print(f"call {{i}} {{layout}} {{tag:8}} out={{desc}}\n    base after={{base.tolist()}}")
"""


@st.composite
def programs(draw) -> Program:
    shape = draw(st.sampled_from(SHAPES))
    layout0 = draw(st.sampled_from(LAYOUTS[:-1]))
    _, sample = make_input(shape, layout0, "float32", 0)
    env: dict[str, torch.Tensor] = {"a": sample}
    grad = draw(st.integers(0, 2)) == 0
    if grad:
        env["w"] = make_weight(shape)
    stmts: list[str] = []
    n_new = 0
    for _ in range(draw(st.integers(2, 9))):
        kind = draw(st.sampled_from(["view"] * 4 + ["inplace"] * 4 + ["compute"]))
        v = draw(st.sampled_from(sorted(env)))
        if kind == "view":
            line_rhs = view_expr(draw, env[v], v)
            name = f"v{n_new + 1}"
            line = f"{name} = {line_rhs}"
        elif kind == "compute":
            name = f"c{n_new + 1}"
            line = f"{name} = {compute_expr(draw, env, v)}"
        else:
            name = None
            line = inplace_stmt(draw, env, v)
        trial = try_line(line, env)
        if trial is None:  # invalid for the sample: leave it out
            continue
        stmts.append(line)
        env = trial
        if name is not None:
            n_new += 1
    if not stmts:
        stmts.append("v1 = a[0]")
        env["v1"] = sample[0]
    if grad and not any("w" in s for s in stmts):
        stmts.append("c0 = a * w")
        env["c0"] = sample * env["w"]
    names = sorted(n for n in env if n != "w")
    returned = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    ret = ", ".join(returned) + ("," if len(returned) == 1 and draw(st.booleans()) else "")
    body = "\n".join("    " + s for s in stmts)
    source = f"def f({'a, w' if grad else 'a'}):\n{body}\n    return {ret}\n"
    calls: list[tuple] = [(layout0, "float32")]
    same_rank = [s for s in SHAPES if len(s) == len(shape) and s != shape]
    for _ in range(draw(st.integers(1, 4))):
        call: tuple = (draw(st.sampled_from([*LAYOUTS, layout0])), draw(st.sampled_from(DTYPES)))
        if same_rank and draw(st.integers(0, 4)) == 0:
            call = (*call, draw(st.sampled_from(same_rank)))  # recompile for a new shape
        calls.append(call)
    cache = draw(st.sampled_from([None, None, "symbolic values"]))
    return Program(source, shape, calls, cache, grad)


def _aliases(out: object, base: torch.Tensor, a: torch.Tensor) -> list[tuple[bool, bool]]:
    outs = out if isinstance(out, tuple) else (out,)
    ptr = base.untyped_storage().data_ptr()
    return [
        (o.untyped_storage().data_ptr() == ptr, o is a) for o in outs if isinstance(o, torch.Tensor)
    ]


def run_program(program: Program) -> None:
    ns = exec_source("import torch\n\n" + program.source, "fuzz_views")
    f = ns["f"]
    # Writes through reshape results are checked against eager: the mode that mimics it.
    jf = thunder.jit(f, cache=program.cache, reshape_inplace="warn")
    check = Differential("views", program)
    check.log.add(f"input shape {program.shape}, jit cache={program.cache or '(default)'}")

    for i, (layout, dtype, *other_shape) in enumerate(program.calls):
        shape = other_shape[0] if other_shape else program.shape
        base_e, a_e = make_input(shape, layout, dtype, i)
        base_j, a_j = make_input(shape, layout, dtype, i)
        args_e, args_j = [a_e], [a_j]
        if program.grad:
            args_e.append(make_weight(shape))
            args_j.append(make_weight(shape))
        check.log.add(
            f"call {i}: shape {shape} layout {layout} {dtype}: a.stride()={a_e.stride()} "
            f"offset={a_e.storage_offset()}" + (" (w requires grad)" if program.grad else "")
        )
        kind, res_e, res_j = check.call(i, f, jf, args_e, args_j, base_j, "input storage")
        if kind is None:
            return
        if kind == "ok":
            check.results(i, res_e, res_j)
            al_e, al_j = _aliases(res_e, base_e, a_e), _aliases(res_j, base_j, a_j)
            if al_e != al_j:
                check.fail(
                    f"call {i}: (aliases input storage, is the input) per output: "
                    f"eager {al_e}, thunder {al_j}"
                )
            if program.grad:
                check.grads(i, output_grad, (res_e, args_e[1]), (res_j, args_j[1]))
        check.fail_on(
            diff(snapshot(base_e), snapshot(base_j), "input storage (base)"),
            f"call {i}: input storage after the call differs",
        )
        if (a_e.stride(), a_e.storage_offset(), a_e.shape) != (
            a_j.stride(),
            a_j.storage_offset(),
            a_j.shape,
        ):
            check.fail(
                f"call {i}: input layout changed: eager {a_e.stride()} thunder {a_j.stride()}"
            )


@fuzz_settings(share=1.0)
@given(programs())
def test_fuzz_views_and_inplace(program: Program) -> None:
    check_example("views", run_program, program)
