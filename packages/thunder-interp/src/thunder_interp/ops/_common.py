"""Helpers shared by the opcode handler modules (error messages as CPython words them)."""

from __future__ import annotations

from typing import Any

from thunder_interp._registry import PY_VERSION

__all__ = ["function_str", "name_error", "unbound_free", "unbound_local"]


def unbound_local(name: str) -> UnboundLocalError:
    if PY_VERSION >= (3, 11):
        return UnboundLocalError(
            f"cannot access local variable '{name}' where it is not associated with a value"
        )
    return UnboundLocalError(f"local variable '{name}' referenced before assignment")


def unbound_free(name: str) -> NameError:
    if PY_VERSION >= (3, 11):
        msg = f"cannot access free variable '{name}' where it is not associated with a value in enclosing scope"
    else:
        msg = f"free variable '{name}' referenced before assignment in enclosing scope"
    return NameError(msg, name=name)


def name_error(name: str) -> NameError:
    return NameError(f"name '{name}' is not defined", name=name)


def function_str(func: Any) -> str:
    """``_PyObject_FunctionStr``: ``module.qualname()`` (or ``qualname()`` for builtins)."""
    qualname = getattr(func, "__qualname__", None)
    if not isinstance(qualname, str):
        return f"{type(func).__name__} object"
    module = getattr(func, "__module__", None)
    if isinstance(module, str) and module != "builtins":
        return f"{module}.{qualname}()"
    return f"{qualname}()"
