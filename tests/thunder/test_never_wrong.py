"""Regression tests for silent mismatches found by comparing thunder.jit with eager PyTorch: each
program's outputs and all the state it touches must equal eager's after every call, or the call
must raise a clear error before changing anything."""

from __future__ import annotations

import collections
import copy
import enum
import warnings
from typing import Any

import pytest
import torch
from runs_by_torch import call_split

import thunder

G_LOG: list[torch.Tensor] = []
G_LL: list[list[int]] = []
G_D: dict[str, object] = {}
G_L: list[int] = []
G_W: dict[str, torch.Tensor] = {}


def _log_sum(y):
    G_LOG.append(y.sum())
    return y * 2


def test_global_list_append_survives_a_recompile():
    G_LOG.clear()
    jf = thunder.jit(_log_sum)
    shapes = [(2,), (1, 2), (1, 2), (3,), (2,)]
    for shape in shapes:
        x = torch.randn(shape)
        torch.testing.assert_close(jf(x), x * 2)
        torch.testing.assert_close(G_LOG[-1], x.sum())
    assert len(G_LOG) == len(shapes)
    # Every call finds a longer list, only appended to: its type is guarded, not its contents
    # (a truth test or ``len`` of it would guard them), so one program per shape.
    assert thunder.compile_stats(jf).compilations == len(set(shapes))


G_SEEN: list[int] = []


def _add_if_seen(x):
    if G_SEEN:  # a truth test: no call the binder sees
        x = x + 1
    G_SEEN.append(1)
    return x


def test_list_tested_then_appended_is_guarded_by_its_entry_contents():
    G_SEEN.clear()
    jf = thunder.jit(_add_if_seen)
    expected = [0.0, 1.0, 1.0]
    for want in expected:
        torch.testing.assert_close(jf(torch.zeros(1)), torch.full((1,), want))
    assert G_SEEN == [1, 1, 1]


class _History(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hist: list[torch.Tensor] = []

    def forward(self, x):
        y = x + len(self.hist)
        self.hist.append(y.sum())
        return y


def test_tensor_list_read_then_appended_matches_eager():
    eager, jitted = _History(), _History()
    jm = thunder.jit(jitted)
    for _ in range(4):
        x = torch.randn(2)
        torch.testing.assert_close(jm(x), eager(x))
    assert len(jitted.hist) == len(eager.hist) == 4
    for a, b in zip(jitted.hist, eager.hist, strict=True):
        torch.testing.assert_close(a, b)


def _closure_logger():
    seen: list[torch.Tensor] = []

    def f(y):
        seen.append(y.sum())
        return y + 1

    return f, seen


@pytest.mark.parametrize("recompile_limit", [None, 1])
def test_closure_list_append_on_every_path(recompile_limit):
    """Cache miss, hit, recompile and past the recompile limit: every call appends once."""
    f, seen = _closure_logger()
    jf = thunder.jit(f, recompile_limit=recompile_limit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, shape in enumerate([(2,), (2,), (1, 2), (3,), (1, 2)]):
            x = torch.randn(shape)
            jf(x)
            assert len(seen) == i + 1
            torch.testing.assert_close(seen[-1], x.sum())


def test_side_effects_before_an_exception_happen_as_in_eager():
    def make():
        seen: list[int] = []

        def f(x, fail):
            seen.append(x.shape[0])
            if fail:
                raise ValueError("boom")
            return x * 2

        return f, seen

    f, eager_seen = make()
    g, jit_seen = make()
    jg = thunder.jit(g)
    for shape, fail in [(2, False), (2, True), (2, False), (3, True), (3, False)]:
        x = torch.randn(shape)
        outcomes = []
        for fn in (f, jg):
            try:
                outcomes.append(fn(x, fail))
            except ValueError as e:
                outcomes.append(str(e))
        if fail:
            assert outcomes == ["boom", "boom"]
        else:
            torch.testing.assert_close(outcomes[1], outcomes[0])
        assert jit_seen == eager_seen


def test_user_exception_has_no_thunder_frames_chained():
    def f(x):
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine") as info:
        thunder.jit(f)(torch.randn(1))
    assert info.value.__context__ is None and info.value.__cause__ is None


def _iterate_and_append(x):
    for sub in G_LL:
        sub.append(1)
    return x


def _setdefault_append(x):
    G_D.setdefault("hist", []).append(x.shape[0])
    return x


def _get_append(x):
    G_D.get("hist").append(x.shape[0])
    return x


def _unpack_and_append(x):
    a, _b = G_LL
    a.append(3)
    return x


def _item_then_delete(x):
    first = G_LL[0]
    del G_LL[0]
    first.append(9)
    return x


@pytest.mark.parametrize(
    ("fn", "initial"),
    [
        (_iterate_and_append, {"G_LL": [[], []]}),
        (_setdefault_append, {"G_D": {}}),
        (_get_append, {"G_D": {"hist": []}}),
        (_unpack_and_append, {"G_LL": [[], []]}),
    ],
)
def test_mutating_objects_inside_outside_containers(fn, initial):
    """Objects reached through an outside container without an item read (iteration,
    unpacking, ``dict.get``, ``setdefault``) are outside objects: their mutations are replayed."""

    def reset():
        for name, value in initial.items():
            target = globals()[name]
            target.clear()
            target.update(value) if isinstance(target, dict) else target.extend(value)
            for k, v in value.items() if isinstance(value, dict) else enumerate(value):
                target[k] = list(v)

    reset()
    for i in range(3):
        fn(torch.ones(i + 1))
    eager = {name: repr(globals()[name]) for name in initial}
    reset()
    jf = thunder.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(3):
            jf(torch.ones(i + 1))
    assert {name: repr(globals()[name]) for name in initial} == eager


def test_popped_object_mutation_runs_split_and_changes_state_once():
    def f(x):
        item = G_LL.pop()
        item.append(1)
        return x

    G_LL[:] = [[0], [5]]
    torch.testing.assert_close(
        call_split(thunder.jit(f), torch.ones(1), match="pop"), torch.ones(1)
    )
    assert G_LL == [[0]]  # popped once, by torch's run (tracing changed nothing)


def test_pop_result_is_not_a_stale_constant():
    def f(x):
        return x + G_L.pop()

    G_L[:] = [1, 2, 3, 4]
    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [jf(torch.zeros(1)).item() for _ in range(3)]
    assert got == [4.0, 3.0, 2.0] and G_L == [1]


def test_dict_of_tensors_global_is_read_through_proxies():
    G_W.clear()
    G_W["w"] = torch.ones(2)

    def f(y):
        return y * G_W["w"]

    jf = thunder.jit(f)
    x = torch.randn(2)
    torch.testing.assert_close(jf(x), x)
    G_W["w"] = torch.full((2,), 3.0)
    torch.testing.assert_close(jf(x), x * 3)
    G_W["w"].mul_(2)
    torch.testing.assert_close(jf(x), x * 6)
    G_W["v"] = torch.zeros(2)  # a new key: the keys the program saw changed
    torch.testing.assert_close(jf(x), x * 6)


def _add_then_read(a, b):
    a.add_(1)
    return b * 2


@pytest.mark.parametrize(
    "calls",
    [
        ["same", "distinct"],
        ["distinct", "same"],
        ["view", "distinct", "same", "view"],
    ],
)
def test_aliased_arguments_are_part_of_the_cache_key(calls):
    jf = thunder.jit(_add_then_read)
    for kind in calls:
        base = torch.randn(3)
        if kind == "same":
            make = lambda b: (b, b)  # noqa: E731
        elif kind == "view":
            make = lambda b: (b, b[:])  # noqa: E731
        else:
            make = lambda b: (b, torch.randn(3))  # noqa: E731
        want_args = make(base.clone())
        got_args = make(base.clone())
        if kind == "distinct":
            got_args = (got_args[0], want_args[1].clone())
        want = _add_then_read(*want_args)
        got = jf(*got_args)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(got_args[0], want_args[0], rtol=0, atol=0)


class Color(enum.Enum):
    RED = 1
    BLUE = 2


Pair = collections.namedtuple("Pair", "a b")


class Box:
    def __init__(self, scale):
        self.scale = scale


CFG = (Box(2.0),)


@pytest.mark.parametrize(
    ("fn", "first", "second"),
    [
        (
            lambda x, sizes: torch.split_with_sizes(x, sizes),
            torch.Size([1, 3, 2]),
            torch.Size([1, 5, 0]),
        ),
        (lambda x, e: x * 2 if e is Color.RED else x * 3, Color.RED, Color.BLUE),
        (lambda x, p: x * p[0], Pair(2, 3), Pair(5, 3)),
        (lambda x, p: x * p.a + p.b, Pair(2, 3), Pair(2, 7)),
        (lambda x, s: x[s], slice(0, 2), slice(1, 4)),
        (lambda x, r: x * len(r), range(3), range(5)),
        (lambda x, fs: x * len(fs), frozenset({1}), frozenset({1, 2})),
        (lambda x, st: x * len(st), {1}, {1, 2}),
        (lambda x, dt: x.to(dt), torch.float16, torch.float64),
        (
            lambda x, mf: x * (2 if mf == torch.channels_last else 3),
            torch.contiguous_format,
            torch.channels_last,
        ),
        (lambda x, p: x * p.a[0] + p.b, Pair(torch.ones(1), 1), Pair(torch.full((1,), 4.0), 2)),
    ],
)
def test_every_argument_type_is_guarded(fn, first, second):
    jf = thunder.jit(fn)
    four_d = "mf" in fn.__code__.co_varnames
    x = torch.arange(24.0).reshape(1, 2, 3, 4) if four_d else torch.arange(6.0)
    for arg in (first, second, first):
        want, got = fn(x, arg), jf(x, arg)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        assert len(want) == len(got)
        for w, g in zip(want, got):
            assert w.shape == g.shape and w.dtype == g.dtype and w.stride() == g.stride()
            torch.testing.assert_close(g, w)


def test_object_inside_a_global_tuple_is_guarded():
    global CFG

    def f(x):
        return x * CFG[0].scale

    jf = thunder.jit(f)
    x = torch.ones(1)
    assert jf(x).item() == 2.0
    CFG = (Box(3.0),)
    assert jf(x).item() == 3.0


def test_symbolic_sizes_generate_code_that_runs():
    def f(x, n):
        return x[:n] * torch.arange(n)

    jf = thunder.jit(f, cache="symbolic values")
    for n in (3, 4, 2):
        x = torch.randn(5)
        torch.testing.assert_close(jf(x, n), f(x, n))


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = torch.relu
        self.scale = 2.0

    def forward(self, x):
        return self.act(x) * self.scale


def _swap_activation(m):
    m.act = torch.tanh


def _add_forward_hook(m):
    m.register_forward_hook(lambda mod, inp, out: out * 10)


def _add_pre_hook(m):
    m.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))


def _append_layer(m):
    m.append(torch.nn.Linear(4, 4))


def _replace_layer(m):
    m[0] = torch.nn.Linear(4, 4)


def _bound_method_of_other(m):
    other = torch.nn.Linear(4, 4)
    m.act = other.forward


@pytest.mark.parametrize(
    ("make", "change"),
    [
        (_Scaled, _swap_activation),
        (_Scaled, _add_forward_hook),
        (_Scaled, _add_pre_hook),
        (_Scaled, _bound_method_of_other),
        (lambda: torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), _append_layer),
        (lambda: torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), _replace_layer),
    ],
)
def test_module_changes_between_calls_recompile(make, change):
    m = make()
    jm = thunder.jit(m)
    x = torch.randn(3, 4)
    torch.testing.assert_close(jm(x), m(x))
    change(m)
    torch.testing.assert_close(jm(x), m(x))
    for hooks in (m._forward_hooks, m._forward_pre_hooks):
        hooks.clear()
    torch.testing.assert_close(jm(x), m(x))


def test_hooks_registered_before_the_first_call_run_and_can_be_removed():
    m = _Scaled()
    handle = m.register_forward_hook(lambda mod, inp, out: out - 1)
    jm = thunder.jit(m)
    x = torch.randn(5)
    torch.testing.assert_close(jm(x), m(x))
    handle.remove()
    torch.testing.assert_close(jm(x), m(x))


G_FNS: list = [torch.sin]


def test_functions_in_a_global_list_are_guarded():
    def f(x):
        for fn in G_FNS:
            x = fn(x)
        return x

    jf = thunder.jit(f)
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), f(x))
    G_FNS.append(torch.cos)
    torch.testing.assert_close(jf(x), f(x))
    G_FNS[0] = torch.exp
    torch.testing.assert_close(jf(x), f(x))


def test_changed_defaults_are_seen():
    def f(x, s=2.0, *, t=1.0):
        return x * s + t

    jf = thunder.jit(f)
    x = torch.randn(2)
    torch.testing.assert_close(jf(x), f(x))
    f.__defaults__ = (5.0,)
    torch.testing.assert_close(jf(x), f(x))
    f.__kwdefaults__ = {"t": -3.0}
    torch.testing.assert_close(jf(x), f(x))


def test_mutable_and_tensor_defaults():
    def f(x, acc=[]):  # noqa: B006
        acc.append(1)
        return x * len(acc)

    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert [jf(torch.ones(1)).item() for _ in range(3)] == [1.0, 2.0, 3.0]
    assert f.__defaults__ == ([1, 1, 1],)

    w = torch.ones(2)

    def g(x, w=w):
        return x * w

    jg = thunder.jit(g)
    torch.testing.assert_close(jg(torch.ones(2)), torch.ones(2))
    w.mul_(3)
    torch.testing.assert_close(jg(torch.ones(2)), torch.full((2,), 3.0))


G_OUT = [0.0]


def test_user_except_clauses_cannot_swallow_tracing_limits():
    """A data-dependent conversion inside ``try: ... except Exception`` would silently take the
    except path if tracing raised there; it reads the call's value instead, and a later call
    with other data gets its own value (the program checks it), never the first one's."""

    def f(x):
        try:
            G_OUT[0] = float(x.sum())
        except Exception:
            G_OUT[0] = -1.0
        return x + 1

    jf = thunder.jit(f)
    for scale in (1.0, 1.0, 2.0, 3.0):
        x = torch.ones(2) * scale
        torch.testing.assert_close(jf(x), x + 1)
        assert G_OUT == [2.0 * scale]
    assert thunder.compile_stats(jf).eager_fallbacks == 0

    def g(x):
        try:
            # a list of over 4096 elements is not read while tracing: eager runs
            G_OUT[0] = float(len(x.tolist()))
        except Exception:
            G_OUT[0] = -1.0
        return x + 1

    want = 5000.0
    x = torch.ones(5000)
    with pytest.warns(UserWarning, match="tolist"):
        torch.testing.assert_close(thunder.jit(g)(x), x + 1)
    assert G_OUT == [want]  # eager's path


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x * 2 if hasattr(x, "__array__") else x,  # numpy interop probes
        lambda x: x * 2 if hasattr(x, "__dlpack__") else x,
        lambda x: x.__reversed__() * 2,
        lambda x: copy.deepcopy(x) * 2,
    ],
    ids=["hasattr-__array__", "hasattr-__dlpack__", "__reversed__", "deepcopy"],
)
def test_tensor_protocol_attributes_are_torchs_answers(fn):
    x = torch.tensor([0.5, 1.0, 2.0])
    jf = thunder.jit(fn)
    with pytest.warns(UserWarning, match="protocol attribute"):
        assert torch.equal(jf(x), fn(x))
    assert thunder.compile_stats(jf).split_calls == 1


def test_hasattr_of_a_tensor_attribute_the_trace_does_not_model_is_torchs_answer():
    # Never a silent False: torch answers it (the program runs split there).
    def f(x):
        return x * 2 if hasattr(x, "_version") else x

    jf = thunder.jit(f)
    with pytest.warns(UserWarning, match="_version"):
        torch.testing.assert_close(jf(torch.ones(2)), torch.ones(2) * 2)
    assert thunder.compile_stats(jf).split_calls == 1

    def g(x):
        return x * 2 if hasattr(x, "no_such_attribute") else x

    torch.testing.assert_close(thunder.jit(g)(torch.ones(2)), torch.ones(2))


G_DEL: dict[str, int] = {}


class _Holder:
    pass


G_HOLDER = _Holder()


def test_deletions_of_outside_state_are_replayed():
    def f(x, k):
        del G_DEL[k]
        if hasattr(G_HOLDER, "a"):
            del G_HOLDER.a
        else:
            G_HOLDER.a = k
        return x + len(G_DEL)

    def run(fn):
        G_DEL.clear()
        G_DEL.update({"a": 1, "b": 2, "c": 3, "d": 4})
        G_HOLDER.__dict__.clear()
        outs = [fn(torch.zeros(1), k).item() for k in "abcd"]
        return outs, dict(G_DEL), dict(G_HOLDER.__dict__)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run(thunder.jit(f)) == run(f)


def test_deleting_a_global_and_a_nonlocal():
    def make():
        v = 1

        def f(x):
            nonlocal v
            global G_GONE
            del v
            del G_GONE
            return x * 2

        return f

    globals()["G_GONE"] = 1
    f = make()
    thunder.jit(f)(torch.ones(1))
    assert "G_GONE" not in globals()
    with pytest.raises(ValueError):
        f.__closure__[0].cell_contents  # noqa: B018


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.shape,
        lambda x: x.size(),
        lambda x: x.dtype,
        lambda x: x.device,
        lambda x: (x.shape[0], x.size(1)),
        lambda x: x * isinstance(x.shape, torch.Size),
        lambda x: x * isinstance(x.size(), torch.Size),
        lambda x: x * isinstance(x.dtype, torch.dtype),
        lambda x: x * (x.dtype is torch.float32),
        lambda x: x * (x.dtype == torch.float32),
        lambda x: x * (x.device == torch.device("cpu")),
        lambda x: x * x.dtype.is_floating_point,
        lambda x: x * torch.finfo(x.dtype).eps,
        lambda x: torch.zeros(x.shape, dtype=x.dtype, device=x.device),
        lambda x: x.view(x.shape[::-1]),
        lambda x: torch.promote_types(x.dtype, torch.float64),
    ],
)
def test_values_crossing_into_user_code_are_torch_types(fn):
    x = torch.randn(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager fallback
        got = thunder.jit(fn)(x)
    want = fn(x)
    assert type(got) is type(want)
    if isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want)
    else:
        assert got == want


def test_argument_lists_and_dicts_are_mutated_and_returned_as_themselves():
    def f(x, lst, d):
        lst.append(x.sum())
        d["n"] = x * 2
        return lst, d

    jf = thunder.jit(f)
    lst: list[torch.Tensor] = []
    d: dict[str, torch.Tensor] = {}
    for i in range(3):
        x = torch.randn(2)
        got_lst, got_d = jf(x, lst, d)
        assert got_lst is lst and got_d is d and len(lst) == i + 1
        torch.testing.assert_close(lst[-1], x.sum())
        torch.testing.assert_close(d["n"], x * 2)


def test_inputs_returned_unchanged_are_the_callers_tensors_under_autodiff():
    w = torch.nn.Parameter(torch.ones(2))
    t = torch.zeros(3)

    def f(x):
        return x * w, t, x

    x = torch.randn(2, requires_grad=True)
    a, b, c = thunder.jit(f)(x)
    assert b is t and c is x
    (a.sum() + c.sum()).backward()
    torch.testing.assert_close(x.grad, w.detach() + 1)


def test_differentiated_writes_to_inputs_sharing_memory_run_split_and_write_once():
    def f(a, b, w):
        t = (b + a) * w
        b.add_(a)
        return t

    base, want_base = torch.arange(1.0, 7.0), torch.arange(1.0, 7.0)
    w = torch.randn(3, requires_grad=True)
    got = call_split(thunder.jit(f), base[:3], base[3:], w, match="share memory")
    want = f(want_base[:3], want_base[3:], w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(base, want_base)  # written once, as eager
    torch.testing.assert_close(
        torch.autograd.grad(got.sum(), w), torch.autograd.grad(want.sum(), w)
    )
    with torch.no_grad():  # not differentiated: memory is shared at run time, as in eager
        got_base, want_base = torch.arange(1.0, 7.0), torch.arange(1.0, 7.0)
        got = thunder.jit(f)(got_base[:3], got_base[3:], w)
        want = f(want_base[:3], want_base[3:], w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_base, want_base)


class _Dyn:
    pass


G_DYN = _Dyn()


def test_absent_attributes_are_guarded():
    def f(x):
        return x * (getattr(G_DYN, "dyn", 0) + hasattr(G_DYN, "flag"))

    jf = thunder.jit(f)
    x = torch.ones(1)
    assert jf(x).item() == 0.0
    G_DYN.dyn = 5
    assert jf(x).item() == 5.0
    G_DYN.flag = True
    assert jf(x).item() == 6.0
    del G_DYN.dyn
    assert jf(x).item() == 1.0


def test_reading_back_what_the_program_wrote_is_not_guarded():
    def f(x, k):
        global G_NEW
        _Dyn.v = k
        G_NEW = [7]
        G_NEW.append(5)
        return x * _Dyn.v * len(G_NEW)

    globals()["G_NEW"] = [1, 2]
    jf = thunder.jit(f, cache="symbolic values")
    for k in (1, 2, 3):
        torch.testing.assert_close(jf(torch.ones(2), k), torch.ones(2) * k * 2)
        assert globals()["G_NEW"] == [7, 5] and _Dyn.v == k


def test_float_slice_bounds_raise_like_eager_after_the_same_side_effects():
    seen: list[float] = []

    def f(x, k):
        seen.append(k)
        return x[: k + 1]

    with pytest.raises(TypeError, match="slice indices"):
        thunder.jit(f, cache="symbolic values")(torch.ones(4), 2.5)
    assert seen == [2.5]


@pytest.mark.parametrize("grad", [False, True])
def test_symbolic_shapes_of_unused_tensors_are_computed_and_returned_as_sizes(grad):
    w = torch.ones(5, requires_grad=grad)

    def f(x, k):
        y = (x * w)[:, : k + 1]
        return torch.zeros(y.shape[1]) + k, y.shape, isinstance(y.shape, torch.Size)

    jf = thunder.jit(f, cache="symbolic values")
    for k in (2, 3, 1):
        got, want = jf(torch.ones(2, 5), k), f(torch.ones(2, 5), k)
        torch.testing.assert_close(got[0], want[0])
        assert type(got[1]) is torch.Size and got[1] == want[1] and got[2] is True


G_SHARED: list = []


def test_an_argument_list_that_is_also_a_global_under_symbolic_values():
    """Its contents are symbolic numbers: the program reads them through the argument and the
    global, and writes through the argument (it ran split before containers reached by two paths
    were guarded; it compiles now, and must match eager as the aliasing changes)."""

    def f(x, k, lst):
        lst.append(k)
        return x * lst[0] + lst[-1], len(G_SHARED), sum(G_SHARED)

    results = []
    for fn in (f, thunder.jit(f, cache="symbolic values")):
        G_SHARED[:] = [1, 2.0]
        other = [5]
        outs = [fn(torch.ones(1), i, G_SHARED) for i in range(3)]
        outs.append(fn(torch.ones(1), 7, other))
        G_SHARED[:] = [3.5, 1]
        outs.append(fn(torch.ones(1), 2, G_SHARED))
        results.append(([(o[0].tolist(), o[1], o[2]) for o in outs], list(G_SHARED), other))
    assert results[0] == results[1]


@pytest.mark.parametrize("cache", [None])
def test_an_argument_list_that_is_also_a_global(cache):
    def f(x, k, lst):
        lst.append(k)
        return x * 1, len(G_SHARED)

    results = []
    for fn in (f, thunder.jit(f, cache=cache)):
        G_SHARED[:] = [1, 2.0]
        other: list = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = [fn(torch.ones(1), 0, G_SHARED)[1] for _ in range(3)]
            outs.append(fn(torch.ones(1), 0, other)[1])
        results.append((outs, list(G_SHARED), other))
    assert results[0] == results[1]


G_FEW: list = []
G_TENSOR = torch.zeros(2)


def test_a_deletion_that_would_fail_is_not_replayed_after_tensor_writes():
    """del G[0] relies on the item being there: when it is gone, eager raises before the later
    in-place write, and so does thunder (the contents are guarded, the call retraced)."""

    def f(x):
        del G_FEW[0]
        G_TENSOR.add_(1)
        return x

    jf = thunder.jit(f)
    G_FEW[:] = [1, 2]
    G_TENSOR.zero_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jf(torch.ones(1))
        jf(torch.ones(1))
        with pytest.raises(IndexError):
            jf(torch.ones(1))
    assert G_FEW == [] and G_TENSOR.tolist() == [2.0, 2.0]


def test_a_number_constant_made_under_inference_mode_serves_later_programs_with_grad():
    # The torch executor makes one 0-dim tensor per number for every program. The first program
    # to need 2.375 runs under inference_mode: the tensor must still be a plain one, which torch
    # autograd can save when it records a later program (a write into a tensor that does not
    # require grad). It raised "Inference tensors cannot be saved for backward".
    def scaled(x):
        return x * 2.375

    with torch.inference_mode():
        x = torch.randn(4)
        torch.testing.assert_close(thunder.jit(scaled)(x), x * 2.375)

    def written(w, buf):
        buf[:2].copy_(w * 2.375)
        return w.sum()

    w = torch.randn(2, requires_grad=True)
    buf_e, buf_j = torch.zeros(3), torch.zeros(3)
    out_e, out_j = written(w, buf_e), thunder.jit(written)(w, buf_j)
    torch.testing.assert_close(buf_j, buf_e)
    (g_e,) = torch.autograd.grad(out_e + (buf_e**2).sum(), w)
    (g_j,) = torch.autograd.grad(out_j + (buf_j**2).sum(), w)
    torch.testing.assert_close(g_j, g_e)


def test_a_dead_view_of_a_decomposable_view_raises_like_eager():
    # c follows a's transposed strides; view(2, -1) of its unfold cannot be a view, and eager
    # raises though the view is unused. Thunder decomposed the unfold into a copy with other
    # strides, so the kept view passed.
    def f(a):
        c = a * 2 + 1
        c.unfold(0, 1, 1).view(2, -1)
        return a

    a = torch.arange(12.0).reshape(3, 2, 2).permute(2, 1, 0)
    with pytest.raises(RuntimeError, match="view size is not compatible") as eager:
        f(a)
    with pytest.raises(RuntimeError, match="view size is not compatible") as jitted:
        thunder.jit(f)(a)
    assert str(jitted.value) == str(eager.value)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.repeat(*([1] * max(x.ndim, 1))),
        lambda x: x.repeat(2, *([1] * x.ndim)),
        lambda x: x.tile((1,) * max(x.ndim, 1)),
        lambda x: x.repeat_interleave(1, dim=0) if x.ndim else x.repeat_interleave(1),
        lambda x: torch.repeat_interleave(x, 3),
    ],
    ids=["repeat_ones", "repeat_new_dim", "tile_ones", "repeat_interleave_one", "flat_interleave"],
)
@pytest.mark.parametrize("shape", [(2, 3), (), (1,)], ids=["2x3", "0d", "1"])
def test_a_copy_op_returns_new_memory_with_a_gradient(fn: Any, shape: tuple[int, ...]) -> None:
    # repeat(1, 1), a 0-d tensor repeated: their decomposition into a broadcast and a reshape
    # can be a view of the input. Under autodiff the forward returned that view: writing into
    # the result changed the input (or raised, for a broadcast 0-d input). They stay whole.
    x = torch.randn(shape, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out, expected = thunder.jit(fn)(x), fn(x2)
    torch.testing.assert_close(out, expected)
    with torch.no_grad():
        before = x.detach().clone()
        out.add_(1.0)
        assert torch.equal(x.detach(), before)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


@pytest.mark.parametrize(
    "fn",
    [lambda x: (x * 2).view(-1), lambda x: (x * 2)[0], lambda x: torch.repeat_interleave(x, 2)],
    ids=["view_of_intermediate", "index_of_intermediate", "repeat_interleave"],
)
def test_a_returned_view_of_an_intermediate_is_written_in_place_as_in_eager(fn: Any) -> None:
    # autograd refuses in-place writes into views a custom Function returns ("Output 0 of
    # _ThunderFunction is a view and is being modified inplace"); eager allows them on a view
    # whose base nothing else reaches.
    x = torch.randn(2, 3, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out, expected = thunder.jit(fn)(x), fn(x2)
    out.mul_(3.0)
    expected.mul_(3.0)
    torch.testing.assert_close(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


def _two_views(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x * 2
    return y.view(-1), y[0]


def _one_view_twice(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    v = (x * 2).view(-1)
    return v, v


@pytest.mark.parametrize("fn", [_two_views, _one_view_twice])
def test_returned_views_that_share_memory_stay_views_as_in_eager(fn: Any) -> None:
    # Views of one intermediate returned together are not private: they stay views of one
    # memory (``_private_views_detached`` leaves them), the same object where eager's is.
    x = torch.randn(2, 3, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    (a, b), (ea, eb) = thunder.jit(fn)(x), fn(x2)
    assert (a is b) == (ea is eb)
    assert a._is_view() and b._is_view()
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    torch.testing.assert_close((a, b), (ea, eb))
    (a.square().sum() + b.sum()).backward()
    (ea.square().sum() + eb.sum()).backward()
    torch.testing.assert_close(x.grad, x2.grad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("exponent", [3, 3.0, -2, -2.0, 2, 0.5, -1])
def test_pow_by_a_number_rounds_as_torchs_cpu_kernel(dtype: torch.dtype, exponent: float) -> None:
    """torch's CPU pow computes x ** 3 and x ** -2 in bfloat16 as x * x * x and 1 / (x * x),
    rounding after each step; computed in float32 and rounded once, a fifth of the values
    differed by a unit in the last place (and transformers' tanh GELU, 0.5 * x * (1 + tanh(..
    x ** 3)), then by up to half its value where 1 + tanh cancels). Bit for bit now."""
    jitted = thunder.jit(lambda x: torch.pow(x, exponent))
    x = torch.randn(4096, dtype=dtype) * 3
    got, want = jitted(x), torch.pow(x, exponent)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(), want.nan_to_num())


_SCALAR_OPS = {
    "add": lambda x, s: x + s,
    "sub": lambda x, s: x - s,
    "rsub": lambda x, s: s - x,
    "mul": lambda x, s: x * s,
    "div": lambda x, s: x / s,
    "rdiv": lambda x, s: s / x,
    "remainder": lambda x, s: torch.remainder(x, s),
    "fmod": lambda x, s: torch.fmod(x, s),
    "floor_divide": lambda x, s: torch.floor_divide(x, s),
    "lt": lambda x, s: x < s,
    "ge": lambda x, s: x >= s,
    "eq": lambda x, s: x == s,
    "pow_base": lambda x, s: torch.pow(s, x),
    "pow_exponent": lambda x, s: torch.pow(x.abs(), s),
    "add_0dim": lambda x, s: x + torch.tensor(s),
    "mul_0dim": lambda x, s: x * torch.tensor(s),
    "where": lambda x, s: torch.where(x > 0, x, s),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", sorted(_SCALAR_OPS))
def test_a_number_operand_in_low_precision_is_taken_as_torchs_cpu_kernels_take_it(
    op: str, dtype: torch.dtype
) -> None:
    """``x + 0.7`` on a bfloat16 CPU tensor adds bfloat16(0.7) in eager (the number is
    converted to the common dtype); mul and div read the number as given. The IR computed every
    op with the number as given: a fifth of the sums were a unit apart, remainder and fmod
    wrapped around by a whole period where x is a multiple of bfloat16(0.7), and comparisons
    flipped. Bit for bit now, over values that hit those cases."""
    fn = _SCALAR_OPS[op]
    jitted = thunder.jit(lambda x: fn(x, 0.7))
    x = torch.cat([torch.linspace(-3, 3, 2001), torch.randn(4000) * 3]).to(dtype)
    got, want = jitted(x), fn(x, 0.7)
    assert got.dtype == want.dtype
    same = (got == want) | (got.isnan() & want.isnan())
    assert same.all(), f"{(~same).sum().item()} of {same.numel()} differ"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", [torch.add, torch.sub])
def test_alpha_in_low_precision_scales_in_float32_with_one_rounding(
    op: Any, dtype: torch.dtype
) -> None:
    """``torch.add(x, y, alpha=0.7)`` in bfloat16: the IR rounded ``y * 0.7`` to bfloat16 (with
    0.7 as given) before adding. It now computes ``x + bfloat16(0.7) * y`` in float32 and rounds
    once, as torch's vectorized CPU kernel does. Its scalar loop (the tail of a tensor, short or
    strided tensors) rounds ``alpha * y`` first, so eager is not consistent with itself; the
    check is against the exact value: never further from it than eager."""
    jitted = thunder.jit(lambda x, y: op(x, y, alpha=0.7))
    x, y = (torch.randn(6000).to(dtype) for _ in range(2))
    got, want = jitted(x, y), op(x, y, alpha=0.7)
    alpha = float(torch.tensor(0.7).to(dtype))
    exact = op(x.double(), y.double(), alpha=alpha)
    assert (got.double() - exact).abs().max() <= (want.double() - exact).abs().max()
    # torch's scalar tail rounds alpha * y first: a unit of it apart where the difference cancels
    torch.testing.assert_close(got, want, rtol=2e-2, atol=0.0625)


_BOOL_DIVISIONS = {
    "floordiv": lambda m, n: m // n,
    "mod": lambda m, n: m % n,
    "rfloordiv": lambda m, n: n // (m + 1),
    "fmod": lambda m, n: m.fmod(n),
}


@pytest.mark.parametrize("form", sorted(_BOOL_DIVISIONS))
def test_integer_division_of_a_bool_tensor_by_a_number_computes_in_int64_as_eager(
    form: str,
) -> None:
    """``mask // 3``, ``mask % 3``: torch checks the dtype the operands promote to (int64); the
    IR checked each operand and refused the bool tensor (the operators have no torch fallback
    to run instead). Two bool tensors still raise eager's error."""
    fn = _BOOL_DIVISIONS[form]
    mask = torch.tensor([True, False, True, True])
    for n in (3, 2.5):
        got, want = thunder.jit(lambda m, n=n: fn(m, n))(mask), fn(mask, n)
        assert got.dtype == want.dtype and torch.equal(got, want)
    if form != "rfloordiv":
        with pytest.raises(Exception, match="not implemented for 'Bool'"):
            thunder.jit(lambda m: fn(m, m))(mask)


@pytest.mark.parametrize("write", ["fill_", "zero_", "copy_"])
def test_an_intermediate_overwritten_in_place_under_autodiff_keeps_its_layout(write: str) -> None:
    # ``a * w`` takes the layout of a transposed ``a``; eager's in-place write keeps it, and the
    # functionalized write must give the same strides (found by the views fuzz test).
    def f(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        c = a * w
        if write == "fill_":
            c.fill_(1.5)
        elif write == "zero_":
            c.zero_()
        else:
            c.copy_(torch.ones(3, 4))
        return c * w

    jf = thunder.jit(f)
    for a in (torch.randn(3, 4), torch.randn(4, 3).t(), torch.randn(5, 4)[1:4]):
        w1 = torch.randn(3, 4, requires_grad=True)
        w2 = w1.detach().clone().requires_grad_()
        expected, got = f(a, w1), jf(a, w2)
        torch.testing.assert_close(got, expected)
        assert got.stride() == expected.stride()
        expected.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(w2.grad, w1.grad)


_LAYOUTS: dict[str, Any] = {
    "contiguous": lambda t: t.contiguous(),
    "clone contiguous": lambda t: t.clone(memory_format=torch.contiguous_format),
    "to channels_last": lambda t: t.to(torch.float32, memory_format=torch.channels_last),
    "contiguous channels_last": lambda t: t.contiguous(memory_format=torch.channels_last),
}


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
@pytest.mark.parametrize("grad", [False, True])
def test_an_op_that_sets_a_layout_gives_the_results_after_it_eagers_strides(
    layout: str, grad: bool
) -> None:
    # An elementwise op takes its operand's layout: a dropped ``contiguous()`` left the result
    # transposed, and ``view`` of it raised where eager's works.
    set_layout = _LAYOUTS[layout]

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = set_layout((x * w).permute(0, 2, 3, 1)) * 2.0
        return y + 1, y.sin()

    jf = thunder.jit(f)
    for x in (torch.randn(2, 3, 4, 5), torch.randn(2, 5, 3, 4).permute(0, 2, 3, 1)):
        w = torch.randn(2, 3, 4, 5, requires_grad=grad)
        expected = f(x, w)
        with torch.set_grad_enabled(grad):
            got = jf(x, w)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e)
            assert g.stride() == e.stride()
        if layout == "contiguous":
            got[0].view(-1)  # eager's is contiguous


class _Lambda(torch.nn.Module):
    """A module holding the function it applies as ``self.fn``, and attributes named like the
    jitted function's own (``stats``, ``options``)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.scale = 3.0
        self.stats = {"calls": 0}
        self.options = {"mode": "a"}

    def forward(self, x):
        return self.fn(x) * self.scale


def test_attributes_of_the_jitted_object_do_not_replace_the_jitted_functions_own():
    m = _Lambda(torch.sin)
    jm = thunder.jit(m)
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(jm(x), m(x))
    assert thunder.compile_stats(jm).compilations == 1

    class Callable:
        def __init__(self):
            self.fn = torch.cos

        def __call__(self, x):
            return self.fn(x) + 1

    c = Callable()
    x = torch.randn(4)
    torch.testing.assert_close(thunder.jit(c)(x), c(x))

    def f(x):
        return x * 2

    f.fn = torch.tanh  # a function attribute named like the jitted function's own: not run
    f.tag = "kept"  # other attributes show through, as through functools.wraps
    jf = thunder.jit(f)
    torch.testing.assert_close(jf(x), x * 2)
    assert jf.tag == "kept" and jf.fn is f


def test_a_dict_keyed_by_a_number_read_from_data():
    def f(x):
        return {int(x.argmax()): x.max()}

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(5)
        assert jf(x) == f(x)


@pytest.mark.parametrize(
    "fmt",
    [lambda x: f"{x}", lambda x: "{a:}".format_map({"a": x}), lambda x: f"{x!r}"],
)
def test_str_format_of_a_tensor_is_eagers_text(fmt):
    jf = thunder.jit(fmt)
    for _ in range(2):
        x = torch.randn(3)
        assert jf(x) == fmt(x)
