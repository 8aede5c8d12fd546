"""The torch_ops executor keeps high-level ops whole (each kept op equals torch on the OpInfo
table's samples and runs as one call); torchcompile takes fully fusible composites into its regions
before it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder
from opinfos import ALL_OPINFOS, OpInfo, SampleInput
from thunder.models import ConvBlock
from thunder_executors import get_executor, transform_for_execution
from thunder_executors.torch_ops_executor import (
    ATEN_OPS,
    KEPT_OFF_CPU,
    KEPT_OPS,
    _torch_function,
)
from thunder_ir import ops as ltorch
from thunder_ir import trace_function
from thunder_ir.pytree import tree_flatten, tree_map


def block(x: Any, w: Any, b: Any, ln_w: Any, ln_b: Any) -> Any:
    h = ltorch.layer_norm(x, (x.shape[-1],), ln_w, ln_b)
    q = ltorch.transpose(ltorch.reshape(ltorch.linear(h, w, b), (2, 8, 2, 4)), 1, 2)
    y = ltorch.scaled_dot_product_attention(q, q, q, is_causal=True)
    return ltorch.gelu(ltorch.reshape(ltorch.transpose(y, 1, 2), (2, 8, 8)))


def eager_block(x: Any, w: Any, b: Any, ln_w: Any, ln_b: Any) -> Any:
    h = F.layer_norm(x, (x.shape[-1],), ln_w, ln_b)
    q = F.linear(h, w, b).reshape(2, 8, 2, 4).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    return F.gelu(y.transpose(1, 2).reshape(2, 8, 8))


def inputs() -> list[torch.Tensor]:
    return [torch.randn(2, 8, 8), torch.randn(8, 8), torch.randn(8), torch.randn(8), torch.randn(8)]


def test_high_level_ops_run_whole_and_match_eager() -> None:
    extrace = transform_for_execution(trace_function(block, *inputs()), ("torch_ops", "torch"))
    text = extrace.python()
    for op in ("layer_norm", "linear", "scaled_dot_product_attention", "gelu"):
        assert f"torch_ops.{op}(" in text
    assert "var_mean" not in text  # layer_norm was not decomposed
    fn = extrace.python_callable()
    for _ in range(2):
        xs = inputs()
        torch.testing.assert_close(fn(*xs), eager_block(*xs))


def test_fusion_first_takes_fusible_composites_into_its_region() -> None:
    extrace = transform_for_execution(
        trace_function(block, *inputs()), ("torchcompile", "torch_ops", "torch")
    )
    assert len(extrace.fusion_regions) == 1
    region_calls = [f"{s.sym.module}.{s.sym.name}" for s in extrace.fusion_regions[0].subsymbols]
    # Inside the region, ops torch runs whole stay whole for inductor; the rest are prims.
    assert "torch_ops.scaled_dot_product_attention" in region_calls
    assert "torch_ops.layer_norm" in region_calls
    assert "torch.permute" in region_calls
    xs = inputs()
    torch.testing.assert_close(
        extrace.python_callable()(*xs), eager_block(*xs), atol=1e-5, rtol=1e-5
    )


def test_kept_ops_are_derived_from_the_ops_torch_names() -> None:
    ex = get_executor("torch_ops")
    assert ltorch.linear in ex.implementations
    assert all(sym in KEPT_OPS + ATEN_OPS for sym in ex.implementations)


def test_every_kept_op_exists_and_resolves_to_a_torch_function() -> None:
    # An op in KEPT_OPS that resolved to no torch function would silently be kept nowhere: every
    # one must be an ltorch op torch runs.
    for op in KEPT_OPS:
        assert ltorch.ALL_OPS.get(op.name) is op, f"KEPT_OPS holds {op!r}, which is no ltorch op"
        fn = _torch_function(op)
        assert callable(fn), f"{op.id} resolves to no torch function"
        assert op in get_executor("torch_ops").implementations
    assert KEPT_OFF_CPU <= set(KEPT_OPS)


# The OpInfo table, for every op kept whole ---------------------------------------------------------

KEPT_OPINFOS = [oi for oi in ALL_OPINFOS if oi.op in KEPT_OPS]


def _tolerances(oi: OpInfo, dtype: torch.dtype) -> dict[str, float]:
    # As tests/thunder_ir/test_ops.py compares the decompositions.
    if oi.atol is not None or oi.rtol is not None:
        return {"atol": oi.atol or 0.0, "rtol": oi.rtol or 0.0}
    if dtype in (torch.bfloat16, torch.float16):
        return {"atol": 1e-2, "rtol": 1.6e-2}
    return {}


def _clone(sample: SampleInput) -> SampleInput:
    def c(x: Any) -> Any:
        return x.detach().clone() if isinstance(x, torch.Tensor) else x

    return SampleInput(tree_map(c, sample.args), tree_map(c, sample.kwargs), sample.name)


def test_every_kept_op_has_an_opinfo() -> None:
    covered = {oi.op for oi in KEPT_OPINFOS}
    assert not set(KEPT_OPS) - covered, sorted(op.id for op in set(KEPT_OPS) - covered)


# Ops kept only when given an argument, and the word naming their OpInfos that give it.
_KEPT_WITH = {ltorch.add: "alpha", ltorch.sub: "alpha", ltorch.rsub: "alpha", ltorch.sum: "dtype"}


@pytest.mark.parametrize("oi", KEPT_OPINFOS, ids=lambda oi: oi.name)
def test_kept_op_matches_torch_and_runs_whole(oi: OpInfo) -> None:
    kept = 0
    for dtype in oi.dtypes:
        for _ in range(2):  # fresh random inputs each time
            for sample in oi.sample_inputs(dtype, False):
                expected = oi.ref(*_clone(sample).args, **_clone(sample).kwargs)
                s = _clone(sample)
                trace = trace_function(lambda *a, **k: oi.op(*a, **k), *s.args, **s.kwargs)
                extrace = transform_for_execution(trace, ("torch_ops", "torch"))
                leaves = tree_flatten((s.args, s.kwargs))[0]
                got = extrace.python_callable()(*[x for x in leaves if isinstance(x, torch.Tensor)])
                text = extrace.python()
                kept += f"torch_ops.{oi.op.name}(" in text
                try:
                    if oi.compare is not None:
                        oi.compare(got, expected)
                    else:
                        torch.testing.assert_close(
                            got, expected, equal_nan=True, **_tolerances(oi, dtype)
                        )
                except AssertionError as e:
                    raise AssertionError(f"{oi.name} ({dtype}) on {sample}:\n{e}\n{text}") from None
    if oi.op in KEPT_OFF_CPU:  # the samples are on the CPU, where it runs decomposed
        assert not kept, f"ltorch.{oi.op.name} was kept whole on the CPU"
    elif oi.op in _KEPT_WITH and _KEPT_WITH[oi.op] not in oi.name:
        # Without that argument the decomposition is the one torch call already.
        assert not kept, f"ltorch.{oi.op.name} without {_KEPT_WITH[oi.op]} was kept whole"
    else:
        assert kept, f"ltorch.{oi.op.name} ran decomposed on every sample"


# Writes: running statistics, inplace=True ----------------------------------------------------------


def _batch_norm(x: Any, rm: Any, rv: Any, w: Any, b: Any, training: bool) -> Any:
    return ltorch.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5)


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_is_kept_only_where_it_writes_no_running_statistic(training: bool) -> None:
    def inputs() -> list[torch.Tensor]:
        return [torch.randn(4, 3, 5), torch.randn(3), torch.rand(3) + 0.5, torch.randn(3),
                torch.randn(3)]  # fmt: skip

    xs = inputs()
    trace = trace_function(lambda *a: _batch_norm(*a, training), *xs)
    extrace = transform_for_execution(trace, ("torch_ops", "torch"))
    text = extrace.python()
    # In training the statistics are updated by the decomposition's copy_ (the program's write).
    assert ("torch_ops.batch_norm(" in text) is not training, text
    ys = [x.clone() for x in xs]
    got = extrace.python_callable()(*xs)
    expected = F.batch_norm(ys[0], ys[1], ys[2], ys[3], ys[4], training, 0.1, 1e-5)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(xs[1], ys[1])  # running statistics: eager's, written or not
    torch.testing.assert_close(xs[2], ys[2])
    if training:  # without running statistics nothing is written: kept in training too
        x, w, b = xs[0], xs[3], xs[4]
        trace = trace_function(lambda x, w, b: _batch_norm(x, None, None, w, b, True), x, w, b)
        extrace = transform_for_execution(trace, ("torch_ops",))
        assert "torch_ops.batch_norm(" in extrace.python()
        torch.testing.assert_close(
            extrace.python_callable()(x, w, b), F.batch_norm(x, None, None, w, b, True)
        )


def test_instance_norm_with_running_statistics_runs_decomposed() -> None:
    xs = [torch.randn(2, 3, 5), torch.randn(3), torch.rand(3) + 0.5]
    trace = trace_function(
        lambda x, rm, rv: ltorch.instance_norm(x, rm, rv, None, None, False), *xs
    )
    extrace = transform_for_execution(trace, ("torch_ops", "torch"))
    assert "torch_ops.instance_norm(" not in extrace.python()
    torch.testing.assert_close(
        extrace.python_callable()(*xs), F.instance_norm(*xs, use_input_stats=False)
    )
    trace = trace_function(lambda x: ltorch.instance_norm(x), xs[0])
    assert "torch_ops.instance_norm(" in transform_for_execution(trace, ("torch_ops",)).python()


def test_a_call_torch_does_not_take_as_recorded_runs_decomposed() -> None:
    # Decompositions and grad rules call ops by their own parameter names (``a=``): torch's
    # function would not take them, so the call runs as its decomposition.
    x = torch.randn(4, 5)
    extrace = transform_for_execution(
        trace_function(lambda x: ltorch.relu(a=x), x), ("torch_ops", "torch")
    )
    assert "torch_ops.relu(" not in extrace.python()
    torch.testing.assert_close(extrace.python_callable()(x), torch.relu(x))


@pytest.mark.parametrize(
    "executors", [("torch_ops", "torch"), ("torchcompile", "torch_ops", "torch")]
)
def test_an_in_place_activation_kept_whole_keeps_its_write_in_program_order(
    executors: tuple[str, ...],
) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        F.relu(y, inplace=True)
        return y + 1  # reads y after the write

    jf = thunder.jit(f, executors=executors)
    for _ in range(2):
        x = torch.randn(16)
        torch.testing.assert_close(jf(x), f(x))
    assert "torch_ops.relu(" in thunder.last_traces(jf)[-1].python()


# End to end: a convolutional block ----------------------------------------------------------------


def test_conv_block_in_eval_runs_its_ops_whole_and_matches_eager() -> None:
    torch.manual_seed(0)
    model = ConvBlock().eval()
    jm = thunder.jit(model)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 16, 16)
            torch.testing.assert_close(jm(x), model(x))
    text = thunder.last_traces(jm)[-1].python()
    for op in ("conv2d", "batch_norm", "relu", "hardswish", "adaptive_avg_pool2d", "linear"):
        assert f"torch_ops.{op}(" in text, text
    assert "torch.where" not in text, text  # relu and hardswish were not decomposed
    # max pooling runs as its decomposition on the CPU (strided slices and maxima: faster there)
    assert "torch_ops.max_pool2d(" not in text, text


def test_conv_block_training_step_matches_eager() -> None:
    torch.manual_seed(0)
    model = ConvBlock().train()
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    for _ in range(2):
        model.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
        x, target = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
        loss = F.cross_entropy(jm(x), target)
        expected = F.cross_entropy(reference(x), target)
        torch.testing.assert_close(loss, expected)
        loss.backward()
        expected.backward()
        params = dict(reference.named_parameters())
        for name, p in model.named_parameters():
            assert p.grad is not None, name
            torch.testing.assert_close(p.grad, params[name].grad, atol=1e-5, rtol=1e-4)
        buffers = dict(reference.named_buffers())
        for name, b in model.named_buffers():
            torch.testing.assert_close(b, buffers[name], msg=name)
    # Evaluation after training: the running statistics the steps wrote.
    model.eval()
    reference.eval()
    with torch.no_grad():
        x = torch.randn(2, 3, 16, 16)
        torch.testing.assert_close(jm(x), reference(x))


def test_average_pooling_is_kept_on_the_cpu_for_large_windows_and_in_3d() -> None:
    # A pass per window element: faster than torch's CPU kernel for small windows, not for large.
    x = torch.randn(2, 4, 14, 14)
    for k, kept in ((2, False), (3, False), (7, True)):
        extrace = transform_for_execution(
            trace_function(lambda x, k=k: ltorch.avg_pool2d(x, k), x), ("torch_ops", "torch")
        )
        assert ("torch_ops.avg_pool2d(" in extrace.python()) is kept, k
        torch.testing.assert_close(extrace.python_callable()(x), F.avg_pool2d(x, k))
    # Of 3-d windows, torch's kernel is the faster for every size measured.
    x = torch.randn(2, 4, 6, 8, 8)
    for k in (2, (1, 3, 3)):
        extrace = transform_for_execution(
            trace_function(lambda x, k=k: ltorch.avg_pool3d(x, k), x), ("torch_ops", "torch")
        )
        assert "torch_ops.avg_pool3d(" in extrace.python(), k
        torch.testing.assert_close(extrace.python_callable()(x), F.avg_pool3d(x, k))


class _SmallCNN(torch.nn.Module):
    """Conv, BatchNorm (trained, and frozen in evaluation mode), inplace ReLU, Hardswish, max and
    average pooling."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x)), inplace=True), 2)
        x = F.hardswish(self.bn2(self.conv2(x)))
        return F.avg_pool2d(x, 4).flatten(1)


def test_small_cnn_training_steps_match_eager_with_a_frozen_batch_norm() -> None:
    torch.manual_seed(0)
    model = _SmallCNN().train()
    model.bn2.eval()  # frozen statistics: read, not written, while its parameters train
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    for _ in range(2):
        x, target = torch.randn(4, 3, 16, 16), torch.randn(4, 32)
        loss = F.mse_loss(jm(x), target)
        expected = F.mse_loss(reference(x), target)
        torch.testing.assert_close(loss, expected)
        loss.backward()
        expected.backward()
        params = dict(reference.named_parameters())
        for name, p in model.named_parameters():
            assert p.grad is not None, name
            torch.testing.assert_close(p.grad, params[name].grad, atol=1e-5, rtol=1e-4)
            p.grad = params[name].grad = None
        buffers = dict(reference.named_buffers())
        for name, b in model.named_buffers():
            torch.testing.assert_close(b, buffers[name], msg=name)
    assert int(model.bn2.num_batches_tracked) == 0 and int(model.bn1.num_batches_tracked) == 2
    with torch.no_grad():  # inference: the ops kept whole, the same values
        model.eval()
        reference.eval()
        x = torch.randn(2, 3, 16, 16)
        torch.testing.assert_close(jm(x), reference(x))
        text = thunder.last_traces(jm)[-1].python()
        assert "torch_ops.batch_norm(" in text and "torch_ops.relu(" in text, text
