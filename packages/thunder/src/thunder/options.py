"""Options of ``thunder.jit``: the cache modes and the checked set of compile options."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["CACHE_OPTIONS", "SHARP_EDGES_OPTIONS", "JitOptions", "resolve_cache_option"]


class CACHE_OPTIONS(enum.Enum):
    """How a compiled program is reused.

    - ``CONSTANT_VALUES`` (default): Python numbers and strings among the inputs are constants of
      the program; another value is another cache entry. By default (no ``cache=`` given), once
      two programs serve other tensor sizes, a call whose inputs differ from them in sizes only
      (a decoding step's longer KV cache, a batch of another length) compiles with
      ``SYMBOLIC_VALUES``, which then serves every size.
    - ``SYMBOLIC_VALUES``: int and float inputs stay symbolic (``NumberProxy``), and so do the
      sizes of the tensors the caller passes (arguments and tensors inside argument objects, such
      as a KV cache; parameters and buffers keep static sizes). Sizes 0 and 1 stay constants.
      The prologue unpacks the sizes and checks the conditions the traced path relied on
      (``flag > 5``, ``x.shape[1] == y.shape[1]`` for broadcasting), so one program serves every
      input that satisfies them.
    - ``NO_CACHING``: every call interprets, traces and compiles again.
    - ``SAME_INPUT``: for programs called again and again with the same arguments (the same
      tensor objects, the same numbers). Compiles as ``CONSTANT_VALUES``; a call whose arguments
      are the previous call's objects tries that call's program first, skipping the cache
      lookup. Its prologue still checks every guard, so a changed value (a tensor's shape, an
      outside global) is never served a stale result: the call then takes the usual path.
    """

    CONSTANT_VALUES = "constant values"
    SYMBOLIC_VALUES = "symbolic values"
    NO_CACHING = "no caching"
    SAME_INPUT = "same input"


class SHARP_EDGES_OPTIONS(enum.Enum):
    """What to do when the function reads state from outside its arguments (a global, a closure
    cell, an attribute of an object it did not receive). Such reads are always guarded; this says
    whether they are also reported."""

    ALLOW = "allow"
    WARN = "warn"
    ERROR = "error"


def resolve_cache_option(cache: CACHE_OPTIONS | str | None) -> CACHE_OPTIONS:
    return _resolve_choice(cache, CACHE_OPTIONS, "cache", " (or thunder.CACHE_OPTIONS)")


def _resolve_sharp_edges(value: SHARP_EDGES_OPTIONS | str | None) -> SHARP_EDGES_OPTIONS:
    return _resolve_choice(value, SHARP_EDGES_OPTIONS, "sharp_edges")


_Choice = TypeVar("_Choice", CACHE_OPTIONS, SHARP_EDGES_OPTIONS)


def _resolve_choice(value: Any, choices: type[_Choice], option: str, hint: str = "") -> _Choice:
    """An option given as one of ``choices`` or its value or name as a string; None is the
    first choice (the default)."""
    if value is None:
        return next(iter(choices))
    if isinstance(value, choices):
        return value
    known = ", ".join(repr(o.value) for o in choices)
    if not isinstance(value, str):
        raise TypeError(
            f"thunder.jit: the option {option} must be a string ({known}), a "
            f"thunder.{choices.__name__} or None, got {value!r} ({type(value).__name__})"
        )
    for choice in choices:
        if value.lower() in (choice.value, choice.name.lower()):
            return choice
    raise ValueError(f"thunder.jit: unknown {option} option {value!r}; known: {known}{hint}")


# compile option -> (default, description). Anything else passed to jit is an error.
KNOWN_COMPILE_OPTIONS: Mapping[str, tuple[Any, str]] = {
    "recompile_limit": (
        8,
        "programs compiled per function before new inputs run eagerly (None: no limit)",
    ),
    "warn_on_recompile": (True, "warn, saying what changed, when the recompile limit is hit"),
    "dce": (True, "drop unused computations from the trace before executor assignment"),
    "reshape_inplace": (
        "warn",
        "an in-place write into what reshape/reshape_as/flatten/ravel returned: 'error', or "
        "'warn' and do what eager does for these inputs' strides",
    ),
}


@dataclass(frozen=True)
class JitOptions:
    """The resolved options of one jitted function."""

    cache: CACHE_OPTIONS
    sharp_edges: SHARP_EDGES_OPTIONS
    disable_torch_autograd: bool
    recompile_limit: int | None
    warn_on_recompile: bool
    dce: bool
    reshape_inplace: str = "warn"
    lookasides: tuple[Any, ...] = ()  # thunder.Lookaside values of this program
    # No cache= given: constant values, symbolic once sizes keep changing (CONSTANT_VALUES).
    sizes_become_symbolic: bool = False
    # Paths (``Access``) of int and float values read from outside state (``self.step``, a
    # global counter) that are inputs of the program, not constants: each changed between calls.
    symbolic_reads: frozenset[Any] = frozenset()
    # Paths of tensors of outside state (a KV cache on a module, a global buffer), not
    # parameters, whose sizes are inputs of the program: each changed size between calls.
    symbolic_state_tensors: frozenset[Any] = frozenset()

    @staticmethod
    def from_kwargs(
        cache: CACHE_OPTIONS | str | None,
        sharp_edges: SHARP_EDGES_OPTIONS | str | None,
        disable_torch_autograd: bool,
        compile_options: Mapping[str, Any],
    ) -> JitOptions:
        unknown = sorted(set(compile_options) - set(KNOWN_COMPILE_OPTIONS))
        if unknown:
            known = "\n".join(
                f"  {name} (default {default!r}): {doc}"
                for name, (default, doc) in KNOWN_COMPILE_OPTIONS.items()
            )
            raise TypeError(
                f"thunder.jit got unknown option(s) {', '.join(map(repr, unknown))}. "
                "Known keyword arguments: executors, transforms, lookasides, cache, sharp_edges, "
                f"disable_torch_autograd, and the compile options:\n{known}"
            )
        merged = {name: default for name, (default, _) in KNOWN_COMPILE_OPTIONS.items()}
        merged.update(compile_options)
        # bool("no") is True: a string or number given for a flag is a mistake, never a choice
        for name, value in (
            ("disable_torch_autograd", disable_torch_autograd),
            ("warn_on_recompile", merged["warn_on_recompile"]),
            ("dce", merged["dce"]),
        ):
            if not isinstance(value, bool):
                raise TypeError(
                    f"thunder.jit: the option {name} must be True or False, got {value!r} "
                    f"({type(value).__name__})"
                )
        limit = merged["recompile_limit"]
        # (a bool is an int to Python, never a count to the caller)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise TypeError(
                "thunder.jit: the option recompile_limit must be a positive int or None, got "
                f"{limit!r} ({type(limit).__name__})"
            )
        if limit is not None and limit < 1:
            raise ValueError(
                f"thunder.jit: recompile_limit must be a positive int or None, got {limit!r}"
            )
        reshape_inplace = merged["reshape_inplace"]
        if not isinstance(reshape_inplace, str):
            raise TypeError(
                "thunder.jit: the option reshape_inplace must be 'error' or 'warn', got "
                f"{reshape_inplace!r} ({type(reshape_inplace).__name__})"
            )
        if reshape_inplace not in ("error", "warn"):
            raise ValueError(
                f"thunder.jit: reshape_inplace must be 'error' or 'warn', got {reshape_inplace!r}"
            )
        return JitOptions(
            reshape_inplace=merged["reshape_inplace"],
            cache=resolve_cache_option(cache),
            sizes_become_symbolic=cache is None,
            sharp_edges=_resolve_sharp_edges(sharp_edges),
            disable_torch_autograd=disable_torch_autograd,
            recompile_limit=limit,
            warn_on_recompile=merged["warn_on_recompile"],
            dce=merged["dce"],
        )
