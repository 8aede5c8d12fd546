"""The opcode handler registry: one factory per opcode, registered for a version range.

A *factory* receives a normalized :class:`~thunder_interp._bytecode.Instruction` and a
:class:`CompileContext` and returns an *op*: a closure ``op(frame) -> next_index`` with the
instruction's argument baked in. Ops return the index of the next instruction, or ``0`` to leave
the dispatch loop (return, yield).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import CodeType, MappingProxyType
from typing import TYPE_CHECKING

from thunder_interp._bytecode import Instruction

if TYPE_CHECKING:
    from thunder_interp._frame import Frame

__all__ = [
    "DEFAULT_OPCODE_TABLE",
    "PY_VERSION",
    "UNSUPPORTED_OPCODES",
    "CompileContext",
    "Op",
    "OpFactory",
    "OpcodeTable",
    "register_opcode",
]

PY_VERSION: tuple[int, int] = (sys.version_info[0], sys.version_info[1])

Op = Callable[["Frame"], int]

_SKIPPABLE = frozenset({"NOP", "RESUME", "PRECALL", "EXTENDED_ARG"})


@dataclass(frozen=True)
class CompileContext:
    """What a factory may need to know about the code object it compiles for."""

    code: CodeType
    instructions: tuple[Instruction, ...]
    hooked: bool
    """True when callbacks or provenance are active: factories then build the hooked variant."""
    local_names: tuple[str, ...]
    """Names of the frame's local slots (3.11+: all "fast locals plus"; 3.10: varnames, cells, frees)."""
    nlocals: int

    def next_index(self, instr: Instruction) -> int:
        """Index of the instruction that follows ``instr``, skipping pure no-ops."""
        i = instr.index + 1
        instructions = self.instructions
        while i < len(instructions) - 1 and instructions[i].opname in _SKIPPABLE:
            i += 1
        return i


OpFactory = Callable[[Instruction, CompileContext], Op]
OpcodeTable = Mapping[str, OpFactory]

_REGISTRY: dict[str, OpFactory] = {}


def register_opcode(
    *names: str,
    min_version: tuple[int, int] | None = None,
    max_version: tuple[int, int] | None = None,
) -> Callable[[OpFactory], OpFactory]:
    """Register ``factory`` for the opcodes ``names`` if the running Python is in range.

    Both bounds are inclusive. Registering two factories for one opcode and version is an error.
    """

    def decorate(factory: OpFactory) -> OpFactory:
        if min_version is not None and min_version > PY_VERSION:
            return factory
        if max_version is not None and max_version < PY_VERSION:
            return factory
        for name in names:
            if name in _REGISTRY:
                raise ValueError(f"opcode {name} registered twice")
            _REGISTRY[name] = factory
        return factory

    return decorate


DEFAULT_OPCODE_TABLE: OpcodeTable = MappingProxyType(_REGISTRY)
"""The handler table used by :func:`thunder_interp.interpret` (read-only view)."""


def _unsupported() -> dict[str, str]:
    reasons: dict[str, str] = {
        "CACHE": "inline cache entry, dropped by normalization",
        "EXTENDED_ARG": "folded into the next instruction by normalization",
        "RESERVED": "never emitted",
        "INTERPRETER_EXIT": "internal to CPython's interpreter",
        "ENTER_EXECUTOR": "internal to CPython's tier-2 optimizer",
        "EXIT_INIT_CHECK": "internal to CPython's specialized __init__ calls",
    }
    pseudo = [
        "JUMP",
        "JUMP_NO_INTERRUPT",
        "LOAD_METHOD",
        "LOAD_SUPER_METHOD",
        "LOAD_ZERO_SUPER_ATTR",
        "LOAD_ZERO_SUPER_METHOD",
        "POP_BLOCK",
        "SETUP_FINALLY",
        "SETUP_CLEANUP",
        "SETUP_WITH",
        "STORE_FAST_MAYBE_NULL",
        "LOAD_CLOSURE",
    ]
    import dis

    result: dict[str, str] = {}
    for name in dis.opmap:
        if name.startswith("INSTRUMENTED_"):
            result[name] = "instrumented variant (monitoring); co_code never contains it"
        elif name in reasons:
            result[name] = reasons[name]
        elif (
            name in pseudo
            and PY_VERSION >= (3, 12)
            and not (name == "LOAD_CLOSURE" and PY_VERSION == (3, 12))
        ):
            result[name] = "pseudo-instruction; never present in co_code"
    # A handler, when registered, wins over the list (e.g. LOAD_METHOD on 3.10/3.11).
    return result


def unsupported_opcodes() -> Mapping[str, str]:
    """Opcodes of the running Python that deliberately have no handler, with the reason."""
    return MappingProxyType({k: v for k, v in _unsupported().items() if k not in _REGISTRY})


UNSUPPORTED_OPCODES: Mapping[str, str] = MappingProxyType(_unsupported())
