"""The Triton executor: softmax and fused cross-entropy kernels against eager torch (forward, and
the backward kernel's gradient against torch.autograd), the executor's claims, and ahead-of-time
compilation of every kernel for a CUDA target (no GPU needed)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from thunder_executors import get_executor, transform_for_execution
from thunder_executors.triton_executor import interpreted, triton_executor
from thunder_ir import ops as ltorch
from thunder_ir import trace_function

if not triton_executor.is_available():
    pytest.skip(
        f"triton executor unavailable: {triton_executor.availability()[1]}", allow_module_level=True
    )

from thunder_executors import triton_kernels as K  # noqa: E402

DEVICE = "cpu" if interpreted() else "cuda"


@pytest.mark.parametrize(
    "shape,dim", [((4, 10), -1), ((3, 5, 33), 1), ((7, 1000), -1), ((2, 3), 0)]
)
def test_softmax_kernel_matches_torch(shape: tuple[int, ...], dim: int) -> None:
    for _ in range(2):
        x = torch.randn(shape, device=DEVICE) * 3
        torch.testing.assert_close(K.softmax(x, dim), torch.softmax(x, dim))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("n_rows,n_classes", [(8, 37), (5, 1000), (1, 3)])
def test_cross_entropy_forward_and_backward_kernels_match_autograd(
    reduction: str, n_rows: int, n_classes: int
) -> None:
    logits = torch.randn(n_rows, n_classes, device=DEVICE) * 2
    target = torch.randint(0, n_classes, (n_rows,), device=DEVICE)
    if n_rows > 2:
        target[1] = -100  # ignored rows add nothing, and do not count in the mean
    ours = logits.clone().requires_grad_()
    ref = logits.clone().requires_grad_()
    out = K.cross_entropy(ours, target, reduction=reduction)
    expected = F.cross_entropy(ref, target, reduction=reduction)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(expected)
    out.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(ours.grad, ref.grad)


def test_backward_kernel_alone_gives_the_gradient_of_the_mean_loss() -> None:
    logits = torch.randn(6, 11, device=DEVICE)
    target = torch.randint(0, 11, (6,), device=DEVICE)
    _, lse = K.cross_entropy_forward(logits, target, -100)
    grad = K.cross_entropy_backward(torch.tensor(1.0 / 6, device=DEVICE), logits, target, lse, -100)
    ref = logits.clone().requires_grad_()
    F.cross_entropy(ref, target).backward()
    torch.testing.assert_close(grad, ref.grad)


def test_the_executor_claims_what_its_kernels_can_run() -> None:
    x = torch.randn(8, 37, device=DEVICE)
    target = torch.randint(0, 37, (8,), device=DEVICE)

    def f(x: Any, t: Any) -> Any:
        return (
            ltorch.cross_entropy(x, t),
            ltorch.softmax(x, -1),
            ltorch.cross_entropy(x, t, label_smoothing=0.1),
        )

    extrace = transform_for_execution(trace_function(f, x, target), ("triton",))
    text = extrace.python()
    assert "triton.cross_entropy(t0, t1, ignore_index=-100, reduction='mean')" in text
    assert "triton.softmax(t0, -1)" in text
    assert text.count("triton.cross_entropy") == 1  # label smoothing: refused by the checker
    loss, probs, smoothed = extrace.python_callable()(x, target)
    torch.testing.assert_close(loss, F.cross_entropy(x, target))
    torch.testing.assert_close(probs, torch.softmax(x, -1))
    torch.testing.assert_close(smoothed, F.cross_entropy(x, target, label_smoothing=0.1))


def test_float64_is_left_to_other_executors() -> None:
    x = torch.randn(4, 5, dtype=torch.float64, device=DEVICE)
    extrace = transform_for_execution(
        trace_function(lambda x: ltorch.softmax(x, -1), x), ("triton",)
    )
    assert "triton." not in extrace.python()
    torch.testing.assert_close(extrace.python_callable()(x), torch.softmax(x, -1))


_COMPILE_ALL = """
import json
import triton
from triton.backends.compiler import GPUTarget
from thunder_executors import triton_kernels as K

sizes = {}
for name, (kernel, signature) in K.KERNELS.items():
    src = triton.compiler.ASTSource(fn=kernel, signature={**signature, "BLOCK": "constexpr"}, constexprs={"BLOCK": 1024})
    compiled = triton.compile(src, target=GPUTarget("cuda", 80, 32))
    assert ".entry " + name in compiled.asm["ptx"], name
    sizes[name] = len(compiled.asm["cubin"])
print(json.dumps(sizes))
"""


def test_kernels_compile_for_a_cuda_target_without_a_gpu() -> None:
    # In a fresh process without the interpreter: triton.jit then gives compilable kernels (an
    # interpreter run in this process leaves triton.language unusable for the compiler).
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "0"}
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_ALL], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    sizes = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(sizes) == set(K.KERNELS) and all(n > 0 for n in sizes.values())


def test_registered_by_name() -> None:
    assert get_executor("triton") is triton_executor
