"""``copy.copy`` and ``copy.deepcopy`` while tracing.

Copying an object the program made is interpreted like any Python code. Copying an outside
object of plain Python state (a model's config, copied inside forward) runs natively: the copy
is the program's own object, and the prologue checks on every call that the original's state
still equals what was copied, so a changed config recompiles instead of using stale values.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from thunder.binding.calls import CallsMixin
from thunder.binding.state import Guard, is_scalar_constant
from thunder.lookasides import native_special
from thunder_interp import interpret
from thunder_ir.prims.prologue import value_snapshot

# The largest plain state compared on every call (a config has a few dozen attributes).
_MAX_STATE = 512


def _plain_state(obj: Any) -> dict[str, Any] | None:
    """``vars(obj)`` when the default copy protocol copies exactly that, and it is made of values
    the prologue can compare; else None."""
    t: Any = type(obj)
    if (
        t.__reduce_ex__ is not object.__reduce_ex__
        or t.__reduce__ is not object.__reduce__
        or getattr(t, "__getstate__", object.__getstate__) is not object.__getstate__
        or any(hasattr(t, name) for name in ("__setstate__", "__copy__", "__deepcopy__"))
        or hasattr(t, "__slots__")
    ):
        return None
    state = getattr(obj, "__dict__", None)
    if type(state) is not dict or len(state) > _MAX_STATE:
        return None
    if not all(type(k) is str and is_scalar_constant(v) for k, v in state.items()):
        return None
    return state


class CopyingMixin(CallsMixin):
    """The lookasides of ``copy.copy`` and ``copy.deepcopy``."""

    def _copy_lookasides(self, table: dict[Any, Any]) -> dict[Any, Any]:
        # Copies of the program's own objects are interpreted without these lookasides (so the
        # copy module's own recursion is plain interpreted code).
        return {
            copy.copy: functools.partial(self._copy, table, False),
            copy.deepcopy: functools.partial(self._copy, table, True),
        }

    def _copy(self, table: dict[Any, Any], deep: bool, x: Any, *rest: Any, **kw: Any) -> Any:
        access = self.access_for(x) if not rest and not kw else None
        state = _plain_state(x) if access is not None else None
        if access is not None and state is not None:
            self.facts.guards.setdefault(access, Guard(access, "type", type(x)))
            state_access = access.attr("__dict__")
            self.facts.guards[state_access] = Guard(state_access, "value", value_snapshot(state))
            return copy.deepcopy(x) if deep else copy.copy(x)
        fn = copy.deepcopy if deep else copy.copy
        plain = {k: v for k, v in table.items() if k is not copy.copy and k is not copy.deepcopy}
        interpreted = interpret(
            fn, lookasides=plain, callbacks=self.callbacks(), native_special=native_special
        )
        return interpreted(x, *rest, **kw)
