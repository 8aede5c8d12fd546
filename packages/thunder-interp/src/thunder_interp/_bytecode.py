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


class Instruction:
    """One normalized instruction (treat it as immutable).

    ``argval`` is what :mod:`dis` gives; ``argrepr`` too, computed when first asked for (by
    :mod:`dis`, for the whole code object) except for ``BINARY_OP``, whose operator it names.
    """

    __slots__ = (
        "_argrepr",
        "arg",
        "argval",
        "index",
        "lineno",
        "offset",
        "opcode",
        "opname",
        "target",
    )

    def __init__(
        self,
        index: int,
        opname: str,
        opcode: int,
        arg: int,
        argval: Any,
        argrepr: str | _ArgReprs,
        offset: int,
        lineno: int,
        target: int,
    ) -> None:
        self.index = index
        self.opname = opname
        self.opcode = opcode
        self.arg = arg
        self.argval = argval
        self._argrepr = argrepr
        self.offset = offset
        self.lineno = lineno
        self.target = target
        """Index of the jump target, or -1 when the instruction does not jump."""

    @property
    def argrepr(self) -> str:
        """The readable argument, as :mod:`dis` shows it."""
        argrepr = self._argrepr
        if isinstance(argrepr, _ArgReprs):
            argrepr = self._argrepr = argrepr.of(self.index)
        return argrepr

    def _key(self) -> tuple[Any, ...]:
        return (self.index, self.opname, self.opcode, self.arg, self.offset, self.lineno)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Instruction:
            return NotImplemented
        return self._key() == other._key() and self.target == other.target

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Instruction(index={self.index}, opname={self.opname!r}, arg={self.arg}, "
            f"argval={self.argval!r}, offset={self.offset}, lineno={self.lineno}, "
            f"target={self.target})"
        )

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


def _dis_instructions(code: CodeType) -> list[dis.Instruction]:
    return [i for i in dis.get_instructions(code) if i.opname not in ("EXTENDED_ARG", "CACHE")]


class _ArgReprs:
    """The ``argrepr`` of every instruction of a code object, from :mod:`dis` once one is asked
    for (it holds the code weakly: the memo is keyed by it)."""

    __slots__ = ("code", "reprs")

    def __init__(self, code: CodeType) -> None:
        self.code = weakref.ref(code)
        self.reprs: list[str] | None = None

    def of(self, index: int) -> str:
        if self.reprs is None:
            code = self.code()
            if code is None:
                return ""
            self.reprs = ["", *(i.argrepr for i in _dis_instructions(code))]
        return self.reprs[index] if index < len(self.reprs) else ""


_Entry = tuple[int, str, int, int, Any, "str | _ArgReprs"]


def _decode_dis(code: CodeType) -> NormalizedCode:
    """:func:`normalize` by :func:`dis.get_instructions` (the reference the fast decoder is
    tested against, and what runs where the fast decoder's tables are missing)."""
    raw = _dis_instructions(code)
    entries: list[_Entry] = [
        (i.offset, i.opname, i.opcode, i.arg if i.arg is not None else 0, i.argval, i.argrepr)
        for i in raw
    ]
    lines: list[int] = []
    line = code.co_firstlineno
    for instr in raw:
        line = _line_of(instr, line)
        lines.append(line)
    return _normalized(code, entries, lines)


def _normalized(code: CodeType, entries: list[_Entry], lines: list[int]) -> NormalizedCode:
    """The NormalizedCode of the real instructions ``entries`` (offset, opname, opcode, arg,
    argval, argrepr) with their ``lines``."""
    offset_to_index: dict[int, int] = {}
    for index, entry in enumerate(entries, start=1):
        offset_to_index[entry[0]] = index
    # Offsets of EXTENDED_ARG prefixes (and caches) map to the next real instruction.
    code_len = len(code.co_code)
    next_index = len(entries) + 1
    for offset in range(code_len - 2, -2, -2):
        if offset in offset_to_index:
            next_index = offset_to_index[offset]
        else:
            offset_to_index[offset] = next_index

    instructions: list[Instruction] = [
        Instruction(0, "NOP", dis.opmap["NOP"], 0, None, "", -2, code.co_firstlineno, -1)
    ]
    jumps = _JUMP_OPCODES
    missing = len(entries) + 1
    for index, (offset, opname, opcode, arg, argval, argrepr) in enumerate(entries, start=1):
        target = -1
        if opcode in jumps and isinstance(argval, int):
            target = offset_to_index.get(argval, missing)
        line = lines[index - 1]
        instructions.append(
            Instruction(index, opname, opcode, arg, argval, argrepr, offset, line, target)
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


# -- the fast decoder: dis's algorithm (per version) on tables computed once -----------------------

# How an instruction's argval is found, by (base) opcode, in the order dis tests it.
(_NO_ARG, _PLAIN, _CONST, _NAME, _NAME_HALF, _NAME_QUARTER, _JABS, _JREL, _LOCAL, _FREE,
 _LOCAL_PAIR, _COMPARE, _FORMAT, _CONVERT) = range(14)  # fmt: skip

_Tables = tuple[list[int], list[int], list[bool], list[int], list[str]]


def _fast_tables() -> _Tables | None:
    """Per opcode: its base opcode, inline cache entries, whether it takes an argument, how its
    argval is found, and its name. None where :mod:`dis` lacks what they are computed from."""
    try:
        if PY_VERSION >= (3, 11):
            deopt = [dis._deoptop(op) for op in range(256)]  # type: ignore[attr-defined]
            names: list[str] = list(dis._all_opname)  # type: ignore[attr-defined]
            entries = dis._inline_cache_entries  # type: ignore[attr-defined]
            if isinstance(entries, dict):  # 3.13: by name
                caches = [int(entries.get(dis.opname[op], 0)) for op in range(256)]
            else:
                caches = [int(entries[op]) for op in range(256)]
        else:
            deopt = list(range(256))
            names = list(dis.opname)
            caches = [0] * 256
        has_arg_ops = getattr(dis, "hasarg", None)
        if has_arg_ops is not None:
            has_arg = [op in has_arg_ops for op in range(256)]
        else:
            has_arg = [op >= dis.HAVE_ARGUMENT for op in range(256)]
        opmap = dis.opmap
        kinds = [_PLAIN] * 256
        # Assigned in reverse order of dis's tests, so that the first test wins (pseudo-ops,
        # numbered from 256, never appear in bytecode).
        order: list[tuple[Any, int]] = [
            (["FORMAT_VALUE"], _FORMAT),
            (["CONVERT_VALUE"], _CONVERT),
            (dis.hascompare, _COMPARE),
            (dis.hasfree, _FREE),
            (dis.haslocal, _LOCAL),
            (["LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"], _LOCAL_PAIR),
            (dis.hasjrel, _JREL),
            (dis.hasjabs, _JABS),
            (dis.hasname, _NAME),
            (["LOAD_GLOBAL"] if PY_VERSION >= (3, 11) else [], _NAME_HALF),
            (["LOAD_ATTR"] if PY_VERSION >= (3, 12) else [], _NAME_HALF),
            (["LOAD_SUPER_ATTR"] if PY_VERSION >= (3, 12) else [], _NAME_QUARTER),
            (dis.hasconst, _CONST),
        ]
        for ops, kind in order:
            for op in ops:
                if isinstance(op, str):
                    op = opmap.get(op, 256)
                if op < 256:
                    kinds[op] = kind
        for op in range(256):
            if not has_arg[op]:
                kinds[op] = _NO_ARG
        return deopt, caches, has_arg, kinds, names
    except (AttributeError, KeyError, TypeError, IndexError):  # pragma: no cover
        return None


_TABLES = _fast_tables()
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
_BINARY_OP = dis.opmap.get("BINARY_OP", -1)
_INT_OVERFLOW: int | None = getattr(dis, "_INT_OVERFLOW", None)
_NB_OPS: list[tuple[str, str]] = getattr(dis, "_nb_ops", [])
_FORMAT_CONVERTERS = getattr(dis, "FORMAT_VALUE_CONVERTERS", ())
_GET_CONST = getattr(dis, "_get_const_value", None) if PY_VERSION >= (3, 11) else None
_COMPARE_SHIFT = 5 if PY_VERSION >= (3, 13) else 4 if PY_VERSION >= (3, 12) else 0
_JUMP_CACHES = PY_VERSION >= (3, 12)  # a relative jump counts from after the caches
_LINESTARTS_ARE_LINES = PY_VERSION < (3, 13)  # 3.13's starts_line is a bool


def _decode_fast(code: CodeType) -> NormalizedCode:
    """What :func:`_decode_dis` computes, without building :mod:`dis` instructions (several
    times faster: decoding is a cost of every function the first time it is interpreted)."""
    assert _TABLES is not None
    deopt, cache_counts, has_arg, kinds, opnames = _TABLES
    co_code = code.co_code
    consts = code.co_consts
    co_names = code.co_names
    varname: Any = getattr(code, "_varname_from_oparg", None)  # 3.11+
    varnames = code.co_varnames
    free_names = code.co_cellvars + code.co_freevars
    positions = list(code.co_positions()) if PY_VERSION >= (3, 11) else None
    linestarts: dict[int, int] | None = None
    argreprs = _ArgReprs(code)
    entries: list[_Entry] = []
    lines: list[int] = []
    line = code.co_firstlineno
    extended = 0
    caches = 0
    for offset in range(0, len(co_code), 2):
        if caches:
            caches -= 1
            continue
        op = co_code[offset]
        deop = deopt[op]
        caches = cache_counts[deop]
        if has_arg[deop]:
            arg = co_code[offset + 1] | extended
            extended = (arg << 8) if deop == _EXTENDED_ARG else 0
            if _INT_OVERFLOW is not None and extended >= _INT_OVERFLOW:
                extended -= 2 * _INT_OVERFLOW
            if deop == _EXTENDED_ARG:
                continue
        else:
            arg = 0  # dis: None (its kind is _NO_ARG)
            extended = 0
        opname = opnames[op]
        if opname == "CACHE":
            continue
        kind = kinds[deop]
        argval: Any
        argrepr: str | _ArgReprs = argreprs
        if kind == _NO_ARG:
            argval = None
            argrepr = ""
        elif kind == _PLAIN:
            argval = arg
            if deop == _BINARY_OP:
                argrepr = _NB_OPS[arg][1]
        elif kind == _LOCAL:
            argval = varname(arg) if varname is not None else varnames[arg]
        elif kind == _CONST:
            argval = _GET_CONST(deop, arg, consts) if _GET_CONST is not None else consts[arg]
        elif kind == _NAME:
            argval = co_names[arg]
        elif kind == _NAME_HALF:
            argval = co_names[arg >> 1]
        elif kind == _JREL:
            signed = -arg if "JUMP_BACKWARD" in opnames[deop] else arg
            argval = offset + 2 + signed * 2
            if _JUMP_CACHES:
                argval += 2 * cache_counts[deop]
        elif kind == _JABS:
            argval = arg * 2
        elif kind == _FREE:
            argval = varname(arg) if varname is not None else free_names[arg]
        elif kind == _COMPARE:
            argval = dis.cmp_op[arg >> _COMPARE_SHIFT]
        elif kind == _NAME_QUARTER:
            argval = co_names[arg >> 2]
        elif kind == _LOCAL_PAIR:
            argval = (varname(arg >> 4), varname(arg & 15))
        elif kind == _FORMAT:
            argval = (_FORMAT_CONVERTERS[arg & 0x3][0], bool(arg & 0x4))
        else:  # _CONVERT
            argval = (None, str, repr, ascii)[arg]
        # The line: the instruction's position (3.11+), else where a line starts, else the
        # previous instruction's line (as dis gives them).
        found = None
        if positions is not None and offset // 2 < len(positions):
            found = positions[offset // 2][0]
        if found is not None:
            line = found
        elif _LINESTARTS_ARE_LINES:
            if linestarts is None:
                linestarts = dict(dis.findlinestarts(code))
            start = linestarts.get(offset)
            if start is not None:
                line = start
        entries.append((offset, opname, op, arg, argval, argrepr))
        lines.append(line)
    return _normalized(code, entries, lines)


_decode = _decode_fast if _TABLES is not None else _decode_dis


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
