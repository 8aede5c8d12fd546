"""Every error path of thunder.jit says what is wrong and where."""

from __future__ import annotations

import pytest
import torch
from runs_by_torch import call_split

import thunder


def uses_unsupported(x):
    return x * max(x.tolist())  # a list of over 4096 elements is not read while tracing


def _seeded(fn, x):
    return fn(x.clone())


def test_data_dependent_op_runs_eagerly_naming_the_op_and_the_users_line():
    # torch runs it; until the program is split there, the call runs eagerly, visibly
    x = torch.randn(5000)
    jf = thunder.jit(uses_unsupported)
    with pytest.warns(UserWarning, match="the call ran eagerly") as record:
        got = _seeded(jf, x)
    torch.testing.assert_close(got, _seeded(uses_unsupported, x))
    message = str(record[0].message)
    assert "tolist" in message and "reads tensor data" in message
    assert f"{__file__}:{uses_unsupported.__code__.co_firstlineno + 1}" in message
    assert thunder.compile_stats(jf).eager_fallbacks == 1


def test_data_dependent_op_is_not_swallowed_by_user_except():
    def f(x):
        try:
            return uses_unsupported(x)
        except Exception:
            return x

    x = torch.randn(5000)
    with pytest.warns(UserWarning, match="ran eagerly"):
        got = _seeded(thunder.jit(f), x)
    # eager's path, not the except clause
    torch.testing.assert_close(got, _seeded(uses_unsupported, x))


def test_data_dependent_tensor_creation_is_compiled():
    def f(x):
        return x + torch.unique(torch.ones(3))

    x = torch.randn(3)
    jf = thunder.jit(f)
    torch.testing.assert_close(jf(x), f(x))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_unreplayable_write_runs_split():
    # (An object the function builds is rebuilt on every call; one that refers to itself is not.)
    holder = {}

    class Thing:
        pass

    def f(x):
        thing = Thing()
        thing.me = thing
        holder["thing"] = thing
        return x

    x = torch.randn(1)
    torch.testing.assert_close(call_split(thunder.jit(f), x, match="Thing"), x)
    thing = holder["thing"]  # stored once, by torch's run (tracing left nothing behind)
    assert isinstance(thing, Thing) and thing.me is thing


def test_user_exceptions_keep_their_type():
    def f(x):
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        thunder.jit(f)(torch.randn(1))


def test_not_callable():
    with pytest.raises(TypeError, match="expects a function or an nn.Module"):
        thunder.jit(3)


def test_transforms_must_be_transforms():
    with pytest.raises(TypeError, match="thunder.Transform"):
        thunder.jit(lambda x: x, transforms=[object()])


def reflect_padded(x):
    return torch.nn.functional.pad(x, (1, 1), mode="reflect") * 2  # the refused option


def test_an_ir_refusal_is_typed_and_the_call_takes_the_fallback():
    from thunder.binding.fallback import is_ir_refusal
    from thunder_ir import UnsupportedOptionError
    from thunder_ir import ops as ltorch

    # The IR op refuses reflect padding with its typed error, caught by type ...
    with pytest.raises(UnsupportedOptionError) as info:
        thunder_ir_trace(lambda x: ltorch.pad(x, (1, 1), mode="reflect"), torch.randn(2, 3))
    assert is_ir_refusal(info.value)
    # ... while a plain NotImplementedError (the program's own) is not a refusal, wherever raised.
    assert not is_ir_refusal(NotImplementedError("mine"))
    # Through the jit, the call runs as torch's own function instead.
    x = torch.randn(2, 3)
    jf = thunder.jit(reflect_padded)
    torch.testing.assert_close(jf(x), reflect_padded(x))
    assert "torch_fallback('torch.nn.functional.pad'" in str(thunder.last_traces(jf)[0])


def thunder_ir_trace(fn, *args):
    from thunder_ir import trace_function

    return trace_function(fn, *args)


def test_a_programs_own_not_implemented_error_keeps_its_type_and_runs_eagerly():
    def f(x):
        if x.shape[0] == 3:
            raise NotImplementedError("the program's own")
        return x

    with pytest.raises(NotImplementedError, match="the program's own"):
        thunder.jit(f)(torch.randn(3))


def located(x):
    y = x * 2  # the line of y
    return torch.nn.functional.gelu(y)  # the line of the gelu


def test_bound_symbols_carry_the_users_line():
    jf = thunder.jit(located)
    jf(torch.randn(3))
    recorded = thunder.last_traces(jf)[0]
    first = located.__code__.co_firstlineno
    mul, gelu = recorded.bound_symbols[:2]
    assert mul.location == f"{__file__}:{first + 1}"
    assert gelu.location == f"{__file__}:{first + 2}"
    assert all(s.location == gelu.location for s in gelu.subsymbols)


def test_thunder_and_tracing_errors_are_uncatchable_by_the_program():
    from thunder.binding.regions import GradEnabledInside
    from thunder.errors import RunsEagerly
    from thunder_interp._errors import is_uncatchable
    from thunder_ir import DataDependentError

    for exc in (
        thunder.JitError("x"),
        thunder.UnsupportedOperationError("op"),
        DataDependentError("x"),
        RunsEagerly("x"),
        GradEnabledInside(),
    ):
        assert is_uncatchable(exc), exc
    assert not is_uncatchable(NotImplementedError("x")) and not is_uncatchable(KeyError("x"))

    def f(x):
        try:
            return uses_unsupported(x)  # a read tracing does not make
        except RuntimeError:
            return "swallowed"

    # The program's ``except RuntimeError`` would catch it (DataDependentError is a RuntimeError)
    # and take a path eager does not take: the call runs eagerly instead.
    x = torch.randn(5000)
    with pytest.warns(UserWarning, match="tolist"):
        torch.testing.assert_close(_seeded(thunder.jit(f), x), _seeded(uses_unsupported, x))


@torch.compiler.disable
def _runs_outside_compilers(x):
    return x.nonzero().float().sum() + x


def test_compiler_disabled_function_runs_natively_with_its_reason():
    # The functions run natively; the call runs split by torch.compile (thunder.dynamo), the
    # graphs around them compiled by thunder, and the reason names the user's line.
    import torch._dynamo

    def f(x):
        return _runs_outside_compilers(x * 2) + torch._dynamo.disable(torch.sin)(x)

    x = torch.randn(4)
    jf = thunder.jit(f)
    with pytest.warns(UserWarning, match="torch.compiler.disable"):
        torch.testing.assert_close(jf(x), f(x))
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0 and stats.split_calls == 1
    assert "torch.compiler.disable" in stats.last_split_reason
    assert f"{__file__}:" in stats.last_split_reason
    assert stats.split_graphs and all(g.runs == "thunder" for g in stats.split_graphs)
