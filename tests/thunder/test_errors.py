"""Every error path of thunder.jit says what is wrong and where."""

from __future__ import annotations

import pytest
import torch

import thunder


def uses_unsupported(x):
    y = x + 1
    return torch.nonzero(y)


def test_unsupported_op_names_the_op_and_the_users_line():
    with pytest.raises(thunder.UnsupportedOperationError) as info:
        thunder.jit(uses_unsupported)(torch.randn(3))
    message = str(info.value)
    assert "nonzero" in message
    assert f"{__file__}:{uses_unsupported.__code__.co_firstlineno + 2}" in message


def test_unsupported_op_is_not_swallowed_by_user_except():
    def f(x):
        try:
            return torch.nonzero(x)
        except Exception:
            return x

    with pytest.raises(thunder.UnsupportedOperationError):
        thunder.jit(f)(torch.randn(3))


def test_unsupported_tensor_creation_is_refused():
    def f(x):
        return x + torch.nonzero(torch.ones(3))

    with pytest.raises(thunder.UnsupportedOperationError, match="nonzero"):
        thunder.jit(f)(torch.randn(3))


def test_unreplayable_write_is_refused():
    # (An object the function builds is rebuilt on every call; one that refers to itself is not.)
    holder = {}

    class Thing:
        pass

    def f(x):
        thing = Thing()
        thing.me = thing
        holder["thing"] = thing
        return x

    with pytest.raises(thunder.UnsupportedSideEffectError, match="Thing"):
        thunder.jit(f)(torch.randn(1))
    assert holder == {}  # nothing half-done


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
