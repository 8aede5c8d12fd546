"""Opcode handlers, one module per family; importing this package registers them all."""

from thunder_interp.ops import (  # noqa: F401
    arith,
    build,
    calls,
    control,
    exceptions,
    generators,
    intrinsics,
    locals,
    names,
)
