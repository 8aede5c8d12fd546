"""Differential fuzzing of aliased arguments ("never wrong, never crash").

Each example generates ``f(a, b)`` or ``f(a, b, c)`` that writes some arguments in place and reads
others (before and after the writes, through views too), then calls ONE jitted function 3-6 times
with different alias patterns between the arguments: the same tensor twice, a tensor and a view of
it, overlapping slices of one base (shifted, stepped, transposed), disjoint slices of one base,
distinct tensors. So cache hits happen with an alias pattern different from the one the program
was compiled for. After every call the outputs (values, shapes) and every base tensor the
arguments were cut from must match eager; an exception must have the same type. A ``JitError``
refusal is acceptable when no base was touched.

A failure prints the generated source, the calls (argument expressions) and a standalone
reproducer script. Budget: ``THUNDER_FUZZ_EXAMPLES`` (see fuzz_common).
"""

from __future__ import annotations

from dataclasses import dataclass

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

# Argument views of a base ``B`` (shape: 1-D (2n + 2,), 2-D (n + 1, 2n)) for an argument of
# shape (n,) or (n, n). Views of one base overlap in different ways; "T" is a tensor of its own.
VIEWS_1D = ["B[:{n}]", "B[1:{n1}]", "B[:{n2}:2]", "B[1:{n2}:2]", "B[{n}:{n2}]", "B[2:{n2}:2]"]
VIEWS_2D = [
    "B[:{n}, :{n}]",
    "B[1:, :{n}]",
    "B[:{n}, 1:{n1}]",
    "B[:{n}, :{n}].t()",
    "B[:{n}, ::2]",
    "B[:{n}, 1::2]",
    "B[1:, 1:{n1}].t()",
    "B[:{n}, {n}:]",
]

# Statements; {X}, {Y}, {Z} are distinct argument names, {T} a fresh temporary.
STMTS = [
    "{X}.add_({Y})",
    "{X}.mul_(2)",
    "{X}.copy_({Y})",
    "{X}.copy_({Y} * 2 + 1)",
    "{X} += {Y}",
    "{X} *= {Y}",
    "{X}[0] = {Y}.sum()",
    "{X}[1:] = {Y}[:-1]",
    "{X}.sub_({Y}.flip(0))",
    "{X}.addcmul_({Y}, {Z})",
    "{X}.zero_()",
    "{X}.fill_(3)",
    "{X}.add_(1)",
    "{X}.lerp_({Y}, 0.5)",
    "{X}.clamp_(max=1.0)",
    "torch.add({Y}, {Z}, out={X})",
    "torch.mul({Y}, 2, out={X})",
    "{T} = {X} * 2",
    "{T} = {X} + {Y}",
    "{T} = {X}.sum() + {Y}.sum()",
    "{T} = {X}[0]",
    "{T} = {X}.clone()",
    "{T} = {X}.exp()",
    "{T} = {X}.flip(0)",
    "{T} = {X}[::2]",
    "{T} = {X}.unsqueeze(0)",
    "{T} = ({X} * {Y}).sum(0)",
]
STMTS_2D = [
    "{T} = {X}.t()",
    "{T} = {X} @ {Y}",
    "{X}.t().add_({Y})",
    "{X}.diagonal().add_(1)",
    "{X}[:, 0] = {Y}[0]",
    "{T} = {X}.diagonal()",
    "{X}.copy_({Y}.t())",
]
# With a parameter ``w`` that requires grad (never aliased with the others).
GRAD_STMTS = [
    "{X}.add_(w)",
    "{X}.mul_(w)",
    "{X}.copy_(w * 2)",
    "{T} = {X} * w",
    "{T} = ({X} + {Y}) * w",
    "{X}[0] = w.sum()",
]
# In-place ops on temporaries (views of arguments write through).
TEMP_STMTS = ["{T}.add_(1)", "{T}.mul_(-1)", "{T}.zero_()"]

SHAPES = [(3,), (4,), (2, 2), (3, 3)]


def _view_specs(shape: tuple[int, ...]) -> list[str]:
    n = shape[0]
    table = VIEWS_1D if len(shape) == 1 else VIEWS_2D
    return [v.format(n=n, n1=n + 1, n2=2 * n) for v in table]


def _base_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    n = shape[0]
    return (2 * n + 2,) if len(shape) == 1 else (n + 1, 2 * n)


# Builds the arguments of one call; shared verbatim by the test and the reproducer script.
MAKE_ARGS = '''\
def make_weight(shape):
    import math
    import torch
    return (torch.linspace(-1.0, 1.5, math.prod(shape)).reshape(shape) + 0.1).requires_grad_()


def make_args(shape, base_shape, specs, seed):
    """specs: per argument ("arg", j) (the very object of argument j), ("T", i) (tensor i of its
    own), ("B", i, expr) (a view of base i). Returns (args, holders): holders are every base and
    own tensor, compared after the call."""
    import math
    import torch

    def vals(s, k):
        m = math.prod(s)
        return ((torch.arange(m, dtype=torch.float32) * 0.5 - 1.0 + seed + k)
                * torch.where(torch.arange(m) % 3 == 1, -1.0, 1.0)).reshape(s)

    holders, args = {}, []
    for spec in specs:
        if spec[0] == "arg":
            args.append(args[spec[1]])
        elif spec[0] == "T":
            key = f"T{spec[1]}"
            if key not in holders:
                holders[key] = vals(shape, 10 + spec[1])
            args.append(holders[key])
        else:
            key = f"B{spec[1]}"
            if key not in holders:
                holders[key] = vals(base_shape, spec[1])
            args.append(eval(spec[2], {"B": holders[key]}))
    return args, holders
'''

_helpers = exec_helpers(MAKE_ARGS)
make_args = _helpers["make_args"]
make_weight = _helpers["make_weight"]


@dataclass
class Program:
    source: str
    shape: tuple[int, ...]
    calls: list[list[tuple]]
    cache: str | None
    grad: bool = False  # a last parameter w that requires grad; w.grad compared too

    def reproducer(self) -> str:
        return f"""\
{repro_jit_function(MAKE_ARGS, self.source, self.cache)}\
CALLS = {self.calls!r}
for i, specs in enumerate(CALLS):
    for tag, fn in (("eager", f), ("thunder", jf)):
        args, holders = make_args({self.shape!r}, {_base_shape(self.shape)!r}, specs, i)
        if {self.grad!r}:
            args.append(make_weight({self.shape!r}))
        try:
            out = fn(*args)
            if {self.grad!r}:
                outs = out if isinstance(out, tuple) else (out,)
                loss = [o.sum() for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
                if loss:
                    print("    w.grad", torch.autograd.grad(sum(loss), args[-1])[0].tolist())
        except Exception as e:
            out = f"raised {{type(e).__name__}}: {{e}}"
        print(f"call {{i}} {{specs}} {{tag:8}} out={{out}}\\n    after={{holders}}")
"""


def _describe(specs: list[tuple]) -> str:
    parts = []
    for s in specs:
        if s[0] == "arg":
            parts.append("abc"[s[1]])
        elif s[0] == "T":
            parts.append(f"T{s[1]}")
        else:
            parts.append(s[2].replace("B", f"B{s[1]}"))
    return "(" + ", ".join(parts) + ")"


@st.composite
def alias_patterns(draw, n_args: int, shape: tuple[int, ...]) -> list[tuple]:
    views = _view_specs(shape)
    specs: list[tuple] = []
    mode = draw(st.sampled_from(["distinct", "same", "one_base", "mixed", "mixed"]))
    for j in range(n_args):
        if mode == "distinct":
            specs.append(("T", j))
        elif mode == "same":
            specs.append(("T", 0) if j == 0 else ("arg", 0))
        elif mode == "one_base":
            specs.append(("B", 0, draw(st.sampled_from(views))))
        else:
            choice = draw(st.sampled_from(["T", "B0", "B1", "arg"] if j else ["T", "B0"]))
            if choice == "T":
                specs.append(("T", j))
            elif choice == "arg":
                specs.append(("arg", draw(st.integers(0, j - 1))))
            else:
                specs.append(("B", int(choice[1]), draw(st.sampled_from(views))))
    return specs


@st.composite
def programs(draw) -> Program:
    shape = draw(st.sampled_from(SHAPES))
    n_args = draw(st.integers(2, 3))
    names = ["a", "b", "c"][:n_args]
    grad = draw(st.integers(0, 2)) == 0
    pool = STMTS + (STMTS_2D if len(shape) == 2 else []) + (GRAD_STMTS * 2 if grad else [])
    stmts: list[str] = []
    temps: list[str] = []
    # validate every statement on distinct arguments so that the program is meaningful
    distinct = [("T", j) for j in range(n_args)]
    env = dict(zip(names, make_args(shape, _base_shape(shape), distinct, 0)[0], strict=True))
    if grad:
        env["w"] = make_weight(shape)
    for _ in range(draw(st.integers(2, 7))):
        if temps and draw(st.integers(0, 4)) == 0:
            template = draw(st.sampled_from(TEMP_STMTS))
        else:
            template = draw(st.sampled_from(pool))
        x, y = draw(st.permutations(names))[:2]
        z = draw(st.sampled_from(names))
        t = f"t{len(temps) + 1}"
        line = template.format(
            X=x, Y=y, Z=z, T=draw(st.sampled_from(temps)) if "{T}." in template else t
        )
        trial = try_line(line, env)
        if trial is None:  # invalid for distinct arguments: leave it out
            continue
        stmts.append(line)
        env = trial
        if line.startswith(f"{t} ="):
            temps.append(t)
    if not stmts:
        stmts = ["a.add_(b)"]
    ret_items = draw(
        st.lists(
            st.sampled_from(temps + names + [f"{names[-1]} * 1"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    body = "\n".join("    " + s for s in stmts)
    params = ", ".join(names + (["w"] if grad else []))
    source = f"def f({params}):\n{body}\n    return {', '.join(ret_items)}\n"
    calls = [draw(alias_patterns(n_args, shape)) for _ in range(draw(st.integers(3, 6)))]
    cache = draw(st.sampled_from([None, None, "symbolic values"]))
    return Program(source, shape, calls, cache, grad)


def run_program(program: Program) -> None:
    ns = exec_source("import torch\n\n" + program.source, "fuzz_aliasing")
    f = ns["f"]
    # Writes through reshape results are checked against eager: the mode that mimics it.
    jf = thunder.jit(f, cache=program.cache, reshape_inplace="warn")
    base_shape = _base_shape(program.shape)
    check = Differential("aliasing", program)
    check.log.add(f"argument shape {program.shape}, jit cache={program.cache or '(default)'}")

    for i, specs in enumerate(program.calls):
        args_e, holders_e = make_args(program.shape, base_shape, specs, i)
        args_j, holders_j = make_args(program.shape, base_shape, specs, i)
        if program.grad:
            args_e.append(make_weight(program.shape))
            args_j.append(make_weight(program.shape))
        check.log.add(f"call {i}: f{_describe(specs)}")
        kind, res_e, res_j = check.call(i, f, jf, args_e, args_j, holders_j, "arguments")
        if kind is None:
            return
        if kind == "ok":
            check.results(i, res_e, res_j, strides=False)
            if program.grad:
                check.grads(i, output_grad, (res_e, args_e[-1]), (res_j, args_j[-1]))
        check.fail_on(
            diff(snapshot(holders_e), snapshot(holders_j), "argument storage"),
            f"call {i}: argument storage after the call differs",
        )


@fuzz_settings(share=1.0)
@given(programs())
def test_fuzz_aliased_arguments(program: Program) -> None:
    check_example("aliasing", run_program, program)
