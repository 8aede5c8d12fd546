"""Two programs torch runs that thunder ran slowly.

An object's ``__dict__`` (``vars(obj)``) read after the program set or deleted attributes of
it (``self.register_buffer`` after ``self.x = ...``, as Hugging Face's dynamic RoPE does) was
refused, so every call ran split: the program sees the dict as its writes left it, and the
guards state what the call found (a later call that finds other attributes recompiles).

A ``functools.partial`` made per call with the same function and arguments was keyed by
identity, so every call compiled a new program: it is keyed by what it holds.
"""

from __future__ import annotations

import copy
import functools
import warnings

import pytest
import torch

import thunder

F = torch.nn.functional
torch.set_num_threads(1)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _no_split(jf) -> None:
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 0, stats.last_split_reason
    assert stats.eager_fallbacks == 0, stats.last_eager_reason


# --- __dict__ after the program's writes ---------------------------------------------------


class _Rope(torch.nn.Module):
    """A forward that sets an attribute, then calls ``register_buffer``, which looks in
    ``self.__dict__``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("inv", torch.rand(4), persistent=False)
        self.scale = 1.0
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.scale = self.scale * 0.5 + 1.0
        self.steps = self.steps + 1
        self.register_buffer("inv", self.inv * 0.9 + 0.1, persistent=False)
        return self.lin(x) * self.inv * self.scale


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_register_buffer_after_setting_an_attribute(cache: str) -> None:
    torch.manual_seed(0)
    eager = _Rope()
    compiled = copy.deepcopy(eager)
    jm = thunder.jit(compiled, cache=cache)
    for _ in range(4):
        x = torch.randn(3, 4)
        xe, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
        want = eager(xe)
        got = _quiet(jm, xt)
        torch.testing.assert_close(got, want)
        want.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(xt.grad, xe.grad)
        for (name, p), pe in zip(compiled.named_parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p.grad, pe.grad, msg=name)
        torch.testing.assert_close(compiled.inv, eager.inv)
        assert (compiled.scale, compiled.steps) == (eager.scale, eager.steps)
        assert list(vars(compiled)) == list(vars(eager))
        assert compiled._non_persistent_buffers_set == eager._non_persistent_buffers_set
    _no_split(jm)


class _Obj:
    pass


def _reads_dict_after_writes(x: torch.Tensor, o: _Obj):
    o.a = 2.0
    if hasattr(o, "tmp"):
        del o.tmp
    d = o.__dict__
    y = x * len(d) + ("b" in d) * 10.0 + ("tmp" in d) * 100.0
    y = y + d.get("b", 0.5) + d.get("a") + d.get("c", 7.0) + d.get("tmp", 3.0)
    y = y + sum(v for v in vars(o).values() if type(v) is float)
    names = [k for k in d]
    o.last = len(names)
    y = y + len(vars(o)) + sum(len(k) for k, _ in vars(o).items())
    return y, names


def _entry_object(i: int) -> _Obj:
    o = _Obj()
    if i % 3 == 0:
        o.b = 3.0
    if i % 2 == 0:
        o.tmp = 1.0
    if i % 4 == 1:
        o.c = 5.0
    if i % 5 == 2:
        o.a = 9.0
    return o


def test_dict_of_an_object_read_after_its_attributes_were_written() -> None:
    jf = thunder.jit(_reads_dict_after_writes)
    for i in [0, 0, 1, 2, 3, 1, 4, 5, 6, 7, 0, 9]:
        oe, ot = _entry_object(i), _entry_object(i)
        x = torch.randn(2)
        want = _reads_dict_after_writes(x, oe)
        got = _quiet(jf, x, ot)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
        assert list(vars(ot).items()) == list(vars(oe).items())
    _no_split(jf)
    assert thunder.compile_stats(jf).cache_hits >= 2


def test_the_same_object_changed_outside_between_calls() -> None:
    """One object kept across calls: an attribute added or deleted outside (or left by the last
    call) is what the next call finds."""

    def f(x, o):
        o.n = getattr(o, "n", 0) + 1
        d = vars(o)
        return x * d["n"] + ("extra" in d) + len(d) + d.get("extra", 0.25), sorted(d)

    oe, ot = _Obj(), _Obj()
    jf = thunder.jit(f)
    for step in range(8):
        if step == 3:
            oe.extra = ot.extra = 4.0
        if step == 5:
            del oe.extra, ot.extra
        if step == 6:
            oe.other = ot.other = "x"
        x = torch.randn(3)
        want = f(x, oe)
        got = _quiet(jf, x, ot)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
        assert vars(ot) == vars(oe)
    _no_split(jf)


class _Cached(torch.nn.Module):
    """Reads its ``__dict__`` before and after writing attributes, one of them a tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.t = torch.ones(3)
        self.k = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        had = "extra" in self.__dict__
        self.k = self.k + 1.0
        self.t = self.t + x.detach()
        d = self.__dict__
        y = self.lin(x) * d["k"] + d["t"] + len(d) + had
        self.extra = 1.0
        y = y + ("extra" in self.__dict__) + len(vars(self)) + self.__dict__["extra"]
        for v in vars(self).values():
            if isinstance(v, torch.Tensor):
                y = y + v
        return y


def test_module_dict_read_before_and_after_writes() -> None:
    torch.manual_seed(0)
    eager = _Cached()
    compiled = copy.deepcopy(eager)
    jm = thunder.jit(compiled)
    for step in range(6):
        if step == 3:
            del eager.extra, compiled.extra
        if step == 4:
            eager.added = compiled.added = 5
        x = torch.randn(2, 3)
        xe, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
        want = eager(xe)
        got = _quiet(jm, xt)
        torch.testing.assert_close(got, want)
        want.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(xt.grad, xe.grad)
        torch.testing.assert_close(compiled.lin.weight.grad, eager.lin.weight.grad)
        torch.testing.assert_close(compiled.t, eager.t)
        assert list(vars(compiled)) == list(vars(eager))
        assert (compiled.k, getattr(compiled, "extra", None)) == (
            eager.k,
            getattr(eager, "extra", None),
        )
    _no_split(jm)


def test_a_key_the_program_deleted_is_missing_whatever_the_call_found() -> None:
    def f(x, o):
        if hasattr(o, "gone"):
            del o.gone
        d = o.__dict__
        return x + d.get("gone", 2.0) + ("gone" in d) + len(d)

    jf = thunder.jit(f)
    for has in [True, True, False, False, True]:
        oe, ot = _Obj(), _Obj()
        oe.keep = ot.keep = 1
        if has:
            oe.gone = ot.gone = 10.0
        x = torch.randn(2)
        torch.testing.assert_close(_quiet(jf, x, ot), f(x, oe))
        assert vars(ot) == vars(oe)
    _no_split(jf)


def test_hugging_face_dynamic_rope_across_the_maximum_position() -> None:
    transformers = pytest.importorskip("transformers")
    rope = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}
    # (the key was ``rope_scaling`` before transformers 5)
    key = "rope_parameters" if int(transformers.__version__.split(".")[0]) >= 5 else "rope_scaling"
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=16,
        **{key: rope},
    )
    torch.manual_seed(0)
    model = _quiet(transformers.LlamaForCausalLM, config).eval()
    assert model.model.rotary_emb.rope_type == "dynamic"
    eager = copy.deepcopy(model)
    jm = thunder.jit(model)
    with torch.no_grad():
        for n in (8, 20, 24, 10, 20):
            ids = torch.randint(0, 64, (1, n))
            want = _quiet(eager, ids, use_cache=False).logits
            got = _quiet(jm, ids, use_cache=False).logits
            torch.testing.assert_close(got, want)
            rope_t, rope_e = model.model.rotary_emb, eager.model.rotary_emb
            torch.testing.assert_close(rope_t.inv_freq, rope_e.inv_freq)
            assert int(rope_t.max_seq_len_cached) == int(rope_e.max_seq_len_cached)
    _no_split(jm)


# --- functools.partial arguments ---------------------------------------------------------


def _apply(x, act):
    return act(x) + 1


def test_a_partial_made_per_call_is_one_program() -> None:
    jf = thunder.jit(_apply)
    for _ in range(6):
        x = torch.randn(5)
        act = functools.partial(F.gelu, approximate="tanh")
        torch.testing.assert_close(jf(x, act), _apply(x, act))
    stats = thunder.compile_stats(jf)
    assert stats.compilations == 1, stats.last_recompile_reason
    assert stats.cache_hits == 5


def _scaled(x, k, *, shift=0.0):
    return x * k + shift


@pytest.mark.parametrize(
    ("make", "kinds"),
    [
        (lambda i: functools.partial(F.gelu, approximate=("tanh", "none")[i % 2]), 2),
        (lambda i: functools.partial((F.gelu, F.silu)[i % 2]), 2),
        (lambda i: functools.partial(_scaled, k=(2.0, 3.0, 2)[i % 3]), 3),
        (lambda i: functools.partial(_scaled, (2.0, -0.0)[i % 2], shift=float(i % 2)), 2),
        (lambda i: functools.partial(functools.partial(_scaled, shift=1.5), k=i % 2 + 1), 2),
    ],
    ids=["keyword", "function", "keyword-number", "positional", "nested"],
)
def test_a_partial_holding_something_else_is_another_program(make, kinds: int) -> None:
    jf = thunder.jit(_apply)
    calls = [0, 1, 0, 2, 1, 3, 0, 4]
    for i in calls:
        x = torch.randn(4)
        got = jf(x, make(i))
        want = _apply(x, make(i))
        torch.testing.assert_close(got, want)
        assert got.dtype == want.dtype
    stats = thunder.compile_stats(jf)
    assert stats.compilations <= kinds, stats.last_recompile_reason
    assert stats.cache_hits >= len(calls) - kinds


def test_a_partial_holding_a_tensor() -> None:
    jf = thunder.jit(_apply)
    for shape in [(3,), (3,), (3,), (2, 3), (3,)]:
        x = torch.randn(3, requires_grad=True)
        w = torch.randn(*shape, requires_grad=True)
        xe, we = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        got = jf(x, functools.partial(torch.mul, w))
        want = _apply(xe, functools.partial(torch.mul, we))
        torch.testing.assert_close(got, want)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)
        torch.testing.assert_close(w.grad, we.grad)
    assert thunder.compile_stats(jf).compilations == 2


def test_a_partial_holding_an_object_reads_it_on_every_call() -> None:
    class Scale:
        def __init__(self, k):
            self.k = k

    def times(s, x):
        return x * s.k

    jf = thunder.jit(_apply)
    for k in [2.0, 2.0, 5.0, 2.0]:
        x = torch.randn(3)
        act = functools.partial(times, Scale(k))
        torch.testing.assert_close(jf(x, act), _apply(x, act))
    assert thunder.compile_stats(jf).compilations == 2
