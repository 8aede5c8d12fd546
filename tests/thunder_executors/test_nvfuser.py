"""The nvFuser executor: regions of CUDA prims translated into fusion definitions, checked against
a recording stand-in of the FusionDefinition API; the real run needs nvfuser and CUDA."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from thunder_executors import executor_availability, get_executor, transform_for_execution
from thunder_executors.nvfuser_executor import (
    NvFuserExecutor,
    NvFuserRegion,
    define_fusion,
    layout_of,
)
from thunder_ir import TensorProxy, Trace, dtypes, prims
from thunder_ir.tracectx import tracectx


class Handle:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


class RecordingOps:
    def __init__(self, fd: RecordingFusionDefinition) -> None:
        self._fd = fd

    def __getattr__(self, op: str) -> Any:
        def record(*args: Any) -> Any:
            outs = 2 if op == "var_mean" else 1
            handles = [self._fd.new("T") for _ in range(outs)]
            self._fd.lines.append(
                f"{', '.join(map(repr, handles))} = fd.ops.{op}({', '.join(map(repr, args))})"
            )
            return tuple(handles) if outs > 1 else handles[0]

        return record


class RecordingFusionDefinition:
    """Stands in for nvfuser.FusionDefinition: records every call as a line of Python."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ops = RecordingOps(self)
        self._counts: dict[str, int] = {}

    def new(self, prefix: str) -> Handle:
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return Handle(f"{prefix}{n}")

    def define_tensor(
        self, *, shape: list[int], contiguity: list[Any], dtype: Any, is_cpu: bool
    ) -> Handle:
        h = self.new("T")
        self.lines.append(
            f"{h} = fd.define_tensor(shape={shape}, contiguity={contiguity}, dtype={dtype}, is_cpu={is_cpu})"
        )
        return h

    def define_scalar(self, value: Any = None, *, dtype: Any) -> Handle:
        h = self.new("S")
        self.lines.append(
            f"{h} = fd.define_scalar({'' if value is None else repr(value) + ', '}dtype={dtype})"
        )
        return h

    def add_output(self, v: Handle) -> None:
        self.lines.append(f"fd.add_output({v})")


class DataType:
    def __getattr__(self, name: str) -> Handle:
        return Handle(f"DataType.{name}")


class TranslatingNvFuser(NvFuserExecutor):
    """The real executor's region forming, as if nvfuser and CUDA were present."""

    def availability(self) -> tuple[bool, str]:
        return True, ""


def cuda_trace() -> Trace:
    trace = Trace()
    with tracectx(trace):
        a = TensorProxy("a", shape=(4, 8), dtype=dtypes.float32, device="cuda:0")
        b = TensorProxy("b", shape=(8,), dtype=dtypes.float32, device="cuda:0")
        trace.args = (a, b)
        x = prims.add(a, prims.broadcast_in_dim(b, (4, 8), (1,)))
        y = prims.mul(prims.exp(x), 2.0)
        h = prims.convert_element_type(y, dtypes.bfloat16)
        var, mean = prims.var_mean(y, (1,), correction=0)
        s = prims.sum(y, (0,))
        prims.python_return((h, var, mean, s))
    return trace


def test_a_region_translates_into_a_fusion_definition() -> None:
    extrace = transform_for_execution(cuda_trace(), (TranslatingNvFuser(), "torch"))
    assert len(extrace.fusion_regions) == 1
    region = extrace.fusion_regions[0]
    assert "nvfuser.nvFusion0(a, b)" in extrace.python()
    impl = region.sym.impl
    assert isinstance(impl, NvFuserRegion)

    fd = RecordingFusionDefinition()
    layouts = [layout_of(torch.empty(4, 8)), layout_of(torch.empty(8))]
    define_fusion(fd, DataType(), impl.region, impl.inputs, impl.outputs, layouts)
    assert fd.lines == [
        "T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)",
        "T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)",
        "T2 = fd.ops.broadcast_in_dim(T1, [4, 8], [1])",
        "T3 = fd.ops.add(T0, T2)",
        "T4 = fd.ops.exp(T3)",
        "S0 = fd.define_scalar(2.0, dtype=DataType.Double)",
        "T5 = fd.ops.mul(T4, S0)",
        "T6 = fd.ops.cast(T5, DataType.BFloat16)",
        "T7, T8 = fd.ops.var_mean(T5, [1], 0, False)",
        "T9 = fd.ops.sum(T5, [0], False, DataType.Float)",
        "fd.add_output(T6)",
        "fd.add_output(T7)",
        "fd.add_output(T8)",
        "fd.add_output(T9)",
    ]


def test_layouts_follow_nvfusers_contiguity_convention() -> None:
    t = torch.empty(4, 1, 6)
    assert layout_of(t).contiguity == (True, None, True) and layout_of(t).shape == (-1, 1, -1)
    assert layout_of(torch.empty(6, 4)[:, :2]).contiguity == (False, True)
    assert layout_of(torch.tensor(1.0)).is_cpu


def test_cpu_tensors_and_untranslatable_prims_are_not_claimed() -> None:
    trace = Trace()
    with tracectx(trace):
        a = TensorProxy("a", shape=(3, 3), dtype=dtypes.float32, device="cpu")
        trace.args = (a,)
        prims.python_return(prims.exp(prims.matmul(a, a)))
    ex = TranslatingNvFuser()
    assert not any(ex.can_fuse(b) for b in trace.bound_symbols)
    cuda = cuda_trace()
    assert all(ex.can_fuse(b) for b in cuda.bound_symbols[:-1])


def test_unavailable_here_says_why() -> None:
    ok, why = executor_availability()["nvfuser"]
    ex = get_executor("nvfuser")
    if not ok:
        assert why
        with pytest.raises(RuntimeError, match="not available"):
            transform_for_execution(cuda_trace(), (ex,))


def test_real_nvfuser_run_matches_torch() -> None:
    if not get_executor("nvfuser").is_available():
        pytest.skip(executor_availability()["nvfuser"][1])
    a, b = torch.randn(4, 8, device="cuda"), torch.randn(8, device="cuda")
    extrace = transform_for_execution(cuda_trace(), ("nvfuser",))
    h, var, mean, s = extrace.python_callable()(a, b)
    y = torch.exp(a + b) * 2.0
    torch.testing.assert_close(h, y.bfloat16())
    torch.testing.assert_close((var, mean), torch.var_mean(y, 1, correction=0))
    torch.testing.assert_close(s, y.sum(0))
