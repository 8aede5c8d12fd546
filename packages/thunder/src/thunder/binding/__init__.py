"""Binding the interpreter to the IR: what the traced program reads, calls and writes.

:func:`trace_program` traces one call: a :class:`Binder` owns the state of the run. Its callbacks
(given to ``thunder_interp.interpret``) turn every value the program reads from outside its
arguments into either a proxy input (tensors; numbers in symbolic mode) or a guard the prologue
checks; its lookasides send torch callables to IR symbols; its opaque-call hook runs torch
callables without an IR symbol through the torch fallback (an op of the trace) where it can, and
records mutations of outside containers. Writes to outside state (globals, closure cells,
attributes, container mutations) are recorded for the epilogue and undone when tracing ends, so
tracing itself has no visible effect: every call, the first included, runs the compiled program.
The run ends in a frozen :class:`TracedProgram`, all that the later stages read.

The binder is split by concern, each module a layer of one class: ``state`` (access paths,
inputs, guards), ``reads``, ``writes``, ``calls`` (the opaque-call policy and the callbacks
handed to the interpreter), ``copying``, ``regions`` (grad mode, autocast, checkpoint, context
variables), ``higher_order`` (torch.cond, while_loop, map, scan) and ``autograd_function``
(torch.autograd.Function), ``binder`` (the class and its lookaside table); beside them
``program`` (the result and the tracing stage), ``fallback`` (torch ops without an IR op),
``arrays`` (NumPy arrays), ``rng`` (random state), ``torch_modules`` and ``reshape_writes``.
"""

from __future__ import annotations

from thunder.binding.binder import Binder
from thunder.binding.program import ProgramRaised, TracedProgram, trace_program, user_location
from thunder.binding.state import (
    ExternalRef,
    Guard,
    Write,
    is_scalar_constant,
    iter_proxies,
    torch_value,
)

__all__ = [
    "Binder",
    "ExternalRef",
    "Guard",
    "ProgramRaised",
    "TracedProgram",
    "Write",
    "is_scalar_constant",
    "iter_proxies",
    "torch_value",
    "trace_program",
    "user_location",
]
