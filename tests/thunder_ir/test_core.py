"""dtypes, devices, proxies, symbols, traces and codegen."""

from __future__ import annotations

import pytest
import torch

from thunder_ir import (
    BoundSymbol,
    IntegerProxy,
    OpTag,
    Symbol,
    TensorProxy,
    Trace,
    devices,
    dtypes,
    prims,
    trace_function,
    tracectx,
)
from thunder_ir import ops as ltorch
from thunder_ir.utils import promote_types, result_type


@pytest.mark.parametrize("dtype", dtypes.all_dtypes, ids=str)
def test_dtype_round_trips_through_torch(dtype: dtypes.DType) -> None:
    assert dtypes.from_torch_dtype(dtypes.to_torch_dtype(dtype)) == dtype  # type: ignore[arg-type]


def test_weak_dtypes_of_python_scalars() -> None:
    assert dtypes.to_dtype(float).is_weak and dtypes.to_dtype(float).strong() == dtypes.float32
    assert dtypes.to_dtype(int).strong() == dtypes.int64
    assert dtypes.to_dtype(bool).strong() == dtypes.bool8
    assert dtypes.float8_e4m3fn.shortname == "f8_e4m3fn" and dtypes.bfloat16.shortname == "bf16"


def test_promote_types_matches_torch_on_every_pair() -> None:
    usable = [d for d in dtypes.all_dtypes if not (d.is_float and d.bytes == 1)]
    for a in usable:
        for b in usable:
            want = torch.promote_types(dtypes.to_torch_dtype(a), dtypes.to_torch_dtype(b))  # type: ignore[arg-type]
            assert dtypes.to_torch_dtype(promote_types(a, b)) == want, (a, b)


@pytest.mark.parametrize(
    "make",
    [
        lambda: (torch.ones(2, dtype=torch.int32), 2.5),
        lambda: (torch.ones(2, dtype=torch.float16), torch.ones((), dtype=torch.float64)),
        lambda: (torch.ones((), dtype=torch.int64), 1.5),
        lambda: (torch.ones(2, dtype=torch.bool), 3),
        lambda: (torch.ones(2, dtype=torch.uint8), torch.ones(2, dtype=torch.int8)),
        lambda: (torch.ones(2, dtype=torch.bfloat16), 1j),
        lambda: (torch.ones(2, dtype=torch.int64), torch.ones((), dtype=torch.float16)),
    ],
)
def test_result_type_matches_torch(make: object) -> None:
    a, b = make()  # type: ignore[operator]
    with tracectx(Trace()):
        pa = _proxy(a)
        pb = _proxy(b) if isinstance(b, torch.Tensor) else b
        assert dtypes.to_torch_dtype(result_type(pa, pb)) == torch.result_type(a, b)


def _proxy(t: torch.Tensor) -> TensorProxy:
    return TensorProxy(shape=tuple(t.shape), dtype=t.dtype, device=t.device)


def test_devices() -> None:
    assert devices.to_device("cuda") == devices.Device("cuda", 0)
    assert devices.to_device(torch.device("cpu")) == devices.cpu
    assert devices.to_torch_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match="unknown device type"):
        devices.Device("tpu")


def test_proxy_names_are_unique_within_a_trace() -> None:
    t = Trace()
    with tracectx(t):
        a = TensorProxy(shape=(2,), dtype=torch.float32, device="cpu")
        b = TensorProxy(shape=(2,), dtype=torch.float32, device="cpu")
        named = TensorProxy("t1x", shape=(), dtype=dtypes.int64, device="cpu")
        assert len({a.name, b.name, named.name}) == 3
        with pytest.raises(ValueError, match="already used"):
            TensorProxy("t1x", shape=(), dtype=dtypes.int64, device="cpu")
    with pytest.raises(RuntimeError, match="needs a name outside of tracing"):
        TensorProxy(shape=(), dtype=dtypes.int64, device="cpu")


def test_bound_symbol_replace_and_flat_views() -> None:
    t = Trace()
    with tracectx(t):
        a = TensorProxy(shape=(2, 3), dtype=dtypes.float32, device="cpu")
        out = prims.sum(a, (1,))
    (bsym,) = t.bound_symbols
    assert isinstance(bsym, BoundSymbol) and bsym.sym is prims.sum
    assert bsym.flat_proxy_args == (a,) and bsym.flat_proxy_outs == (out,)
    other = bsym.replace(args=(a, (0,)))
    assert other.args == (a, (0,)) and bsym.args == (a, (1,))
    with pytest.raises(TypeError, match="unknown fields"):
        bsym.replace(nonsense=1)
    assert bsym.has_tag(OpTag.REDUCTION)


def test_composite_op_records_its_prims_as_subsymbols() -> None:
    trace = trace_function(
        lambda a, b: ltorch.add(a, b, alpha=2), torch.randn(2, 3), torch.randn(3)
    )
    (add, ret) = trace.bound_symbols
    assert add.sym is ltorch.add and ret.sym is prims.python_return
    assert [s.sym.name for s in add.subsymbols] == ["mul", "broadcast_in_dim", "add"]
    assert add.subsymbols[0].sym is ltorch.mul


def test_printed_trace_golden() -> None:
    trace = trace_function(
        lambda a, b: ltorch.sum(ltorch.mul(a, b), 0), torch.randn(2, 3), torch.randn(2, 3)
    )
    assert trace.python() == (
        "def computation(t0, t1):\n"
        '  # t0: "cpu f32[2, 3]"\n'
        '  # t1: "cpu f32[2, 3]"\n'
        '  t2 = ltorch.mul(t0, t1)  # t2: "cpu f32[2, 3]"\n'
        '    # t2 = prims.mul(t0, t1)  # t2: "cpu f32[2, 3]"\n'
        '  t3 = ltorch.sum(t2, 0)  # t3: "cpu f32[3]"\n'
        '    # t3 = prims.sum(t2, (0,))  # t3: "cpu f32[3]"\n'
        "  return t3\n"
    )


def test_printed_trace_compiles_and_ir_symbols_refuse_to_run_outside_tracing() -> None:
    trace = trace_function(lambda a: ltorch.exp(a), torch.randn(3))
    fn = trace.python_callable()
    with pytest.raises(RuntimeError, match="called outside of tracing"):
        fn(torch.randn(3))


def test_python_callable_runs_exactly_the_printed_text() -> None:
    # Bind prims to torch by hand: what runs is the printed source.
    trace = trace_function(lambda a, b: prims.add(a, b), torch.randn(3), torch.randn(3))
    fn = trace.python_callable({"prims": type("P", (), {"add": staticmethod(torch.add)})})
    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(fn(a, b), a + b)
    assert fn.__thunder_source__ == trace.python(subsymbol_depth=0)  # type: ignore[attr-defined]


def test_constants_print_as_python() -> None:
    trace = Trace()
    with tracectx(trace):
        a = TensorProxy(shape=(2,), dtype=dtypes.float32, device="cpu")
        trace.args = (a,)
        prims.full((2,), float("inf"), device=devices.cpu, dtype=dtypes.bfloat16)
        prims.python_return(None)
    text = trace.python()
    assert (
        "prims.full((2,), float('inf'), device=devices.Device(\"cpu\"), dtype=dtypes.bfloat16)"
        in text
    )


def test_number_proxies_record_arithmetic_and_constraints() -> None:
    trace = Trace()
    with tracectx(trace):
        n = IntegerProxy(value=7)
        m = n * 2 + 1
        assert isinstance(m, IntegerProxy) and m.value == 15
        if m > 10:
            pass
        if n > 3:
            pass
    assert [b.sym.name for b in trace.bound_symbols] == ["mul", "add", "gt", "gt"]
    # 2 * i0 + 1 > 10 is solved for i0 (i0 > 4), which implies i0 > 3.
    assert trace.constraint().python() == "(i0 > 4)"
    assert trace.constraint().evaluate({"i0": 7}) is True
    assert trace.constraint().evaluate({"i0": 4}) is False


def test_symbol_declared_with_torch_names_maps_torch_callables() -> None:
    mapping = ltorch.torch_symbol_map()
    assert mapping[torch.add] is ltorch.add
    assert mapping[torch.Tensor.add] is ltorch.add
    assert mapping[torch.reshape] is ltorch.reshape


def test_tensor_proxy_methods_and_operators_record_ops() -> None:
    def f(a: TensorProxy, b: TensorProxy) -> TensorProxy:
        return (a + b) * 2

    trace = trace_function(f, torch.randn(2), torch.randn(2))
    assert [b.sym.name for b in trace.bound_symbols] == ["add", "mul", "python_return"]


def test_tensor_proxy_bool_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="depends on its data"):
        trace_function(lambda a: bool(a), torch.randn(2))


def test_custom_symbol_tags_and_repr() -> None:
    s = Symbol("my_op", lambda x: x, module="mylib", tags=(OpTag.DONT_DCE,))
    assert (
        s.qualified_name == "mylib.my_op" and OpTag.DONT_DCE in s.tags and "mylib.my_op" in repr(s)
    )


def test_default_dtype_is_read_at_trace_time() -> None:
    from thunder_executors import transform_for_execution

    def f(a: TensorProxy) -> object:
        return ltorch.exp(a) + ltorch.zeros(3) + a * 2.5

    previous = torch.get_default_dtype()
    try:
        for default in (torch.float64, torch.float32):
            torch.set_default_dtype(default)
            a = torch.arange(3)
            got = transform_for_execution(trace_function(f, a)).python_callable()(a)
            want = torch.exp(a) + torch.zeros(3) + a * 2.5
            assert got.dtype == want.dtype == default
            torch.testing.assert_close(got, want)
    finally:
        torch.set_default_dtype(previous)
