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
from typing import TYPE_CHECKING, Any, Protocol

from thunder_interp._bytecode import Instruction
from thunder_interp._callbacks import PROVENANCE

if TYPE_CHECKING:
    from thunder_interp._blocks import BlockBuilder
    from thunder_interp._frame import Frame

__all__ = [
    "BLOCK_HELPERS",
    "BLOCK_TEMPLATES",
    "DEFAULT_OPCODE_TABLE",
    "ENDS_BLOCK",
    "GOES_ON",
    "NOT_COMPILED",
    "PY_VERSION",
    "SKIPPABLE_OPCODES",
    "UNSUPPORTED_OPCODES",
    "BlockTemplate",
    "CompileContext",
    "Op",
    "OpFactory",
    "OpcodeTable",
    "block_template",
    "next_index",
    "register_opcode",
]

PY_VERSION: tuple[int, int] = (sys.version_info[0], sys.version_info[1])

Op = Callable[["Frame"], int]

SKIPPABLE_OPCODES = frozenset({"NOP", "RESUME", "PRECALL", "EXTENDED_ARG"})
"""Opcodes that do nothing once the code is decoded: ops and blocks go past them."""


class HasInstructions(Protocol):
    """What :func:`next_index` reads."""

    @property
    def instructions(self) -> tuple[Instruction, ...]: ...


def next_index(self: HasInstructions, instr: Instruction) -> int:
    """Index of the instruction that follows ``instr``, skipping pure no-ops (the method of
    :class:`CompileContext` and of ``_blocks.BlockBuilder``)."""
    i = instr.index + 1
    instructions = self.instructions
    while i < len(instructions) - 1 and instructions[i].opname in SKIPPABLE_OPCODES:
        i += 1
    return i


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
    hooks: frozenset[str]
    """The interpretation's hook profile (``_callbacks.hook_profile``): the hooks that are set,
    and ``"provenance"``; an op may leave out the work of a hook that is not in it."""

    next_index = next_index  # the function itself, not a wrapper: factories call it per instruction

    def hooked_for(self, *names: str) -> bool:
        """Whether provenance or one of the hooks ``names`` is on: an op has more to do than its
        plain variant."""
        return self.hooked and (
            PROVENANCE in self.hooks or any(name in self.hooks for name in names)
        )


OpFactory = Callable[[Instruction, CompileContext], Op]
OpcodeTable = Mapping[str, OpFactory]

_REGISTRY: dict[str, OpFactory] = {}
_OPCODES_OF: dict[OpFactory, list[str]] = {}  # the opcodes each factory runs on this Python


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
        _OPCODES_OF.setdefault(factory, []).extend(names)
        return factory

    return decorate


DEFAULT_OPCODE_TABLE: OpcodeTable = MappingProxyType(_REGISTRY)
"""The handler table used by :func:`thunder_interp.interpret` (read-only view)."""


# -- block templates ------------------------------------------------------------------------------
# A straight run of instructions is compiled into one generated function (``_blocks``). The
# source each instruction contributes comes from its opcode's *block template*, registered next
# to the opcode's handler (``ops/``), so that an opcode's behaviour is written in one module.

BlockTemplate = Callable[["BlockBuilder", Instruction], int]
"""Adds an instruction's source to a block; returns one of the three results below."""

GOES_ON = 0
"""The instruction is compiled; the block goes on with the next one."""
ENDS_BLOCK = 1
"""The instruction is compiled and nothing runs after it in the block (a return, a jump, a yield)."""
NOT_COMPILED = 2
"""The block ends before the instruction, whose op runs it (the template emitted nothing)."""

_BLOCK_TEMPLATES: dict[str, BlockTemplate] = {}
_BLOCK_HELPERS: dict[str, Any] = {}


def block_template(
    *handlers: OpFactory, helpers: Mapping[str, Any] | None = None
) -> Callable[[BlockTemplate], BlockTemplate]:
    """Register ``template`` as the block template of the opcodes ``handlers`` are registered
    for on the running Python (a block compiles only opcodes that have a handler).

    ``helpers``: the names the template's source uses besides the frame's fields, with their
    values (declared here once, so that compiling an instruction binds nothing)."""

    def decorate(template: BlockTemplate) -> BlockTemplate:
        for name, value in (helpers or {}).items():
            if _BLOCK_HELPERS.setdefault(name, value) is not value:
                raise ValueError(f"block helper {name} declared with two values")
        for handler in handlers:
            for name in _OPCODES_OF.get(handler, ()):
                if name in _BLOCK_TEMPLATES:
                    raise ValueError(f"block template of {name} registered twice")
                _BLOCK_TEMPLATES[name] = template
        return template

    return decorate


BLOCK_TEMPLATES: Mapping[str, BlockTemplate] = MappingProxyType(_BLOCK_TEMPLATES)
"""The block template of each opcode a block can hold (read-only view)."""
BLOCK_HELPERS: Mapping[str, Any] = MappingProxyType(_BLOCK_HELPERS)
"""The names generated blocks may use, as the templates declared them (read-only view)."""


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
