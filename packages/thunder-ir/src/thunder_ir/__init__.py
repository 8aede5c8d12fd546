"""thunder_ir: the IR of Thunder.

Proxies, symbols, traces (printable, executable Python), prims with meta functions, the
torch-language ops built on them, the constraint language and the Transform interface. An external
transform depends on this package alone.
"""

from thunder_ir import constraints, devices, dtypes, ops, prims
from thunder_ir.__about__ import __version__
from thunder_ir.codegen import PythonCode
from thunder_ir.errors import (
    DataDependentError,
    TracingError,
    UnsupportedInTracingError,
    UnsupportedOptionError,
)
from thunder_ir.proxies import (
    CollectionProxy,
    ComplexProxy,
    FloatProxy,
    FutureTensorProxy,
    IntegerProxy,
    NumberProxy,
    Proxy,
    StringProxy,
    TensorProxy,
)
from thunder_ir.symbol import BoundSymbol, Symbol
from thunder_ir.tags import OpTag
from thunder_ir.trace import PassRecord, Trace
from thunder_ir.tracectx import get_tracectx, tracectx
from thunder_ir.tracing import proxy_for_tensor, trace_function
from thunder_ir.transform import Transform
from thunder_ir.verify import TraceCheckError, check_trace

ltorch = ops

__all__ = [
    "BoundSymbol",
    "CollectionProxy",
    "ComplexProxy",
    "DataDependentError",
    "FloatProxy",
    "FutureTensorProxy",
    "IntegerProxy",
    "NumberProxy",
    "OpTag",
    "PassRecord",
    "Proxy",
    "PythonCode",
    "StringProxy",
    "Symbol",
    "TensorProxy",
    "Trace",
    "TraceCheckError",
    "TracingError",
    "Transform",
    "UnsupportedInTracingError",
    "UnsupportedOptionError",
    "__version__",
    "check_trace",
    "constraints",
    "devices",
    "dtypes",
    "get_tracectx",
    "ltorch",
    "ops",
    "prims",
    "proxy_for_tensor",
    "trace_function",
    "tracectx",
]
