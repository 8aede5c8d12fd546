"""Common model code that used to run split (dynamo around the parts torch ran) and compiles now,
equal to eager over several calls on fresh inputs, gradients included: Meta's Llama rotary
embeddings (complex autograd), layout queries of inputs, ``out=`` writes (spectral norm's power
iteration); and where a call still runs split (an optimizer step reading ``param.grad``), its
reason names the user's construct, not a torch internal."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch._dynamo

import thunder

CACHES = ["constant values", "symbolic values"]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compiled_without_split(jf):
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 0, stats.last_split_reason
    assert stats.eager_fallbacks == 0, stats


def _close(a, b):
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# Complex autograd: Meta's Llama rotary embeddings ------------------------------------------------


def _rope(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def _freqs(seq, dim, dtype=torch.float32):
    angles = torch.randn(seq, dim // 2, dtype=dtype)
    return torch.polar(torch.ones_like(angles), angles).view(1, seq, 1, dim // 2)


@pytest.mark.parametrize("cache", CACHES)
def test_llama_rotary_embedding_trains_compiled(cache):
    jf = thunder.jit(_rope, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for seq in (8, 8, 6, 6):
            xq = torch.randn(2, seq, 4, 16, requires_grad=True)
            xk = torch.randn(2, seq, 4, 16, requires_grad=True)
            freqs = _freqs(seq, 16)
            out = jf(xq, xk, freqs)
            cotangents = [torch.randn_like(o) for o in out]
            grads = torch.autograd.grad(out, (xq, xk), cotangents)
            eq, ek = (t.detach().clone().requires_grad_() for t in (xq, xk))
            expected = _rope(eq, ek, freqs)
            expected_grads = torch.autograd.grad(expected, (eq, ek), cotangents)
            for a, b in zip((*out, *grads), (*expected, *expected_grads)):
                _close(a, b)
    _compiled_without_split(jf)


def _complex_arithmetic(x, scale, freqs):
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    w = (z / freqs + 1j) * scale - z * 0.5
    return torch.view_as_real(w).flatten(-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradients_of_complex_products_quotients_and_real_factors(dtype):
    """mul and div take the conjugates (eager's convention); a real factor made complex gets the
    real part; a complex leaf requiring grad gets its complex gradient."""
    jf = thunder.jit(_complex_arithmetic)
    for _ in range(3):
        x = torch.randn(3, 5, 8, dtype=dtype, requires_grad=True)
        scale = torch.randn(3, 5, 4, dtype=dtype, requires_grad=True)
        freqs = torch.polar(
            torch.rand(5, 4, dtype=dtype) + 0.5, torch.randn(5, 4, dtype=dtype)
        ).requires_grad_()
        inputs = (x, scale, freqs)
        out = jf(*inputs)
        g = torch.randn_like(out)
        grads = torch.autograd.grad(out, inputs, g)
        eager_inputs = [t.detach().clone().requires_grad_() for t in inputs]
        expected = _complex_arithmetic(*eager_inputs)
        expected_grads = torch.autograd.grad(expected, eager_inputs, g)
        _close(out, expected)
        for a, b in zip(grads, expected_grads):
            assert a.dtype == b.dtype
            _close(a, b)
    _compiled_without_split(jf)


def test_llama_rotary_embedding_in_eval():
    jf = thunder.jit(_rope)
    with torch.no_grad():
        for _ in range(3):
            xq, xk, freqs = torch.randn(2, 8, 4, 16), torch.randn(2, 8, 4, 16), _freqs(8, 16)
            for a, b in zip(jf(xq, xk, freqs), _rope(xq, xk, freqs)):
                _close(a, b)
    _compiled_without_split(jf)


def test_complex_ops_without_complex_rules_still_run_split_and_match_eager():
    """exp of a complex value has no rule checked for complex values: refused (split), right."""

    def f(x):
        z = torch.view_as_complex(x.reshape(4, 2))
        return torch.view_as_real(torch.exp(z))

    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(2):
            x = torch.randn(8, requires_grad=True)
            out = jf(x)
            (g,) = torch.autograd.grad(out.sum(), x)
            xe = x.detach().clone().requires_grad_()
            (ge,) = torch.autograd.grad(f(xe).sum(), xe)
            _close(out, f(xe))
            _close(g, ge)
    assert "complex" in (thunder.compile_stats(jf).last_split_reason or "")


# An optimizer step inside the jitted function ------------------------------------------------


def test_optimizer_step_split_reason_names_the_users_line_and_results_match_eager(monkeypatch):
    # As in a fresh process: the first record_function imports torch's CUPTI monitor lazily and
    # stores it in a global, which used to be the reason given.
    monkeypatch.setattr(torch.autograd.profiler, "_cupti_monitor_checked", False, raising=False)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    eager_model = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    eager_opt = torch.optim.AdamW(eager_model.parameters(), lr=1e-2)

    def step(m, o):
        o.step()  # the split reason's line: it reads each parameter's grad
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        o.zero_grad()

    jstep = thunder.jit(step)
    for _ in range(3):
        x = torch.randn(4, 6)
        for m in (model, eager_model):
            torch.nn.functional.mse_loss(m(x), torch.ones(4, 3)).backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            jstep(model, opt)
        step(eager_model, eager_opt)
        for p, q in zip(model.parameters(), eager_model.parameters()):
            _close(p, q)
            assert p.grad is None and q.grad is None
        for p, q in zip(model.parameters(), eager_model.parameters()):
            for k, v in eager_opt.state[q].items():
                _close(opt.state[p][k], v)
    reason = thunder.compile_stats(jstep).last_split_reason
    # The parameters' grad read, or (once torch.compile has run in the process, which wraps every
    # optimizer's _init_group in torch._dynamo.disable) that disabled function: at o.step().
    step_line = step.__code__.co_firstlineno + 1
    assert reason is not None and f"{__file__}:{step_line}" in reason, reason
    assert "grad" in reason or "torch.compiler.disable" in reason, reason
    assert "cupti" not in reason and "global" not in reason, reason


def test_record_function_inside_the_program_compiles(monkeypatch):
    monkeypatch.setattr(torch.autograd.profiler, "_cupti_monitor_checked", False, raising=False)

    def f(x):
        with torch.profiler.record_function("scaled"):
            y = x * 2
        return y + 1

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(5)
        _close(jf(x), f(x))
    _compiled_without_split(jf)


# Layout queries of inputs ---------------------------------------------------------------------


def _branch_on_contiguity(x):
    if x.is_contiguous():
        return x * 2
    return x.contiguous() + 1


def _scaled_by_stride(x):
    return x * x.stride(0) + x.stride()[-1]


def _branch_on_channels_last(x):
    if x.is_contiguous(memory_format=torch.channels_last):
        return x.relu()
    return x - 1


def _layouts(t):
    return (
        [t, t.t().contiguous().t()] if t.ndim == 2 else [t, t.to(memory_format=torch.channels_last)]
    )


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn, shape",
    [
        (_branch_on_contiguity, (3, 4)),
        (_scaled_by_stride, (3, 4)),
        (_branch_on_channels_last, (2, 3, 4, 5)),
        (_branch_on_contiguity, (2, 3, 4, 5)),
    ],
)
def test_layout_queries_of_inputs_compile_and_follow_each_calls_layout(cache, fn, shape):
    jf = thunder.jit(fn, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(6):
            x = _layouts(torch.randn(*shape))[i % 2 if i < 4 else (i + 1) % 2]
            out = jf(x)
            expected = fn(x)
            _close(out, expected)
    _compiled_without_split(jf)


def test_layout_query_of_a_module_buffer_follows_the_buffer():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.randn(4, 4))

        def forward(self, x):
            t = self.table if self.table.is_contiguous() else self.table.contiguous() * 3
            return x @ t

    m = M()
    jm = thunder.jit(m)
    for i in range(4):
        m.table = torch.randn(4, 4) if i % 2 == 0 else torch.randn(4, 4).t()
        x = torch.randn(2, 4)
        _close(jm(x), m(x))
    _compiled_without_split(jm)


def test_layout_query_of_a_computed_tensor_still_runs_split_and_matches_eager():
    def f(x):
        y = x.t()
        return y.contiguous() * 2 if not y.is_contiguous() else y

    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(2):
            x = torch.randn(3, 4)
            _close(jf(x), f(x))
    assert "is_contiguous" in (thunder.compile_stats(jf).last_split_reason or "")


# out= writes: spectral norm's power iteration -------------------------------------------------


@pytest.mark.parametrize("cache", CACHES)
def test_spectral_norm_trains_compiled(cache):
    torch.manual_seed(0)
    layer = torch.nn.utils.parametrizations.spectral_norm(
        torch.nn.Linear(6, 5), n_power_iterations=2
    )
    eager = copy.deepcopy(layer)
    jm = thunder.jit(layer, cache=cache)
    sn, esn = layer.parametrizations.weight, eager.parametrizations.weight
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(5):
            if i == 3:
                layer.eval()
                eager.eval()
            x = torch.randn(3, 6, requires_grad=True)
            xe = x.detach().clone().requires_grad_()
            out, expected = jm(x), eager(xe)
            g = torch.randn_like(out)
            out.backward(g)
            expected.backward(g)
            _close(out, expected)
            _close(x.grad, xe.grad)
            _close(sn.original.grad, esn.original.grad)
            _close(sn[0]._u, esn[0]._u)
            _close(sn[0]._v, esn[0]._v)
    _compiled_without_split(jm)


def _writes_into_out(a, b, c):
    torch.add(a * 1, b + 1, out=c)
    d = torch.mul(a, 2, out=a)
    torch.nn.functional.normalize(b.exp(), dim=0, out=b)
    return d + c + b


def test_out_arguments_are_written_as_eager_writes_them():
    jf = thunder.jit(_writes_into_out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            args = [torch.randn(4) for _ in range(3)]
            eager_args = [t.clone() for t in args]
            _close(jf(*args), _writes_into_out(*eager_args))
            for a, b in zip(args, eager_args):
                _close(a, b)
    _compiled_without_split(jf)


def test_out_that_eager_resizes_or_refuses_runs_as_eager():
    def resized(a, c):
        return torch.add(a * 1, 1, out=c)

    jf = thunder.jit(resized)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(2):
            a, c = torch.randn(4), torch.empty(0)
            ce = c.clone()
            _close(jf(a, c), resized(a, ce))
            assert c.shape == ce.shape == (4,)

    def with_grad(a, c):
        return torch.mul(a, 2, out=c)

    jg = thunder.jit(with_grad)
    a = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="out="):
        with_grad(a, torch.empty(3))
    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="out="):
        warnings.simplefilter("ignore", UserWarning)
        jg(a, torch.empty(3))


def test_out_overlapping_an_input_raises_eagers_error():
    """eager refuses an out= that partially overlaps an input; computing then copying would not."""

    def overlapping(x):
        return torch.add(x[:-1] * 1, x[1:], out=x[:-1])

    with pytest.raises(RuntimeError, match="memory location"):
        overlapping(torch.randn(6))
    jf = thunder.jit(overlapping)
    for _ in range(2):
        with warnings.catch_warnings(), pytest.raises(RuntimeError, match="memory location"):
            warnings.simplefilter("ignore", UserWarning)
            jf(torch.randn(6))


def test_out_that_may_overlap_a_view_of_another_input_runs_as_eager():
    """Two arguments that are views of one tensor: an out= into one from a view of the other
    partially overlaps, which eager refuses."""

    def into_other(x, y):
        return torch.add(x[1:], 1, out=y)

    base = torch.randn(7)
    with pytest.raises(RuntimeError, match="memory location"):
        into_other(base[:6], base[:5])
    jf = thunder.jit(into_other)
    for _ in range(2):
        base = torch.randn(7)
        with warnings.catch_warnings(), pytest.raises(RuntimeError, match="memory location"):
            warnings.simplefilter("ignore", UserWarning)
            jf(base[:6], base[:5])
