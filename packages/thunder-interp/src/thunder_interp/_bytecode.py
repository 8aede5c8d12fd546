"""Bytecode normalization: decode a code object once into a list of :class:`Instruction`.

Normalization (in the spirit of Dynamo's ``cleaned_instructions``):

- ``EXTENDED_ARG`` prefixes are folded into the argument of the instruction they extend,
  ``CACHE`` entries are dropped;
- instructions are numbered by index; index 0 is a synthetic ``NOP`` so that no real instruction
  ever has index 0 (the dispatch loop uses ``0`` as its "leave the loop" value);
- jump targets are resolved to instruction indices;
- on 3.11+ the exception table is parsed into a per-instruction list of handlers.

The result is a pure function of the code object and is memoized (see :func:`normalize`).
"""

from __future__ import annotations

import bisect
import dis
import sys
import weakref
from dataclasses import dataclass
from types import CodeType
from typing import Any

__all__ = ["ExceptionHandler", "Instruction", "NormalizedCode", "normalize"]

PY_VERSION: tuple[int, int] = (sys.version_info[0], sys.version_info[1])

_JUMP_OPCODES: frozenset[int] = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


@dataclass(frozen=True)
class ExceptionHandler:
    """One exception-table entry (3.11+), resolved to instruction indices."""

    target: int
    depth: int
    lasti: bool


@dataclass(frozen=True)
class Instruction:
    """One normalized instruction."""

    index: int
    opname: str
    opcode: int
    arg: int
    argval: Any
    argrepr: str
    offset: int
    lineno: int
    target: int
    """Index of the jump target, or -1 when the instruction does not jump."""

    def describe(self) -> str:
        """A one-line readable form, like ``dis`` prints it."""
        tail = f" ({self.argrepr})" if self.argrepr else ""
        return f"{self.opname} {self.arg}{tail}"


@dataclass(frozen=True)
class NormalizedCode:
    """A code object decoded once: instructions plus derived tables."""

    instructions: tuple[Instruction, ...]
    handlers: tuple[ExceptionHandler | None, ...]
    """For each instruction index, the innermost exception handler covering it (3.11+)."""


def _parse_varint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    pos += 1
    value = byte & 63
    while byte & 64:
        value <<= 6
        byte = data[pos]
        pos += 1
        value |= byte & 63
    return value, pos


def _exception_table(code: CodeType) -> list[tuple[int, int, int, int, bool]]:
    """Entries ``(start, end, target, depth, lasti)`` in byte offsets, ``end`` exclusive."""
    data: bytes = getattr(code, "co_exceptiontable", b"")
    entries: list[tuple[int, int, int, int, bool]] = []
    pos = 0
    while pos < len(data):
        start, pos = _parse_varint(data, pos)
        length, pos = _parse_varint(data, pos)
        target, pos = _parse_varint(data, pos)
        depth_lasti, pos = _parse_varint(data, pos)
        entries.append(
            (start * 2, (start + length) * 2, target * 2, depth_lasti >> 1, bool(depth_lasti & 1))
        )
    return entries


def _line_of(instr: dis.Instruction, current: int) -> int:
    positions = getattr(instr, "positions", None)
    if positions is not None and positions.lineno is not None:
        return int(positions.lineno)
    starts = instr.starts_line
    if isinstance(starts, int) and not isinstance(starts, bool):
        return starts
    return current


def _decode(code: CodeType) -> NormalizedCode:
    raw = [i for i in dis.get_instructions(code) if i.opname not in ("EXTENDED_ARG", "CACHE")]
    offset_to_index: dict[int, int] = {}
    for index, instr in enumerate(raw, start=1):
        offset_to_index[instr.offset] = index
    # Offsets of EXTENDED_ARG prefixes (and caches) map to the next real instruction.
    code_len = len(code.co_code)
    next_index = len(raw) + 1
    for offset in range(code_len - 2, -2, -2):
        if offset in offset_to_index:
            next_index = offset_to_index[offset]
        else:
            offset_to_index[offset] = next_index

    instructions: list[Instruction] = [
        Instruction(0, "NOP", dis.opmap["NOP"], 0, None, "", -2, code.co_firstlineno, -1)
    ]
    line = code.co_firstlineno
    for index, instr in enumerate(raw, start=1):
        line = _line_of(instr, line)
        target = -1
        if instr.opcode in _JUMP_OPCODES and isinstance(instr.argval, int):
            target = offset_to_index.get(instr.argval, len(raw) + 1)
        instructions.append(
            Instruction(
                index,
                instr.opname,
                instr.opcode,
                instr.arg if instr.arg is not None else 0,
                instr.argval,
                instr.argrepr,
                instr.offset,
                line,
                target,
            )
        )

    handlers: list[ExceptionHandler | None] = [None] * len(instructions)
    if PY_VERSION >= (3, 11):
        # Entries are sorted so that an inner (later) entry overrides an outer one on overlap;
        # CPython's tables never overlap, so a plain assignment is enough.
        offsets = [ins.offset for ins in instructions]
        for start, end, target, depth, lasti in _exception_table(code):
            handler = ExceptionHandler(offset_to_index[target], depth, lasti)
            index = bisect.bisect_left(offsets, start, 1)
            while index < len(offsets) and offsets[index] < end:
                handlers[index] = handler
                index += 1
    return NormalizedCode(tuple(instructions), tuple(handlers))


_CACHE: weakref.WeakKeyDictionary[CodeType, NormalizedCode] = weakref.WeakKeyDictionary()


def normalize(code: CodeType) -> NormalizedCode:
    """Decode ``code`` (memoized per code object; a pure function of the code)."""
    try:
        return _CACHE[code]
    except KeyError:
        pass
    normalized = _decode(code)
    _CACHE[code] = normalized
    return normalized
