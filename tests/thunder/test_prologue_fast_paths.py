"""The prologue's fast forms (submodules and parameters read from the module's dicts, reads and
checks inlined) decide exactly what the ordinary forms decide: every change recompiles or
raises as eager does, never a stale result."""

from __future__ import annotations

import pytest
import torch

import thunder


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.scale = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.scale


def _check(jm: torch.nn.Module, m: torch.nn.Module) -> None:
    x = torch.randn(3, 4)
    torch.testing.assert_close(jm(x), m(x))


def test_prologue_reads_members_directly_and_inlines_checks() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    source = str(thunder.last_prologue_traces(jm)[-1])
    assert "thunder_guards.unpack_module_attr(fn, 'lin')" in source
    assert "if type(" in source and "prims.check_value(" in source  # inline test, failing call


def test_replaced_submodule_and_parameter_recompile() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    m.lin = torch.nn.Linear(4, 4)
    _check(jm, m)
    m.lin.weight = torch.nn.Parameter(torch.randn(4, 4))
    _check(jm, m)
    m.lin.bias = None
    _check(jm, m)
    # New modules and weights of the same metadata are read afresh without compiling again.
    assert thunder.compile_stats(jm).compilations == 2


def test_instance_dict_shadowing_a_submodule_is_read_like_getattr() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    other = torch.nn.Linear(4, 4)
    m.__dict__["lin"] = other  # bypasses Module.__setattr__: plain lookup now finds this one
    assert m.lin is other
    _check(jm, m)


def test_deleted_attribute_raises_as_eager() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    del m.scale
    with pytest.raises(AttributeError, match="scale"):
        m(torch.randn(3, 4))
    with pytest.raises(AttributeError, match="scale"):
        jm(torch.randn(3, 4))
    m.scale = 3.0
    _check(jm, m)


def test_changed_plain_values_recompile() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    for value in (3, 2.5, True):
        m.scale = value
        _check(jm, m)


class Deep(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(Net(), torch.nn.ReLU(), Net())
        self.register_buffer("offset", torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x) + self.offset


def _changes() -> list[tuple[str, object]]:
    def new_shape(m: Deep) -> None:
        m.offset = torch.randn(1)  # broadcasts: another program, same result as eager

    def dtype(m: Deep) -> None:
        m.offset = m.offset.double()

    def no_grad(m: Deep) -> None:
        m.blocks[0].lin.weight.requires_grad_(False)

    def plain_tensor(m: Deep) -> None:
        w = m.blocks[0].lin.weight
        del m.blocks[0].lin.weight
        m.blocks[0].lin.weight = w.detach().clone()  # a plain attribute tensor, not a Parameter

    def strided(m: Deep) -> None:  # same metadata, other strides: no recompile needed
        m.blocks[2].lin.weight = torch.nn.Parameter(torch.randn(4, 4).t())

    def hook_deep(m: Deep) -> None:
        m.blocks[2].lin.register_forward_hook(lambda mod, args, out: out * 3)

    def pre_hook_on_relu(m: Deep) -> None:
        m.blocks[1].register_forward_pre_hook(lambda mod, args: (args[0] - 1,))

    return [
        ("new_shape", new_shape),
        ("dtype", dtype),
        ("no_grad", no_grad),
        ("plain_tensor", plain_tensor),
        ("strided", strided),
        ("hook_deep", hook_deep),
        ("pre_hook_on_relu", pre_hook_on_relu),
    ]


@pytest.mark.parametrize("name,change", _changes(), ids=[n for n, _ in _changes()])
def test_batched_tensor_and_hook_checks_see_every_change(name: str, change: object) -> None:
    """The metadata of parameters and buffers, and the hooks of every submodule, are checked in
    one call each: a change to any one of them, deep in the tree, gives eager's result."""
    torch.manual_seed(0)
    m = Deep()
    jm = thunder.jit(m)
    x = torch.randn(3, 4)
    torch.testing.assert_close(jm(x), m(x))
    change(m)  # type: ignore[operator]
    for _ in range(2):
        x = torch.randn(3, 4)
        expected = m(x)
        got = jm(x)
        torch.testing.assert_close(got, expected)
        assert got.dtype == expected.dtype
    if name == "strided":
        assert thunder.compile_stats(jm).compilations == 1


def test_tensor_check_under_inference_mode_and_back() -> None:
    m = Deep()
    jm = thunder.jit(m)
    x = torch.randn(3, 4)
    torch.testing.assert_close(jm(x), m(x))
    with torch.inference_mode():
        torch.testing.assert_close(jm(x), m(x))
    torch.testing.assert_close(jm(x), m(x))
    assert thunder.compile_stats(jm).compilations <= 2


def test_failed_tensor_check_names_the_tensor() -> None:
    from thunder.guards import TensorsMetadata

    a, b = torch.randn(2, 3), torch.nn.Parameter(torch.randn(4))
    meta = TensorsMetadata(["fn.a", "fn.b"], [a, b])
    assert meta.check(a, b)
    assert meta.check(torch.randn(3, 2).t(), b)  # strides are not checked
    assert not meta.check(a, torch.nn.Parameter(torch.randn(5)))
    assert "fn.b" in (meta.first_mismatch([a, torch.nn.Parameter(torch.randn(5))]) or "")
    assert not meta.check(a, torch.nn.Parameter(torch.randn(4, dtype=torch.float64)))
    assert not meta.check(a, torch.nn.Parameter(torch.randn(4), requires_grad=False))
    assert not meta.check(a.double(), b)


def test_module_with_hooks_swapped_in_after_a_passing_check_is_seen() -> None:
    """The hook check skips its scan while no hook was registered and the modules are the same
    objects: a module that got its hook earlier, swapped into the tree later, is still seen."""
    torch.manual_seed(0)
    m = Deep()
    jm = thunder.jit(m)
    x = torch.randn(3, 4)
    torch.testing.assert_close(jm(x), m(x))
    spare = Net()
    spare.lin.load_state_dict(m.blocks[2].lin.state_dict())
    spare.register_forward_hook(lambda mod, args, out: out + 100)
    torch.testing.assert_close(jm(x), m(x))  # a full check passes after the registration
    m.blocks[2] = spare
    expected = m(x)
    assert expected.abs().min() > 50
    torch.testing.assert_close(jm(x), expected)


def test_module_compile_after_jit_is_seen() -> None:
    m = Deep()
    jm = thunder.jit(m)
    x = torch.randn(3, 4)
    jm(x)
    m.blocks[0].__dict__["_compiled_call_impl"] = lambda *a, **k: torch.zeros(3, 4)
    torch.testing.assert_close(jm(x), m(x))


_FACTOR = 2.0


def _scaled(x: torch.Tensor) -> torch.Tensor:
    return x * _FACTOR + abs(-1)  # a module global and a builtin


def test_inlined_global_reads_follow_rebinding_shadowing_and_deletion() -> None:
    global _FACTOR
    jf = thunder.jit(_scaled)
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), _scaled(x))
    assert "_FACTOR'] if '_FACTOR' in" in str(thunder.last_prologue_traces(jf)[-1])
    try:
        _FACTOR = 3.0
        torch.testing.assert_close(jf(x), _scaled(x))
        globals()["abs"] = lambda v: 10 * v  # the module now shadows the builtin
        torch.testing.assert_close(jf(x), _scaled(x))
        del globals()["abs"]
        torch.testing.assert_close(jf(x), _scaled(x))
        import builtins

        original_abs = builtins.abs
        builtins.abs = lambda v: 100 * v  # patched where every module finds it
        try:
            torch.testing.assert_close(jf(x), _scaled(x))
        finally:
            builtins.abs = original_abs
        torch.testing.assert_close(jf(x), _scaled(x))
        del globals()["_FACTOR"]
        with pytest.raises(NameError):
            _scaled(x)
        with pytest.raises(NameError):
            jf(x)
    finally:
        globals().pop("abs", None)
        _FACTOR = 2.0
    torch.testing.assert_close(jf(x), _scaled(x))


def test_inlined_member_read_of_a_moved_member() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    weight = m.lin.weight
    del m.lin.weight
    m.lin.register_buffer("weight", weight.detach().clone())  # the name moves to _buffers
    _check(jm, m)
