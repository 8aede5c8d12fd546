"""The torch and Python surface libraries use inside forward, compared with eager on fresh
random inputs: context variables set and reset in the call, ``is_compiling``, ``torch.tensor``
from Python values, copies of configs, objects built and returned, buffers assigned."""

from __future__ import annotations

import contextvars
import copy
import dataclasses
from collections import OrderedDict, namedtuple
from typing import Any

import pytest
import torch
from runs_by_torch import call_split

import thunder

_VAR: contextvars.ContextVar[Any] = contextvars.ContextVar("collector", default=None)


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


# -- context variables ----------------------------------------------------------------------------


def test_context_var_set_and_reset_within_the_call() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        token = _VAR.set({"scale": 3.0})
        try:
            y = x * _VAR.get()["scale"]
            inner = _VAR.set(None)
            assert _VAR.get() is None
            _VAR.reset(inner)
            return y + _VAR.get()["scale"]
        finally:
            _VAR.reset(token)

    j = thunder.jit(f)
    for _ in range(2):
        x = _x(4)
        torch.testing.assert_close(j(x), f(x))
        assert _VAR.get() is None


def test_context_var_left_set_runs_split() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        _VAR.set(1)
        return x + 1

    try:
        x = _x(3)
        out = call_split(thunder.jit(f), x, match="ContextVar collector")
        torch.testing.assert_close(out, x + 1)
        assert _VAR.get() == 1  # set once, by torch's run, as eager leaves it
    finally:
        _VAR.set(None)


def test_context_var_read_from_outside_is_guarded() -> None:
    # (tests/thunder/test_context_vars.py covers such reads in depth)
    def f(x: torch.Tensor) -> torch.Tensor:
        return x + (_VAR.get() or 0)

    jf, x = thunder.jit(f), _x(3)
    torch.testing.assert_close(jf(x), x)
    token = _VAR.set(2)
    try:  # read on every call, as eager
        torch.testing.assert_close(jf(x), x + 2)
    finally:
        _VAR.reset(token)
    torch.testing.assert_close(jf(x), x)
    assert thunder.compile_stats(jf).split_calls == 0


def test_context_var_token_misuse_raises_like_eager() -> None:
    other: contextvars.ContextVar[int] = contextvars.ContextVar("other")

    def f(x: torch.Tensor) -> torch.Tensor:
        token = _VAR.set(1)
        try:
            other.reset(token)
        except ValueError:
            x = x + 1
        _VAR.reset(token)
        return x

    x = _x(3)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


# -- queries libraries ask -------------------------------------------------------------------------


def test_is_compiling_is_true_while_tracing() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return x * 2
        return x * 3

    x = _x(4)
    torch.testing.assert_close(thunder.jit(f)(x), x * 2)
    assert not torch.compiler.is_compiling()


def test_tracing_queries_answer() -> None:
    def f(x: torch.Tensor) -> Any:
        return x + 1, torch._C._is_tracing(), torch.jit.is_scripting(), torch.jit.is_tracing()

    x = _x(2)
    out = thunder.jit(f)(x)
    assert out[1:] == (False, False, False)


# -- tensors from Python values ----------------------------------------------------------------------


def test_tensor_from_python_values_matches_eager() -> None:
    def f(x: torch.Tensor) -> Any:
        n = x.shape[0]
        return (
            torch.tensor([[1, 2], [3, n]]) * x.shape[1],
            torch.tensor([], dtype=x.dtype, device=x.device),
            torch.tensor(n, dtype=torch.long),
            torch.tensor([True, False]),
            torch.tensor([1, 2.5]),
            torch.tensor(3.5) + x,
            torch.tensor([[0.5]], dtype=torch.float64),
            x.new_tensor([1.5, 2.5]) * x[0, :2],
            x.new_tensor([1, 2], dtype=torch.int32),
            torch.as_tensor([3, 4], dtype=torch.float64),
            torch.as_tensor(x) is x,
            torch.as_tensor(x, dtype=torch.float64),
            torch.tensor(True),
            torch.tensor(-1, dtype=torch.uint8),
            torch.tensor(n + 4090, dtype=torch.int16),
            torch.tensor(1e300),  # out of float32's range: inf, as eager makes it
            torch.tensor([[[1.5], [2.5]]], dtype=torch.float64),
            torch.tensor([[], []]),
        )

    j = thunder.jit(f)
    for shape in ((3, 4), (3, 4), (5, 2)):
        x = _x(*shape)
        for actual, expected in zip(j(x), f(x)):
            if isinstance(expected, bool):
                assert actual is expected
            else:
                torch.testing.assert_close(actual, expected)
                assert actual.dtype == expected.dtype
                assert actual._is_view() == expected._is_view()


def test_tensor_from_ragged_data_raises_like_eager() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.tensor([[1, 2], [3]]) + x

    with pytest.raises(ValueError, match="expected sequence of length 2 at dim 1"):
        thunder.jit(f)(_x(2))


def test_tensor_from_symbolic_numbers() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.sum() + torch.tensor([x.shape[0], x.shape[1] * 2])

    j = thunder.jit(f, cache="symbolic values")
    for shape in ((2, 3), (4, 5)):
        x = _x(*shape)
        torch.testing.assert_close(j(x), f(x))


# -- copies of configs ------------------------------------------------------------------------------


class Config:
    def __init__(self) -> None:
        self.scale = 2.0
        self.names = {"a": 1}
        self.layers = [1, 2]


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.config = Config()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        config = copy.deepcopy(self.config)
        config.scale += 1
        shallow = copy.copy(self.config)
        return self.lin(x) * config.scale + shallow.scale + len(config.layers)


def test_deepcopy_of_outside_config_rechecks_its_state() -> None:
    m = Model()
    j = thunder.jit(m)
    x = _x(2, 4)
    torch.testing.assert_close(j(x), m(x))
    assert m.config.scale == 2.0  # the copy was changed, not the config
    m.config.scale = 5.0
    torch.testing.assert_close(j(x), m(x))  # no stale value
    m.config.layers.append(3)
    torch.testing.assert_close(j(x), m(x))
    assert thunder.cache_misses(j) == 3


def test_copy_of_the_programs_own_objects_is_interpreted() -> None:
    def f(x: torch.Tensor) -> Any:
        d = {"t": x * 2, "n": [1, 2]}
        e = copy.copy(d)
        e["n"] = e["n"] + [3]
        c = copy.deepcopy({"k": [1, 2]})
        c["k"].append(3)
        return e["t"] + len(e["n"]) + len(d["n"]) + len(c["k"])

    x = _x(3)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


# -- objects built and returned ----------------------------------------------------------------------


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    loss: torch.Tensor | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


Pair = namedtuple("Pair", ["first", "second"])


class Box:
    def __init__(self, value: torch.Tensor, tag: str) -> None:
        self.value = value
        self.tag = tag


class OrderedOutput(OrderedDict):  # type: ignore[type-arg]
    """Like transformers' ModelOutput: a dict subclass whose items are also attributes."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        object.__setattr__(self, key, value)


def _returns_objects(x: torch.Tensor) -> Any:
    out = OrderedOutput()
    out["hidden"] = x * 3
    return (
        Output(x + 1, None, {"h": x * 2, "n": 3}),
        Pair(x.sum(), Box(x - 1, "b")),
        out,
        x.dtype,
    )


def test_returned_objects_are_rebuilt_with_new_tensors() -> None:
    j = thunder.jit(_returns_objects)
    results = []
    for _ in range(2):
        x = _x(3)
        actual, expected = j(x), _returns_objects(x)
        results.append(actual)
        assert type(actual[0]) is Output and type(actual[1]) is Pair
        torch.testing.assert_close(actual[0].logits, expected[0].logits)
        assert actual[0].loss is None
        torch.testing.assert_close(actual[0].extra["h"], expected[0].extra["h"])
        assert actual[0].extra["n"] == 3
        torch.testing.assert_close(actual[1].first, expected[1].first)
        assert type(actual[1].second) is Box and actual[1].second.tag == "b"
        torch.testing.assert_close(actual[1].second.value, expected[1].second.value)
        assert type(actual[2]) is OrderedOutput and list(actual[2]) == ["hidden"]
        torch.testing.assert_close(actual[2].hidden, expected[2]["hidden"])
        assert actual[3] is torch.float32
    assert results[0][0] is not results[1][0]  # a fresh object on every call
    assert thunder.cache_hits(j) == 1


def test_returned_object_with_a_cycle_runs_split() -> None:
    def f(x: torch.Tensor) -> Any:
        b = Box(x + 1, "a")
        b.me = b  # type: ignore[attr-defined]
        return b

    x = _x(2)
    b = call_split(thunder.jit(f), x, match="Box")
    assert b.me is b and b.tag == "a"
    torch.testing.assert_close(b.value, x + 1)


def test_object_stored_into_outside_state_is_rebuilt() -> None:
    holder: dict[str, Any] = {}

    def f(x: torch.Tensor) -> torch.Tensor:
        holder["last"] = Box(x * 2, "t")
        return x + 1

    j = thunder.jit(f)
    for _ in range(2):
        x = _x(3)
        j(x)
        torch.testing.assert_close(holder["last"].value, x * 2)


CONSTRUCTED: list[str] = []


class Reduced:
    """Its copy protocol calls the class again, and its ``__init__`` writes outside."""

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value
        CONSTRUCTED.append("init")

    def __reduce__(self) -> Any:
        return (Reduced, (self.value,))


class Counted:
    """Its ``__new__`` writes outside."""

    made = 0

    def __new__(cls) -> Any:
        cls.made += 1
        return super().__new__(cls)


class Doubling(dict):  # type: ignore[type-arg]
    """A ``__setitem__`` that changes what it stores."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value * 2 if isinstance(value, int) else value)


class Appending(list):  # type: ignore[type-arg]
    def extend(self, values: Any) -> None:
        CONSTRUCTED.append("extend")
        super().extend(values)


class Reordered(OrderedDict):  # type: ignore[type-arg]
    pass


def _builds_objects_whose_construction_writes_outside(x: torch.Tensor) -> Any:
    counted = Counted()
    counted.value = x - 1  # type: ignore[attr-defined]
    return Reduced(x + 1), counted


def _builds_containers_with_methods_of_their_own(x: torch.Tensor) -> Any:
    d = Doubling()
    d["n"] = 3
    d["t"] = x * 2
    r = Reordered()
    r["b"] = x * 4
    r["a"] = 1
    r.move_to_end("b")
    return d, Appending([x + 2]), r


def test_returned_objects_are_rebuilt_without_running_their_code_again() -> None:
    """The epilogue gives each object the state it had, as eager returns it: its ``__init__``,
    ``__new__``, ``__setitem__`` or ``extend`` ran once while the program ran, and what they did
    outside happens once per call (it happened twice, and ``Doubling`` stored 12)."""
    CONSTRUCTED.clear()
    Counted.made = 0
    j = thunder.jit(_builds_objects_whose_construction_writes_outside)
    for call in range(1, 4):
        x = _x(3)
        reduced, counted = j(x)
        assert CONSTRUCTED == ["init"] * call and Counted.made == call
        assert type(reduced) is Reduced and type(counted) is Counted
        torch.testing.assert_close(reduced.value, x + 1)
        torch.testing.assert_close(counted.value, x - 1)
    _builds_objects_whose_construction_writes_outside(_x(3))
    assert CONSTRUCTED == ["init"] * 4 and Counted.made == 4

    CONSTRUCTED.clear()
    j = thunder.jit(_builds_containers_with_methods_of_their_own)
    for _ in range(3):
        x = _x(3)
        d, a, r = j(x)
        assert type(d) is Doubling and d["n"] == 6 and list(d) == ["n", "t"]
        torch.testing.assert_close(d["t"], x * 2)
        assert type(a) is Appending and len(a) == 1
        torch.testing.assert_close(a[0], x + 2)
        assert type(r) is Reordered and list(r) == ["a", "b"] and r["a"] == 1
        torch.testing.assert_close(r["b"], x * 4)
    assert CONSTRUCTED == [] and thunder.cache_hits(j) == 2


def _shares_objects(x: torch.Tensor) -> Any:
    cache = Box(x * 2, "cache")
    out = OrderedOutput()
    out["cache"] = cache  # an item and an attribute: one object, as a ModelOutput holds it
    out["logits"] = x + 1
    layers = [cache, x - 1]
    return out, layers, {"layers": layers, "again": layers}, cache


def _same_sharing(actual: Any, expected: Any) -> None:
    """Which parts of ``actual`` are one object is what it is in ``expected``."""
    a_out, a_layers, a_dict, a_cache = actual
    e_out, e_layers, e_dict, e_cache = expected
    assert (a_out["cache"] is a_out.cache) == (e_out["cache"] is e_out.cache) is True
    assert (a_out.cache is a_cache) == (e_out.cache is e_cache) is True
    assert (a_layers[0] is a_cache) == (e_layers[0] is e_cache) is True
    assert (a_dict["layers"] is a_layers) == (e_dict["layers"] is e_layers) is True
    assert (a_dict["again"] is a_dict["layers"]) == (e_dict["again"] is e_dict["layers"])


def test_objects_the_result_holds_twice_are_one_object() -> None:
    j = thunder.jit(_shares_objects)
    for _ in range(2):
        x = _x(3)
        actual, expected = j(x), _shares_objects(x)
        _same_sharing(actual, expected)
        torch.testing.assert_close(actual[3].value, expected[3].value)
        torch.testing.assert_close(actual[0].logits, expected[0].logits)
        actual[3].value = None  # what the caller does to one is seen through the others
        assert actual[0].cache.value is None and actual[1][0].value is None
    assert thunder.cache_hits(j) == 1


class _Keeper(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> Any:
        box = Box(self.lin(x), "kept")
        self.kept = box
        box.extra = x * 3  # type: ignore[attr-defined]  # stored first, then changed
        box.tag = "changed"
        self.history = [box]
        return box


def test_object_changed_after_it_is_stored_outside_is_stored_as_it_ends() -> None:
    m, e = _Keeper(), _Keeper()
    e.load_state_dict(m.state_dict())
    j = thunder.jit(m)
    for _ in range(2):
        x = _x(2, 3)
        actual, expected = j(x), e(x)
        assert m.kept is actual and m.history[0] is actual
        assert e.kept is expected and e.history[0] is expected
        assert vars(m.kept).keys() == vars(e.kept).keys()
        assert m.kept.tag == e.kept.tag == "changed"
        torch.testing.assert_close(m.kept.extra, e.kept.extra)  # type: ignore[attr-defined]
        torch.testing.assert_close(m.kept.value, e.kept.value)
    assert thunder.cache_hits(j) == 1


def test_object_changed_after_it_is_stored_where_no_path_leads_runs_split() -> None:
    seen: set[Any] = set()

    def f(x: torch.Tensor) -> torch.Tensor:
        box = Box(x + 1, "a")
        seen.add(box)
        box.tag = "b"
        return x * 2

    x = _x(2)
    torch.testing.assert_close(call_split(thunder.jit(f), x, match="Box"), x * 2)
    (box,) = seen  # stored once, by torch's run, and changed after it, as eager
    assert box.tag == "b"


# -- buffers assigned in forward ------------------------------------------------------------------------


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps = self.steps + 1
        return self.lin(x) * self.steps


@pytest.mark.parametrize("grad", [False, True])
def test_buffer_assigned_in_forward_is_replayed(grad: bool) -> None:
    m, e = Counter(), Counter()
    e.load_state_dict(m.state_dict())
    j = thunder.jit(m)
    for _ in range(3):
        x = _x(2, 4)
        with torch.set_grad_enabled(grad):
            torch.testing.assert_close(j(x), e(x))
    torch.testing.assert_close(m.steps, e.steps)
    assert "steps" in dict(m.named_buffers())
    assert thunder.cache_misses(j) == 1


def test_hooks_registered_after_the_first_call_recompile() -> None:
    m = torch.nn.Linear(4, 4)
    j = thunder.jit(m)
    x = _x(2, 4)
    torch.testing.assert_close(j(x), m(x))
    handle = m.register_forward_hook(lambda mod, args, out: out * 2)
    torch.testing.assert_close(j(x), m(x))
    handle.remove()
    pre = m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    torch.testing.assert_close(j(x), m(x))
    pre.remove()
    torch.testing.assert_close(j(x), m(x))


class TwiceCounter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.tensor(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        self.steps = self.steps + 1
        return x * self.steps


def test_buffer_stored_twice_in_one_call() -> None:
    m, e = TwiceCounter(), TwiceCounter()
    j = thunder.jit(m)
    for _ in range(2):
        x = _x(3)
        torch.testing.assert_close(j(x), e(x))
    torch.testing.assert_close(m.steps, e.steps)


# -- Tensor.requires_grad_ inside the program ------------------------------------------------


def test_requires_grad_on_a_computed_tensor_gives_eagers_gradients() -> None:
    """transformers' gradient checkpointing calls ``requires_grad_(True)`` on the embeddings'
    output (a forward hook), which requires grad already when the embeddings train and does
    not when they are frozen (adapters): the gradients are eager's either way."""
    emb = torch.nn.Embedding(10, 6)
    head = torch.nn.Linear(6, 3)

    def fn(ids: torch.Tensor) -> torch.Tensor:
        h = emb(ids)
        h.requires_grad_(True)
        return head(h.tanh()).pow(2).sum()

    jitted = thunder.jit(fn)
    for frozen in (False, True):
        emb.weight.requires_grad_(not frozen)
        ids = torch.randint(0, 10, (2, 5))
        params = [p for p in (emb.weight, head.weight, head.bias) if p.requires_grad]
        eager = torch.autograd.grad(fn(ids), params)
        got = torch.autograd.grad(jitted(ids), params)
        for g, e in zip(got, eager):
            torch.testing.assert_close(g, e)
    with torch.no_grad():  # a computed tensor without grad in a no-grad region
        ids = torch.randint(0, 10, (2, 5))
        torch.testing.assert_close(jitted(ids), fn(ids))
    emb.weight.requires_grad_(True)


def test_requires_grad_that_would_change_a_callers_tensor_or_unflag_one_runs_split() -> None:
    def flag_input(x: torch.Tensor) -> torch.Tensor:
        return x.requires_grad_(True) * 2

    def unflag(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).requires_grad_(False)

    x = torch.randn(3)
    out = call_split(thunder.jit(flag_input), x, match="tensor passed in")
    assert x.requires_grad and out.requires_grad  # torch's run flags the caller's tensor
    torch.testing.assert_close(out, x * 2)
    with pytest.raises(RuntimeError, match="detach"):  # eager's own error
        thunder.jit(unflag)(torch.randn(3, requires_grad=True))
    w = torch.randn(3, requires_grad=True)
    torch.testing.assert_close(thunder.jit(flag_input)(w), w * 2)  # already so: nothing to do


# -- objects holding tensors passed as arguments --------------------------------------------


@dataclasses.dataclass
class Encoded(OrderedDict):  # the shape of transformers' ModelOutput: a dataclass and a dict
    last_hidden_state: torch.Tensor | None = None
    extra: tuple[torch.Tensor, ...] | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                self[f.name] = value


@dataclasses.dataclass
class Batch:
    ids: torch.Tensor
    scale: float = 2.0


def test_an_object_holding_tensors_passed_in_is_read_through_its_items_and_fields() -> None:
    def fn(enc: Encoded, batch: Batch) -> torch.Tensor:
        first = dict(enc.items())["last_hidden_state"]  # read through C, not an attribute
        (extra,) = enc.extra if enc.extra is not None else (first,)
        return (first + extra.sum(0)) * batch.scale + batch.ids.float().mean()

    jitted = thunder.jit(fn)
    for n in (3, 3, 5):  # a new size is a new program (the tensors inside are checked)
        enc = Encoded(torch.randn(n, 4), (torch.randn(2, 4),))
        batch = Batch(torch.randint(0, 9, (n,)), scale=float(n))
        torch.testing.assert_close(jitted(enc, batch), fn(enc, batch))
    assert thunder.compile_stats(jitted).compilations == 2  # n=3 (twice), then n=5
    assert thunder.compile_stats(jitted).eager_fallbacks == 0


def test_writes_to_an_object_argument_reach_the_callers_object() -> None:
    def fn(batch: Batch) -> torch.Tensor:
        batch.scale = batch.scale + 1.0
        out = batch.ids * 2
        batch.ids = out  # the caller's object holds the computed tensor afterwards, as in eager
        return out

    jitted = thunder.jit(fn)
    batch, expected = Batch(torch.arange(3)), Batch(torch.arange(3))
    for _ in range(2):
        got, want = jitted(batch), fn(expected)
        torch.testing.assert_close(got, want)
        assert batch.scale == expected.scale
        torch.testing.assert_close(batch.ids, expected.ids)
        assert batch.ids is got


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_and_min_over_a_dim_return_torchs_named_result(op: str) -> None:
    """``x.max(dim).values`` (GPT-OSS's router): the result is a ``torch.return_types`` value,
    with ``.values`` and ``.indices``, whether read inside the program or returned."""

    def f(x):
        r = getattr(x, op)(dim=-1, keepdim=True)
        full = getattr(torch, op)(x, 0)
        return x - r.values, r.indices, full, type(full).__name__, full.indices.sum()

    x = torch.randn(4, 6, requires_grad=True)
    jf = thunder.jit(f)
    got, want = jf(x), f(x)
    assert type(got[2]) is type(want[2]) and got[3] == want[3] == op
    for g, w in zip((got[0], got[1], *got[2], got[4]), (want[0], want[1], *want[2], want[4])):
        assert torch.equal(g, w)
    got[0].sum().backward()
    grad, x.grad = x.grad, None
    want[0].sum().backward()
    assert torch.equal(grad, x.grad)


def test_tensor_layout_and_storage_queries_answer_as_eager() -> None:
    """SigLIP asks ``x.is_nested``; others ``is_sparse``, ``layout``, ``nbytes``. A traced tensor
    is dense and strided (other layouts are refused), so these answer without refusal."""

    def f(x):
        flags = (x.is_nested, x.is_sparse, x.is_sparse_csr, x.is_quantized, x.is_mkldnn)
        devices = (x.is_meta, x.is_cpu, x.is_xpu, x.is_mps)
        return x * x.nbytes / x.itemsize, flags, devices, x.layout, torch.zeros(2, layout=x.layout)

    x = torch.randn(3, 5, dtype=torch.float64)
    jf = thunder.jit(f)
    for _ in range(2):  # the second call rebuilds the returned constants
        got, want = jf(x), f(x)
        assert torch.equal(got[0], want[0]) and got[1:4] == want[1:4]
        assert torch.equal(got[4], want[4])


def test_a_sparse_tensor_runs_split_and_never_runs_a_dense_program() -> None:
    def f(x):
        return (x * 2).sum(0)

    jf = thunder.jit(f)
    dense = torch.randn(3, 4).relu()
    torch.testing.assert_close(jf(dense), f(dense))
    sparse = dense.to_sparse()  # the dense program's key does not match: traced; torch runs it
    got = call_split(jf, sparse, match=r"layout torch.sparse_coo .*\.to_dense\(\)")
    torch.testing.assert_close(got.to_dense(), f(sparse).to_dense())
    assert thunder.compile_stats(jf).compilations == 1


def test_a_list_or_tuple_the_result_holds_twice_is_one_object() -> None:
    """XLNet's output holds its ``mems`` tuple as an item and as an attribute; a program may
    return one list in two places (what the caller appends to one, the other shows). The
    result holds one object twice too, and two equal ones stay two."""

    def f(x):
        mems = (x * 2, x + 1)
        other = (x * 2, x + 1)
        seen = [x - 1]
        return {"mems": mems, "again": mems, "other": other, "nested": [mems, (mems,)]}, seen, seen

    j = thunder.jit(f)
    for _ in range(2):
        x = _x(3)
        (got, seen, seen_again), (want, _, _) = j(x), f(x)
        assert got["mems"] is got["again"] is got["nested"][0] is got["nested"][1][0]
        assert got["other"] is not got["mems"] and seen is seen_again
        for a, b in zip(got["mems"] + got["other"], want["mems"] + want["other"]):
            torch.testing.assert_close(a, b)


def _fails_on_the_compile_path(x):
    if torch.compiler.is_compiling():
        return x.view(7)  # a library's bug on its torch.compile path only
    return x * 2


def test_a_trace_that_fails_where_eager_runs_warns_with_the_line() -> None:
    """Tracing takes libraries' torch.compile paths; where such a path raises and eager does
    not, the call runs eagerly and the warning names the line that raised."""
    x = _x(4)
    line = _fails_on_the_compile_path.__code__.co_firstlineno + 2
    with pytest.warns(UserWarning, match=rf"test_library_surface.py:{line}; the call ran eagerly"):
        got = thunder.jit(_fails_on_the_compile_path)(x)
    torch.testing.assert_close(got, x * 2)
