"""Differential fuzzing of outside state ("never wrong, never crash").

Each example generates a small module (globals: scalars, lists, dicts, tensors; a user object;
an nn.Module with a buffer; a closure with cells) and a function ``f(x, k)`` that reads and writes
that state, then calls it 3-6 times eagerly and through ``thunder.jit`` (each on its own fresh copy
of the module), with changing input shapes and dtypes (recompiles), outside changes between calls
(as a user would make them), calls that raise after a side effect, both cache options and a small
recompile limit. After every call the results, the exception type and all state (globals, closure
cells, object and module attributes, buffers, container contents, every input passed so far) must
match. A thunder refusal (``JitError``) is acceptable when it leaves the state exactly as it was.

A failure prints the generated source, the call sequence and a standalone reproducer script.
Budget: ``THUNDER_FUZZ_EXAMPLES`` (see fuzz_common).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from fuzz_common import (
    Differential,
    check_example,
    diff,
    exec_source,
    fuzz_settings,
    quiet_call,
    repro_loader,
    snapshot,
)
from hypothesis import given
from hypothesis import strategies as st

import thunder

# -- the generated module ---------------------------------------------------------------------

PRELUDE = """\
import torch

G_S = 1.5
G_I = 2
G_L = [1, 2.0]
G_TL = [torch.arange(3.0)]
G_D = {"a": 1.0, "b": 2}
G_T = torch.arange(3.0)
G_X = None
G_Y = None
G_STR = "s"


class Obj:
    CLS = 1

    def bump(self, v):
        self.n = self.n + 1
        self.lst.append(v)
        return self.n

    def __len__(self):
        return 2


OBJ = Obj()
OBJ.v = 1.0
OBJ.n = 0
OBJ.t = torch.zeros(3)
OBJ.lst = []


class Mod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.ones(3))
        self.scale = 2.0
        self.calls = 0
        self.w = torch.nn.Parameter(torch.ones(2))

    def forward(self, x):
{forward}
        return x * self.scale + self.buf.sum()

    def bump(self):
        self.calls += 1
        self.buf.mul_(0.5)
        return self.calls


MOD = Mod()
MOD.peer = OBJ  # one object by two paths (a config every layer holds)
G_ALIAS = OBJ


def make():
    cell_n = 0
    cell_l = []

    def f(x, k, lst, cfg, sz):
{body}

    return f


F = make()


def set_cell(name, value):
    if name in F.__code__.co_freevars:
        F.__closure__[F.__code__.co_freevars.index(name)].cell_contents = value
"""

STATE_GLOBALS = (
    "G_S",
    "G_I",
    "G_L",
    "G_TL",
    "G_D",
    "G_T",
    "G_X",
    "G_Y",
    "G_STR",
    "OBJ",
    "MOD",
    "Obj",
    "G_ALIAS",
)
CELLS = ("cell_n", "cell_l")

FORWARDS = {
    "pure": "        pass",
    "count": "        self.calls += 1",
    "buffer": "        self.buf.add_(1.0)",
    "both": "        self.calls = self.calls + 1\n        self.buf.mul_(0.5)",
}

# Statements of f's body. ``{c}`` is a small constant drawn per statement. Names assigned at the
# start of a line (G_*, cell_n) get their ``global`` / ``nonlocal`` declaration automatically.
READS = [
    "y = y * G_S",
    "y = y + G_I",
    "y = y + len(G_L)",
    'y = y + G_D["a"]',
    "y = y + G_T.sum()",
    "y = y * OBJ.v",
    "y = y + OBJ.t.mean()",
    "y = y + OBJ.n",
    "y = y + cell_n",
    "y = y + len(cell_l)",
    "if G_I > 2:\n    y = y * 2\nelse:\n    y = y - 1",
    "if G_L:\n    y = y + G_L[-1]",
    "for v in G_L[-2:]:\n    y = y + v",
    "y = y + sum(G_D.values())",
    'y = y + G_D.get("cnt", 0)',
    "y = MOD(y)",
    "y = y + MOD.buf.sum() * MOD.scale",
    "y = y * k",
    "y = y + len(G_TL)",
    "y = y + G_TL[-1].sum()",
    "if isinstance(G_S, float):\n    y = y + 1\nelse:\n    y = y - 1",
    "y = y + y.shape[0]",
    "y = y + torch.arange(y.shape[-1])",
    "y = y[..., : k + 1]",
    "y = y.transpose(0, -1)",
    "y = y.reshape(-1)",
    "y = y + torch.arange(k + 1).sum()",
    "y = y + y.numel()",
    "y = y + len(lst)",
    'y = y * cfg.get("w", 1.0)',
    "if lst:\n    y = y + lst[0]",
    "y = y.sum() + torch.ones(sz)",
    "y = y + sz[0]",
    "y = y + sz.numel() + len(sz)",
    'y = y + getattr(OBJ, "extra", 0)',
    'if hasattr(OBJ, "extra"):\n    y = y - 1',
    "y = y + Obj.CLS",
    "y = y + torch.zeros(G_I).sum()",
    'y = y + len(G_D) + ("cnt" in G_D)',
    "y = y + G_L.count(k)",
    "if G_X is x:\n    y = y + 100",
    "y = y + (lambda v: v * G_S)(1.0)",
    "y = y + sum(v for v in G_L if isinstance(v, int))",
    "y = y + G_T.sum()",
    "y = y * MOD.peer.v",
    "y = y + G_ALIAS.n",
    "y = y + len(OBJ)",
]

WRITES = [
    "G_S = G_S + {c}",
    "G_S = G_S * 2",
    "G_I = G_I + 1",
    "G_I = k",
    "G_I = y.ndim",
    "G_L.append(G_I)",
    "G_L.append(y.sum())",
    "G_L.append(k)",
    "G_L.extend([k, 0.5])",
    "if G_L:\n    G_L.pop()",
    "G_L.pop()",
    "if G_L:\n    G_L[0] = G_L[0] + 1",
    "G_L.insert(0, k)",
    "G_L[:] = [k, {c}]",
    "G_L = G_L + [k]",
    "G_L.reverse()",
    'G_D["cnt"] = G_D.get("cnt", 0) + 1',
    'G_D.update({{"last": y.sum()}})',
    'G_D["a"] = G_D["a"] * 2',
    'G_D.pop("cnt", None)',
    'if "last" in G_D:\n    del G_D["last"]',
    'G_D.setdefault("hist", []).append(k)',
    'G_D = {{"a": G_D["a"] + 1, "b": k}}',
    "G_T.add_(1)",
    "G_T.mul_(G_S)",
    "G_T[0] = y.sum()",
    "G_T = G_T + y.sum()",
    "G_TL.append(y)",
    "G_TL.append(x)",
    "G_TL[0].add_({c})",
    "G_X = x",
    "G_Y = y * 1",
    "G_Y = y",
    "cell_n += 1",
    "cell_n = k",
    "cell_l.append(cell_n)",
    "cell_l.append(y.mean())",
    "OBJ.n += 1",
    "OBJ.v = OBJ.v * 0.5",
    "OBJ.t = OBJ.t + y.sum()",
    "OBJ.t.add_(1)",
    "OBJ.extra = G_I",
    "OBJ.lst.append(k)",
    "y = y + OBJ.bump(k)",
    "MOD.buf.add_(y.sum())",
    "MOD.calls += 1",
    "MOD.scale = MOD.scale + {c}",
    "MOD.buf.copy_(MOD.buf * 0.5)",
    "MOD.buf[0] = {c}",
    "y = y + MOD.bump()",
    "x.add_({c})",
    "y.mul_(2)",
    "y = y.clone()",
    "y += {c}",
    "lst.append(k)",
    "lst.append(y.sum())",
    "if lst:\n    lst.pop()",
    'cfg["w"] = cfg.get("w", 1.0) * 2',
    'cfg["seen"] = k',
    "G_S += y.sum()",
    "G_STR = G_STR + str(k)",
    "if G_L:\n    G_L[0] += 1",
    'G_D["a"] += 1',
    "OBJ.t += 1",
    "OBJ.t = G_T",
    "G_TL.append(G_T)",
    "G_L.append(x)\nG_L[-1].add_(1)",
    "if isinstance(G_X, torch.Tensor):\n    G_X.add_(1)",
    "MOD.cache = y",
    "with torch.no_grad():\n    MOD.w.add_(1)",
    "y = y + MOD.w.sum()",
    'setattr(OBJ, "v", OBJ.v + 1)',
    "Obj.CLS = Obj.CLS + 1",
    "G_Y = torch.zeros(sz)",
    "del G_L[0]",
    "G_L.remove(k)",
    "G_I = G_L.index(k)",
    "G_T.zero_()",
    "G_T.copy_(torch.full_like(G_T, k))",
    "G_TL[-1][...] = k",
    "OBJ.lst = OBJ.lst + [k]",
    "def inner():\n    global G_I\n    G_I = G_I * 2\ninner()",
    "MOD.peer.v = MOD.peer.v + {c}",
    "G_ALIAS.n += 1",
]

EXCEPTIONS = [
    'if k == 3:\n    raise ValueError("boom")',
    'if k >= 4:\n    raise KeyError("big")',
    'try:\n    G_L.append(k)\n    raise KeyError("inner")\nexcept KeyError:\n    G_I = G_I + 1',
    'try:\n    y = y + G_D["missing"]\nexcept KeyError:\n    y = y - 1',
    'if y.ndim > 1 and k == 2:\n    raise RuntimeError("2d")',
    "G_L.append(k)\ny = y + torch.ones(5)",
    "try:\n    y = y + torch.ones(5)\nexcept RuntimeError:\n    G_I = -7",
]

DATA_DEPENDENT = [
    "if y.sum() > 0:\n    y = y + 1",
    "G_S = float(y.sum())",
    "G_S = y.sum().item()",
    # a refusal must not be catchable by the user's except clause
    "try:\n    G_S = float(y.sum())\nexcept Exception:\n    G_S = -1.0",
    "try:\n    if y.sum() > 0:\n        y = y + 1\nexcept RuntimeError:\n    y = y * 100",
]

RETURNS = [
    "y",
    "y, G_I",
    "y * 1, len(G_L), cell_n",
    '{"y": y, "s": G_S}',
    "G_L",
    "y, OBJ.t",
    "x",
    "None",
    "y.shape",
    "lst, cfg",
    "sz",
    "y, G_STR",
    "G_X",
    "y, G_D",
    "(y, x)",
    "MOD.buf",
    "G_T",
]

# Changes the test body makes between calls, as a user would (exec'd in the module namespace).
MUTATIONS = [
    "G_S = {f}",
    "G_S = {i}",
    "G_I = {i}",
    "G_I = {f}",
    "G_L.append({i})",
    "G_L.clear()",
    "G_L = [{i}, {f}]",
    "if G_L:\n    G_L[0] = {i}",
    'G_D["a"] = {f}',
    'G_D = {{"a": {f}, "b": 1}}',
    'G_D.pop("cnt", None)',
    "G_T.add_({f})",
    "G_T = torch.full((3,), {f})",
    "G_T = torch.zeros(4)",
    "OBJ.v = {f}",
    "OBJ.n = {i}",
    "OBJ.t = torch.ones(3) * {f}",
    "OBJ.t.mul_(2)",
    "OBJ.lst.clear()",
    "MOD.buf.fill_({f})",
    "MOD.scale = {f}",
    "MOD.calls = 0",
    "MOD.buf = torch.zeros(3)",
    "MOD.eval()",
    "Obj.CLS = {i}",
    "G_STR = 'm'",
    "OBJ.t = G_T",
    "MOD.cache = None",
    "with torch.no_grad():\n    MOD.w.mul_(2)",
    "if 'extra' in vars(OBJ):\n    del OBJ.extra",
    'set_cell("cell_n", {i})',
    'set_cell("cell_l", [])',
    "G_TL.append(torch.ones(2))",
    "G_TL[0].add_(1)",
    "if isinstance(G_X, torch.Tensor):\n    G_X.add_(1)",
    "if isinstance(G_Y, torch.Tensor):\n    G_Y.mul_(3)",
    "G_L.append(torch.tensor(2.0))",
    "OBJ.extra = {i}",
    'G_D["missing"] = {f}',
    "Obj.extra = {i}",
    "MOD.peer = Obj()\nMOD.peer.v = {f}\nMOD.peer.n = {i}\nMOD.peer.t = torch.ones(3)\nMOD.peer.lst = []",
    "G_ALIAS = MOD.peer",
    "G_ALIAS = OBJ",
    "Obj.bump = lambda self, v: {i}",
    "OBJ.bump = lambda v: {i}",
    "Obj.__len__ = lambda self: {i}",
    "Mod.bump = lambda self: {i}",
]

SHAPES = [(2,), (1, 2), (3, 2), (2, 3), (4,), (2, 2), (1,), (3,)]
DTYPES = ["float32", "float32", "float32", "float64"]

_ASSIGNED = re.compile(r"^\s*(G_[A-Z]+|cell_n)\s*(\+|-|\*)?=[^=]", re.M)


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


@dataclass
class Call:
    mutation: str  # exec'd in both namespaces before the call ("" for none)
    shape: tuple[int, ...]
    dtype: str
    k: int
    containers: str  # "fresh": lst and cfg are new per call; "global": they are G_L and G_D
    sz: tuple[int, ...]
    keywords: bool = False  # F(x, k=k, lst=lst, cfg=cfg, sz=sz) instead of positional


@dataclass
class Program:
    source: str
    calls: list[Call]
    cache: str | None
    recompile_limit: int | None

    def jit_kwargs(self) -> str:
        parts = ["reshape_inplace='warn'"]  # writes through reshapes: eager's side effects
        if self.cache is not None:
            parts.append(f"cache={self.cache!r}")
        if self.recompile_limit is not None:
            parts.append(f"recompile_limit={self.recompile_limit}")
        return ", ".join(parts)

    def reproducer(self) -> str:
        calls = ",\n    ".join(
            repr((c.mutation, c.shape, c.dtype, c.k, c.containers, c.sz, c.keywords))
            for c in self.calls
        )
        return f"""\
{repro_loader(self.source)}
def state(ns, args):
    F = ns["F"]
    cells = {{n: c.cell_contents for n, c in zip(F.__code__.co_freevars, F.__closure__ or ())}}
    mod = {{k: v for k, v in vars(ns["MOD"]).items() if not k.startswith("_")}}
    mod.update(buf=ns["MOD"].buf, w=ns["MOD"].w)
    g = {{n: ns[n] for n in {STATE_GLOBALS[:9]!r}}}
    return dict(globals=g, CLS=ns["Obj"].CLS, cells=cells, obj=vars(ns["OBJ"]), mod=mod,
                args=[a[:4] for a in args])

ns_e, ns_j = load("<eager>"), load("<thunder>")
jf = thunder.jit(ns_j["F"]{", " + self.jit_kwargs() if self.jit_kwargs() else ""})
in_e, in_j = [], []
CALLS = [
    {calls},
]
warnings.simplefilter("ignore")
for i, (mutation, shape, dtype, k, containers, sz, keywords) in enumerate(CALLS):
    exec(mutation, ns_e); exec(mutation, ns_j)
    def make(ns):
        x = (torch.arange(torch.Size(shape).numel(), dtype=getattr(torch, dtype))
             .reshape(shape) * 0.5 - 1 + i)
        if containers == "global":
            return (x, k, ns["G_L"], ns["G_D"], torch.Size(sz))
        return (x, k, [k, 1.0], {{"w": 2.0}}, torch.Size(sz))
    in_e.append(make(ns_e)); in_j.append(make(ns_j))
    for tag, fn, ns, inputs in (("eager", ns_e["F"], ns_e, in_e), ("thunder", jf, ns_j, in_j)):
        try:
            x, k, lst, cfg, sz = inputs[-1]
            out = fn(x, k=k, lst=lst, cfg=cfg, sz=sz) if keywords else fn(*inputs[-1])
        except Exception as e:
            out = f"raised {{type(e).__name__}}: {{e}}"
        print(f"call {{i}} {{tag:8}} out={{out}}\\n    state={{state(ns, inputs)}}")
"""


@st.composite
def programs(draw) -> Program:
    n_stmts = draw(st.integers(2, 8))
    stmts: list[str] = []
    for _ in range(n_stmts):
        # data-dependent statements are refused (ending the example): keep them rare
        pool = draw(st.sampled_from(["read"] * 10 + ["write"] * 12 + ["exception"] * 4 + ["data"]))
        options = {
            "read": READS,
            "write": WRITES,
            "exception": EXCEPTIONS,
            "data": DATA_DEPENDENT,
        }[pool]
        template = draw(st.sampled_from(options))
        c = draw(st.sampled_from(["1", "2", "0.5", "-1", "3"]))
        stmts.append(template.format(c=c))
    ret = draw(st.sampled_from(RETURNS))
    body_lines = "\n".join(stmts)
    declared_globals = sorted(
        {m.group(1) for m in _ASSIGNED.finditer(body_lines + "\n")} - {"cell_n"}
    )
    declared_globals = [g for g in declared_globals if g.startswith("G_")]
    decls = []
    if declared_globals:
        decls.append("global " + ", ".join(declared_globals))
    if re.search(r"^\s*cell_n\s*(\+|-|\*)?=[^=]", body_lines, re.M):
        decls.append("nonlocal cell_n")
    body = "\n".join([*decls, "y = x", *stmts, f"return {ret}"])
    forward = FORWARDS[draw(st.sampled_from(sorted(FORWARDS)))]
    source = PRELUDE.replace("{forward}", forward).replace("{body}", _indent(body, 8))

    n_calls = draw(st.integers(3, 6))
    calls = []
    for i in range(n_calls):
        mutation = ""
        if i > 0 and draw(st.booleans()):
            muts = draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=2))
            mutation = "\n".join(
                m.format(
                    i=draw(st.integers(-1, 5)), f=draw(st.sampled_from(["0.5", "-2.0", "3.0"]))
                )
                for m in muts
            )
        shape = draw(st.sampled_from(SHAPES)) if i == 0 or draw(st.booleans()) else calls[-1].shape
        dtype = draw(st.sampled_from(DTYPES))
        k = draw(st.sampled_from([0, 1, 2, 3, 4, 0, 1, 2, 3, 4, True, 2.5]))
        containers = draw(st.sampled_from(["fresh", "fresh", "global"]))
        sz = draw(st.sampled_from([(2,), (3,), (1, 2), (2, 1)]))
        calls.append(Call(mutation, shape, dtype, k, containers, sz, draw(st.booleans())))
    cache = draw(st.sampled_from([None] * 4 + ["symbolic values"] * 3 + ["no caching"]))
    limit = draw(st.sampled_from([None, None, 2, 1]))
    return Program(source, calls, cache, limit)


def _make_input(call: Call, i: int) -> torch.Tensor:
    n = torch.Size(call.shape).numel()
    return torch.arange(n, dtype=getattr(torch, call.dtype)).reshape(call.shape) * 0.5 - 1 + i


def _make_args(call: Call, i: int, ns: dict) -> tuple:
    if call.containers == "global":
        lst, cfg = ns["G_L"], ns["G_D"]
    else:
        lst, cfg = [call.k, 1.0], {"w": 2.0}
    return (_make_input(call, i), call.k, lst, cfg, torch.Size(call.sz))


def _state(ns: dict, inputs: list[tuple]) -> dict:
    F = ns["F"]
    cells = dict(zip(F.__code__.co_freevars, (c.cell_contents for c in F.__closure__ or ())))
    return {
        **{n: ns[n] for n in STATE_GLOBALS if n != "Obj"},
        "Obj.CLS": ns["Obj"].CLS,
        **{f"cell:{n}": v for n, v in cells.items()},
        "args": [(x, lst, cfg) for x, _, lst, cfg, _ in inputs],
    }


def _identities(result: object, ns: dict, inputs: list[tuple]) -> list[str]:
    """Which outside objects the returned value (or its items) *is* (containers, tensors)."""
    named = {n: ns[n] for n in STATE_GLOBALS}
    for i, (x, _, lst, cfg, _) in enumerate(inputs):
        named.update({f"x{i}": x, f"lst{i}": lst, f"cfg{i}": cfg})
    named["OBJ.t"], named["MOD.buf"] = ns["OBJ"].t, ns["MOD"].buf
    items = list(result) if isinstance(result, tuple) else [result]
    if isinstance(result, dict):
        items = list(result.values())
    out = []
    for item in items:
        if isinstance(item, (list, dict, torch.Tensor)):
            out.append(next((n for n, v in named.items() if v is item), "<new>"))
    return out


def _call(fn: object, args: tuple, keywords: bool) -> tuple[str, object]:
    if keywords:
        x, k, lst, cfg, sz = args
        return quiet_call(fn, x, k=k, lst=lst, cfg=cfg, sz=sz)
    return quiet_call(fn, *args)


def run_program(program: Program) -> None:
    check = Differential("state", program)
    log = check.log
    log.add(f"jit options: {program.jit_kwargs() or '(defaults)'}")
    ns_e = exec_source(program.source, "fuzz_state_eager")
    ns_j = exec_source(program.source, "fuzz_state_thunder")
    kwargs: dict[str, object] = {"reshape_inplace": "warn"}
    if program.cache is not None:
        kwargs["cache"] = program.cache
    if program.recompile_limit is not None:
        kwargs["recompile_limit"] = program.recompile_limit
    jf = thunder.jit(ns_j["F"], **kwargs)
    inputs_e: list[tuple] = []
    inputs_j: list[tuple] = []

    for i, call in enumerate(program.calls):
        if call.mutation:
            exec(call.mutation, ns_e)
            exec(call.mutation, ns_j)
            log.add(f"outside change before call {i}: {call.mutation!r}")
        inputs_e.append(_make_args(call, i, ns_e))
        inputs_j.append(_make_args(call, i, ns_j))
        x, k, lst, cfg, sz = inputs_e[-1]
        log.add(
            f"call {i}: F(x of shape {call.shape} {call.dtype}, k={k}, lst={lst!r}, "
            f"cfg={cfg!r}, sz={sz!r})  [containers: {call.containers}]"
        )
        before_j = snapshot(_state(ns_j, inputs_j))
        kind_e, res_e = _call(ns_e["F"], inputs_e[-1], call.keywords)
        kind_j, res_j = _call(jf, inputs_j[-1], call.keywords)
        after_e = snapshot(_state(ns_e, inputs_e))
        after_j = snapshot(_state(ns_j, inputs_j))
        kind = check.outcomes(
            i,
            (kind_e, res_e),
            (kind_j, res_j),
            lambda: diff(before_j, after_j),
            "after changing state",
        )
        if kind is None:
            return
        if kind == "ok":
            check.results(i, res_e, res_j, strides=False)
            ids_e = _identities(res_e, ns_e, inputs_e)
            ids_j = _identities(res_j, ns_j, inputs_j)
            if ids_e != ids_j:
                check.fail(
                    f"call {i}: result identity differs: eager is {ids_e}, thunder is {ids_j}"
                )
        check.fail_on(diff(after_e, after_j, "state"), f"call {i}: state after the call differs")


@fuzz_settings(share=0.6)
@given(programs())
def test_fuzz_outside_state(program: Program) -> None:
    check_example("state", run_program, program)


# -- modules: thunder.jit(module) with state on self ---------------------------------------------

MODULE_PRELUDE = """\
import torch

G_S = 2.0


class Sub(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.ones(3))
        self.calls = 0

    def forward(self, y):
        self.calls += 1
        self.buf.mul_(0.5)
        return y + self.buf.sum()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)
        self.sub = Sub()
        self.register_buffer("buf", torch.zeros(3))
        self.register_buffer("steps", torch.tensor(0))
        self.scale = 1.5
        self.count = 0
        self.flag = False
        self.hist = []
        self.cfg = {{"w": 1.0}}
        self.last = None

    def forward(self, x, k):
{body}


NET = Net()
"""

MODULE_STMTS = [
    "y = y * self.scale",
    "self.scale = self.scale + {c}",
    "self.count += 1",
    "y = y + self.count",
    "self.buf.add_(y.sum())",
    "y = y + self.buf.sum()",
    "self.buf.copy_(self.buf * 0.9 + y.mean() * 0.1)",
    "self.steps += 1",
    "y = y + self.steps",
    "self.hist.append(k)",
    "self.hist.append(y.sum())",
    "y = y + len(self.hist)",
    "if self.hist:\n    self.hist.pop()",
    'self.cfg["n"] = self.cfg.get("n", 0) + 1',
    'y = y * self.cfg.get("w", 1.0)',
    "if self.training:\n    y = y * 2\nelse:\n    y = y - 1",
    "y = self.lin(y.unsqueeze(-1)).squeeze(-1)",
    "y = self.sub(y)",
    "self.sub.buf.add_(1)",
    "y = y + self.sub.calls",
    "self.last = y",
    "self.last = y.detach()",
    "with torch.no_grad():\n    self.lin.weight.mul_(0.9)",
    "self.flag = not self.flag",
    "if self.flag:\n    y = -y",
    "y = y + G_S",
    "y = y * k",
    # p=0: the training flag path without comparing random masks (thunder's dropout draws its
    # mask differently from eager's, so masks differ under the same seed)
    "y = torch.nn.functional.dropout(y, 0.0, self.training)",
    'if k == 3:\n    raise ValueError("boom")',
    "self.lin.weight.requires_grad_(False)",
    'setattr(self, "dyn", k)',
    'y = y + getattr(self, "dyn", 0)',
]

MODULE_RETURNS = ["y", "y, self.count", "y, self.buf", "(y, self.hist)", "y.sum()", "self.last"]

MODULE_MUTATIONS = [
    "NET.scale = {f}",
    "NET.train()",
    "NET.eval()",
    "NET.flag = True",
    "NET.hist.clear()",
    "NET.buf.fill_({f})",
    'NET.cfg["w"] = {f}',
    "with torch.no_grad():\n    NET.lin.weight.fill_({f})",
    "NET.sub.buf.zero_()",
    "NET.count = 0",
    "G_S = {f}",
    "NET.lin.weight.requires_grad_(True)",
    "NET.hist = [1]",
    "NET.dyn = {f}",
    "if hasattr(NET, 'dyn'):\n    del NET.dyn",
]


@dataclass
class ModuleProgram:
    source: str
    calls: list[tuple]  # (mutation, shape, k)
    seed: int

    def reproducer(self) -> str:
        return f"""\
{repro_loader(self.source)}
torch.manual_seed({self.seed}); ns_e = load("<eager>")
torch.manual_seed({self.seed}); ns_j = load("<thunder>")
jm = thunder.jit(ns_j["NET"], reshape_inplace="warn")
warnings.simplefilter("ignore")
for i, (mutation, shape, k) in enumerate({self.calls!r}):
    exec(mutation, ns_e); exec(mutation, ns_j)
    for tag, fn, ns in (("eager", ns_e["NET"], ns_e), ("thunder", jm, ns_j)):
        torch.manual_seed({self.seed} + i)
        x = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape) - 1 + i
        try:
            out = fn(x, k)
        except Exception as e:
            out = f"raised {{type(e).__name__}}: {{e}}"
        net = ns["NET"]
        print(f"call {{i}} {{tag:8}} out={{out}}\\n    state={{net.state_dict()}} "
              f"{{ {{k: v for k, v in vars(net).items() if not k.startswith('_')}} }}")
"""


@st.composite
def module_programs(draw) -> ModuleProgram:
    stmts = []
    for _ in range(draw(st.integers(2, 8))):
        template = draw(st.sampled_from(MODULE_STMTS))
        stmts.append(template.format(c=draw(st.sampled_from(["1", "0.5", "-1"]))))
    body = "\n".join(["y = x", *stmts, f"return {draw(st.sampled_from(MODULE_RETURNS))}"])
    source = MODULE_PRELUDE.format(body=_indent(body, 8))
    calls = []
    for i in range(draw(st.integers(3, 6))):
        mutation = ""
        if i > 0 and draw(st.booleans()):
            mutation = draw(st.sampled_from(MODULE_MUTATIONS)).format(
                f=draw(st.sampled_from(["0.5", "-2.0", "3.0"]))
            )
        shape = draw(st.sampled_from(SHAPES)) if i == 0 or draw(st.booleans()) else calls[-1][1]
        calls.append((mutation, shape, draw(st.integers(0, 4))))
    return ModuleProgram(source, calls, draw(st.integers(0, 3)))


def _module_grads(out: object, net: torch.nn.Module) -> dict[str, torch.Tensor | None] | None:
    """d(sum of every output that requires grad)/d(each parameter); None when none does."""
    outs = out if isinstance(out, tuple) else (out,)
    parts = [o.sum() for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    params = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    if not parts or not params:
        return None
    grads = torch.autograd.grad(sum(parts), [p for _, p in params], allow_unused=True)
    return {n: g for (n, _), g in zip(params, grads, strict=True)}


def run_module_program(program: ModuleProgram) -> None:
    torch.manual_seed(program.seed)  # the same initial parameters for both copies
    ns_e = exec_source(program.source, "fuzz_module_eager")
    torch.manual_seed(program.seed)
    ns_j = exec_source(program.source, "fuzz_module_thunder")
    net_e, net_j = ns_e["NET"], ns_j["NET"]
    jm = thunder.jit(net_j, reshape_inplace="warn")
    check = Differential("module", program)
    log = check.log

    def state(ns: dict) -> object:
        return snapshot({"NET": ns["NET"], "G_S": ns["G_S"]})

    for i, (mutation, shape, k) in enumerate(program.calls):
        if mutation:
            exec(mutation, ns_e)
            exec(mutation, ns_j)
            log.add(f"outside change before call {i}: {mutation!r}")
        n = torch.Size(shape).numel()
        x = torch.arange(n, dtype=torch.float32).reshape(shape) - 1 + i
        log.add(f"call {i}: NET(x of shape {shape}, k={k})")
        before_j = state(ns_j)
        torch.manual_seed(program.seed + i)
        kind_e, res_e = quiet_call(net_e, x.clone(), k)
        torch.manual_seed(program.seed + i)
        kind_j, res_j = quiet_call(jm, x.clone(), k)
        kind = check.outcomes(
            i,
            (kind_e, res_e),
            (kind_j, res_j),
            lambda: diff(before_j, state(ns_j)),
            "after changing state",
        )
        if kind is None:
            return
        if kind == "ok":
            check.results(i, res_e, res_j, strides=False)
            check.grads(
                i, _module_grads, (res_e, net_e), (res_j, net_j), "grad", "parameter gradients"
            )
        check.fail_on(
            diff(state(ns_e), state(ns_j), "state"),
            f"call {i}: module state after the call differs",
        )


@fuzz_settings(share=0.4)
@given(module_programs())
def test_fuzz_module_state(program: ModuleProgram) -> None:
    check_example("module", run_module_program, program)
