"""thunder_interp: a CPython bytecode interpreter in pure Python (3.10 to 3.13).

``interpret(fn)(*args)`` behaves like ``fn(*args)``, with lookasides (replace callables),
callbacks (hooks on loads, stores and opaque calls), provenance (where values came from) and an
optional execution history; a suspendable mode stops at a chosen call and resumes later
(``interpret(fn, suspendable=True)``, :func:`suspend`).
"""

from thunder_interp import ops as _ops  # noqa: F401  (registers the opcode handlers)
from thunder_interp.__about__ import __version__
from thunder_interp._api import InterpretedFunction, SuspendableFunction, interpret, provenance_of
from thunder_interp._callbacks import Callbacks
from thunder_interp._errors import InterpreterError, UnsupportedOpcodeError, uncatchable
from thunder_interp._frames import running_in_handler, running_line
from thunder_interp._history import HistoryEntry, format_history
from thunder_interp._implicit_lookasides import is_interpreting
from thunder_interp._lookasides import frame_globals, number_lookaside, text_lookaside
from thunder_interp._opaque import is_opaque, opaque, opaque_package
from thunder_interp._provenance import Provenance, ProvenanceKind
from thunder_interp._registry import (
    DEFAULT_OPCODE_TABLE,
    UNSUPPORTED_OPCODES,
    OpcodeTable,
    register_opcode,
    unsupported_opcodes,
)
from thunder_interp._slots import compares_by_identity
from thunder_interp._suspend import (
    UNBOUND,
    Suspended,
    SuspendedFrame,
    Suspension,
    SuspensionRefused,
    suspend,
)

__all__ = [
    "DEFAULT_OPCODE_TABLE",
    "UNBOUND",
    "UNSUPPORTED_OPCODES",
    "Callbacks",
    "HistoryEntry",
    "InterpretedFunction",
    "InterpreterError",
    "OpcodeTable",
    "Provenance",
    "ProvenanceKind",
    "SuspendableFunction",
    "Suspended",
    "SuspendedFrame",
    "Suspension",
    "SuspensionRefused",
    "UnsupportedOpcodeError",
    "__version__",
    "compares_by_identity",
    "format_history",
    "frame_globals",
    "interpret",
    "is_interpreting",
    "is_opaque",
    "number_lookaside",
    "opaque",
    "opaque_package",
    "provenance_of",
    "register_opcode",
    "running_in_handler",
    "running_line",
    "suspend",
    "text_lookaside",
    "uncatchable",
    "unsupported_opcodes",
]
