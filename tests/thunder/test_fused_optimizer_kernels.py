"""Torch builtins that write into their arguments without returning them (the fused optimizer
kernels, GradScaler's unscale, the ``_foreach_*_`` family reached through ``torch.ops``): their
writes are kept, as eager's, and foreach ops taking their scalars as a tensor (torch.optim's
Adam under compile) compile."""

import warnings

import pytest
import torch
import torch.optim.adagrad as adagrad_module
import torch.optim.adam as adam_module
import torch.optim.adamw as adamw_module
import torch.optim.sgd as sgd_module
from torch.utils._foreach_utils import _group_tensors_by_device_and_dtype

import thunder

CACHES = ["constant values", "symbolic values"]


def _jit(fn, cache):
    return thunder.jit(fn, cache=cache)


def _no_eager_fallbacks(jfn):
    assert thunder.compile_stats(jfn).eager_fallbacks == 0


def _state(seed):
    g = torch.Generator().manual_seed(seed)
    shapes = ((4,), (2, 3))
    params = [torch.randn(s, generator=g) for s in shapes]
    exp_avgs = [torch.randn(s, generator=g) for s in shapes]
    exp_avg_sqs = [torch.rand(s, generator=g) for s in shapes]
    steps = [torch.tensor(0.0) for _ in shapes]
    return params, exp_avgs, exp_avg_sqs, steps


def _adam(ps, gs, m, v, steps, lr):
    adam_module.adam(
        ps, gs, m, v, [], steps, fused=True, amsgrad=False, beta1=0.9, beta2=0.99, lr=lr,
        weight_decay=0.0, eps=1e-8, maximize=False,
    )  # fmt: skip


def _adamw(ps, gs, m, v, steps, lr):
    adamw_module.adamw(
        ps, gs, m, v, [], steps, fused=True, amsgrad=False, beta1=0.9, beta2=0.99, lr=lr,
        weight_decay=0.1, eps=1e-8, maximize=False,
    )  # fmt: skip


def _adam_foreach(ps, gs, m, v, steps, lr):
    adam_module.adam(
        ps, gs, m, v, [], steps, foreach=True, amsgrad=False, beta1=0.9, beta2=0.99, lr=lr,
        weight_decay=0.0, eps=1e-8, maximize=False,
    )  # fmt: skip


def _sgd(ps, gs, m, v, steps, lr):
    sgd_module.sgd(
        ps, gs, m, fused=True, weight_decay=0.0, momentum=0.9, lr=lr, dampening=0.0,
        nesterov=False, maximize=False,
    )  # fmt: skip


def _adagrad(ps, gs, m, v, steps, lr):
    adagrad_module.adagrad(
        ps, gs, v, steps, fused=True, lr=lr, weight_decay=0.0, lr_decay=0.0, eps=1e-10,
        maximize=False,
    )  # fmt: skip


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("step", [_adam, _adamw, _adam_foreach, _sgd, _adagrad])
def test_functional_optimizers_update_every_state_like_eager(step, cache):
    eager, compiled = _state(0), _state(0)
    jstep = _jit(step, cache)
    for i in range(3):
        grads = [torch.randn_like(p) for p in eager[0]]
        step(eager[0], [g.clone() for g in grads], *eager[1:], 0.1)
        jstep(compiled[0], [g.clone() for g in grads], *compiled[1:], 0.1)
        torch.testing.assert_close(compiled, eager)
        assert not torch.equal(compiled[0][0], _state(0)[0][0])
    _no_eager_fallbacks(jstep)


def test_fused_adam_with_a_tensor_learning_rate():
    eager, compiled = _state(1), _state(1)
    jstep = thunder.jit(_adam)
    for i in range(3):
        grads = [torch.randn_like(p) for p in eager[0]]
        lr = torch.tensor(0.05 * (i + 1))
        _adam(eager[0], grads, *eager[1:], lr)
        jstep(compiled[0], grads, *compiled[1:], lr)
        torch.testing.assert_close(compiled, eager)
    _no_eager_fallbacks(jstep)


def _unscale(grads, found_inf, inv_scale):
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)


@pytest.mark.parametrize("cache", CACHES)
def test_amp_unscale_writes_grads_and_found_inf(cache):
    junscale = _jit(_unscale, cache)
    for i in range(4):
        grads = [torch.randn(3), torch.randn(2, 2)]
        if i == 2:
            grads[1][0, 1] = float("inf")
        eager = [g.clone() for g in grads], torch.zeros(1)
        compiled = [g.clone() for g in grads], torch.zeros(1)
        inv = torch.tensor(1.0 / (i + 2))
        _unscale(*eager, inv)
        junscale(*compiled, inv)
        torch.testing.assert_close(compiled, eager, equal_nan=True)
        assert compiled[1].item() == (1.0 if i == 2 else 0.0)
    _no_eager_fallbacks(junscale)


def test_a_tensor_passed_twice_is_written_as_in_eager():
    def twice(g, found, inv):
        torch._amp_foreach_non_finite_check_and_unscale_([g, g], found, inv)
        return g * 1

    jtwice = thunder.jit(twice)
    for _ in range(2):
        g = torch.randn(3)
        ge, gc = g.clone(), g.clone()
        out_e = twice(ge, torch.zeros(1), torch.tensor(0.5))
        out_c = jtwice(gc, torch.zeros(1), torch.tensor(0.5))
        torch.testing.assert_close(gc, ge)
        torch.testing.assert_close(out_c, out_e)


def test_amp_update_scale_returns_the_scale_it_writes():
    def update(scale, tracker, found_inf):
        out = torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 2)
        return out, out is scale

    jupdate = thunder.jit(update)
    eager = torch.tensor([4.0]), torch.tensor([0], dtype=torch.int32)
    compiled = torch.tensor([4.0]), torch.tensor([0], dtype=torch.int32)
    for found in (0.0, 0.0, 0.0, 1.0, 0.0):
        out_e, same_e = update(*eager, torch.tensor([found]))
        out_c, same_c = jupdate(*compiled, torch.tensor([found]))
        torch.testing.assert_close(compiled, eager)
        torch.testing.assert_close(out_c, out_e)
        assert same_c == same_e
        assert out_c is compiled[0]
    _no_eager_fallbacks(jupdate)


def _cummax_helper(x, values, indices):
    torch._cummax_helper(x, values, indices, 0)


def _batch_norm_legit(x, running_mean, running_var):
    return torch._native_batch_norm_legit(x, None, None, running_mean, running_var, True, 0.1, 1e-5)


def _aten_foreach_add(a, b):
    return torch.ops.aten._foreach_add_.List(a, b)


def _aten_foreach_add_packet(a, b):
    return torch.ops.aten._foreach_add_(a, b)


def _aten_fused_sgd(params, grads):
    torch.ops.aten._fused_sgd_.default(
        params, grads, [], weight_decay=0.0, momentum=0.0, lr=0.5, dampening=0.0,
        nesterov=False, maximize=False, is_first_step=True,
    )  # fmt: skip


def _index_put_impl(x, i, v):
    return torch._index_put_impl_(x, (i,), v, True, False) * 2


WRITERS = {
    "cummax_helper": (
        _cummax_helper,
        lambda g: (torch.randn(5, generator=g), torch.zeros(5), torch.zeros(5, dtype=torch.long)),
    ),
    "native_batch_norm_legit": (
        _batch_norm_legit,
        lambda g: (
            torch.randn(6, 3, generator=g),
            torch.randn(3, generator=g),
            torch.rand(3, generator=g),
        ),
    ),
    "aten_foreach_add_overload": (
        _aten_foreach_add,
        lambda g: ([torch.randn(3, generator=g)], [torch.randn(3, generator=g)]),
    ),
    "aten_foreach_add_packet": (
        _aten_foreach_add_packet,
        lambda g: (
            [torch.randn(3, generator=g), torch.randn(2, generator=g)],
            [torch.ones(3), torch.ones(2)],
        ),
    ),
    "aten_fused_sgd": (
        _aten_fused_sgd,
        lambda g: ([torch.randn(3, generator=g)], [torch.randn(3, generator=g)]),
    ),
    "index_put_impl": (
        _index_put_impl,
        lambda g: (
            torch.randn(5, generator=g),
            torch.tensor([1, 1, 3]),
            torch.randn(3, generator=g),
        ),
    ),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(WRITERS))
def test_written_arguments_of_builtins_match_eager(name, cache):
    fn, make = WRITERS[name]
    jfn = _jit(fn, cache)
    for seed in range(3):
        eager = make(torch.Generator().manual_seed(seed))
        compiled = make(torch.Generator().manual_seed(seed))
        out_e = fn(*eager)
        out_c = jfn(*compiled)
        torch.testing.assert_close(compiled, eager)
        torch.testing.assert_close(out_c, out_e)
    _no_eager_fallbacks(jfn)


def test_gradient_flows_through_a_written_list():
    def f(x):
        y = x * 2
        torch.ops.aten._foreach_mul_.Scalar([y], 3.0)
        return y.sum()

    jf = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(4, requires_grad=True)
        xe = x.detach().clone().requires_grad_(True)
        out_c, out_e = jf(x), f(xe)
        out_c.backward()
        out_e.backward()
        torch.testing.assert_close(out_c, out_e)
        torch.testing.assert_close(x.grad, xe.grad)


def _addcdiv_(ps, a, b, scalars):
    torch._foreach_addcdiv_(ps, a, b, scalars)
    return ps


def _addcmul_(ps, a, b, scalars):
    torch._foreach_addcmul_(ps, a, b, scalars)
    return ps


def _addcmul(ps, a, b, scalars):
    return torch._foreach_addcmul(ps, a, b, scalars)


def _addcdiv(ps, a, b, scalars):
    return torch._foreach_addcdiv(ps, a, b, scalars)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [_addcdiv_, _addcmul_, _addcmul, _addcdiv])
def test_foreach_scalars_given_as_a_tensor(fn, cache):
    jfn = _jit(fn, cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(3):
            ps = [torch.randn(3), torch.randn(2, 2)]
            a = [torch.randn(3), torch.randn(2, 2)]
            b = [torch.rand(3) + 0.5, torch.rand(2, 2) + 0.5]
            scalars = torch.tensor([0.5 * (i + 1), -1.5 - i])
            eager_ps = [p.clone() for p in ps]
            out_e = fn(eager_ps, a, b, scalars)
            out_c = jfn(ps, a, b, scalars)
            torch.testing.assert_close(out_c, out_e)
            torch.testing.assert_close(ps, eager_ps)
    _no_eager_fallbacks(jfn)


def _fused_sgd_kernel(ps, gs, m, lr):
    torch._fused_sgd_(
        ps, gs, m, weight_decay=0.0, momentum=0.9, lr=lr, dampening=0.0, nesterov=False,
        maximize=False, is_first_step=False,
    )  # fmt: skip


def test_an_operator_that_only_writes_reads_no_sizes_from_data():
    # _fused_sgd_ has no meta kernel: it returns nothing and its copies keep their sizes, so the
    # program needs no run on the call's values (no reads of sizes, no host syncs). The kernel is
    # called directly: once torch.compile has run in the process, dynamo's TorchPatcher wraps
    # torch.optim's `_fused_*` functions in torch._dynamo.disable, and calls of them run split.
    jstep = thunder.jit(_fused_sgd_kernel)
    ps, m = [torch.randn(3), torch.randn(2)], [torch.randn(3), torch.randn(2)]
    eager_ps, eager_m = [p.clone() for p in ps], [b.clone() for b in m]
    gs = [torch.randn_like(p) for p in ps]
    jstep(ps, gs, m, 0.1)
    _fused_sgd_kernel(eager_ps, gs, eager_m, 0.1)
    torch.testing.assert_close((ps, m), (eager_ps, eager_m))
    text = str(thunder.last_traces(jstep)[-1])
    assert "_fused_sgd_" in text
    assert "torch_fallback_sized" not in text and "check_data" not in text


@pytest.mark.parametrize("cache", CACHES)
def test_total_norm_and_clipping_with_foreach_compile(cache):
    # torch's foreach paths group tensors by device and dtype (the order of groups is torch's).
    def clip(tensors, max_norm):
        total = torch.nn.utils.get_total_norm(tensors, 2.0, foreach=True)
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        grouped = _group_tensors_by_device_and_dtype([tensors])
        for (device, _), ([group], _) in grouped.items():
            torch._foreach_mul_(group, coef.to(device))
        return total

    jclip = _jit(clip, cache)
    for i in range(3):
        tensors = [torch.randn(3), torch.randn(2, dtype=torch.float64), torch.randn(4)]
        eager = [t.clone() for t in tensors]
        torch.testing.assert_close(jclip(tensors, 0.5 + i), clip(eager, 0.5 + i))
        torch.testing.assert_close(tensors, eager)
    _no_eager_fallbacks(jclip)
    assert not thunder.compile_stats(jclip).split_graphs


_model = torch.nn.Linear(3, 2)
_optimizer = torch.optim.SGD(_model.parameters(), lr=0.1, weight_decay=0.1)


def _loss_with_param_groups(x):
    group = _optimizer.param_groups[0]
    penalty = sum(p.pow(2).sum() for p in group["params"])
    return _model(x).sum() + group["weight_decay"] * penalty


def test_parameters_reached_through_a_global_optimizer_compile():
    jloss = thunder.jit(_loss_with_param_groups)
    for i in range(3):
        x = torch.randn(4, 3)
        _optimizer.param_groups[0]["weight_decay"] = 0.1 * (i + 1)
        out = jloss(x)
        grads = torch.autograd.grad(out, list(_model.parameters()))
        expected = _loss_with_param_groups(x)
        expected_grads = torch.autograd.grad(expected, list(_model.parameters()))
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(grads, expected_grads)
        with torch.no_grad():  # a step outside: the program reads the parameters' new values
            for p in _model.parameters():
                p.sub_(0.1)
    _no_eager_fallbacks(jloss)
