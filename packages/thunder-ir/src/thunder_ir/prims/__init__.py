"""The primitive ops: every trace decomposes into these, and every executor can run them.

Meta functions validate strictly (shapes, dtypes, devices must already agree: broadcasting and
type promotion belong to the torch-language ops) and infer the outputs' metadata.
"""

from thunder_ir.prims._common import ALL_PRIMS as ALL_PRIMS
from thunder_ir.prims.data import (
    DataChanged as DataChanged,
)
from thunder_ir.prims.data import (
    check_data as check_data,
)
from thunder_ir.prims.data import (
    check_values as check_values,
)
from thunder_ir.prims.data import (
    item as item,
)
from thunder_ir.prims.data import (
    nonzero as nonzero,
)
from thunder_ir.prims.data import (
    tolist as tolist,
)
from thunder_ir.prims.distributed import (
    all_gather as all_gather,
)
from thunder_ir.prims.distributed import (
    all_reduce as all_reduce,
)
from thunder_ir.prims.distributed import (
    broadcast as broadcast,
)
from thunder_ir.prims.distributed import (
    reduce_scatter as reduce_scatter,
)
from thunder_ir.prims.distributed import (
    wait as wait,
)
from thunder_ir.prims.elementwise import (
    abs as abs,
)
from thunder_ir.prims.elementwise import (
    acos as acos,
)
from thunder_ir.prims.elementwise import (
    acosh as acosh,
)
from thunder_ir.prims.elementwise import (
    add as add,
)
from thunder_ir.prims.elementwise import (
    asin as asin,
)
from thunder_ir.prims.elementwise import (
    asinh as asinh,
)
from thunder_ir.prims.elementwise import (
    atan as atan,
)
from thunder_ir.prims.elementwise import (
    atan2 as atan2,
)
from thunder_ir.prims.elementwise import (
    atanh as atanh,
)
from thunder_ir.prims.elementwise import (
    bitwise_and as bitwise_and,
)
from thunder_ir.prims.elementwise import (
    bitwise_not as bitwise_not,
)
from thunder_ir.prims.elementwise import (
    bitwise_or as bitwise_or,
)
from thunder_ir.prims.elementwise import (
    bitwise_xor as bitwise_xor,
)
from thunder_ir.prims.elementwise import (
    ceil as ceil,
)
from thunder_ir.prims.elementwise import (
    convert_element_type as convert_element_type,
)
from thunder_ir.prims.elementwise import (
    copysign as copysign,
)
from thunder_ir.prims.elementwise import (
    cos as cos,
)
from thunder_ir.prims.elementwise import (
    cosh as cosh,
)
from thunder_ir.prims.elementwise import (
    digamma as digamma,
)
from thunder_ir.prims.elementwise import (
    div as div,
)
from thunder_ir.prims.elementwise import (
    eq as eq,
)
from thunder_ir.prims.elementwise import (
    erf as erf,
)
from thunder_ir.prims.elementwise import (
    erfc as erfc,
)
from thunder_ir.prims.elementwise import (
    erfinv as erfinv,
)
from thunder_ir.prims.elementwise import (
    exp as exp,
)
from thunder_ir.prims.elementwise import (
    exp2 as exp2,
)
from thunder_ir.prims.elementwise import (
    expm1 as expm1,
)
from thunder_ir.prims.elementwise import (
    floor as floor,
)
from thunder_ir.prims.elementwise import (
    floor_divide as floor_divide,
)
from thunder_ir.prims.elementwise import (
    fmod as fmod,
)
from thunder_ir.prims.elementwise import (
    ge as ge,
)
from thunder_ir.prims.elementwise import (
    gt as gt,
)
from thunder_ir.prims.elementwise import (
    imag as imag,
)
from thunder_ir.prims.elementwise import (
    isfinite as isfinite,
)
from thunder_ir.prims.elementwise import (
    isinf as isinf,
)
from thunder_ir.prims.elementwise import (
    isnan as isnan,
)
from thunder_ir.prims.elementwise import (
    le as le,
)
from thunder_ir.prims.elementwise import (
    lgamma as lgamma,
)
from thunder_ir.prims.elementwise import (
    log as log,
)
from thunder_ir.prims.elementwise import (
    log1p as log1p,
)
from thunder_ir.prims.elementwise import (
    log2 as log2,
)
from thunder_ir.prims.elementwise import (
    log10 as log10,
)
from thunder_ir.prims.elementwise import (
    lt as lt,
)
from thunder_ir.prims.elementwise import (
    maximum as maximum,
)
from thunder_ir.prims.elementwise import (
    minimum as minimum,
)
from thunder_ir.prims.elementwise import (
    mul as mul,
)
from thunder_ir.prims.elementwise import (
    ne as ne,
)
from thunder_ir.prims.elementwise import (
    neg as neg,
)
from thunder_ir.prims.elementwise import (
    pow as pow,
)
from thunder_ir.prims.elementwise import (
    real as real,
)
from thunder_ir.prims.elementwise import (
    reciprocal as reciprocal,
)
from thunder_ir.prims.elementwise import (
    remainder as remainder,
)
from thunder_ir.prims.elementwise import (
    round as round,
)
from thunder_ir.prims.elementwise import (
    rsqrt as rsqrt,
)
from thunder_ir.prims.elementwise import (
    shift_left as shift_left,
)
from thunder_ir.prims.elementwise import (
    shift_right as shift_right,
)
from thunder_ir.prims.elementwise import (
    sigmoid as sigmoid,
)
from thunder_ir.prims.elementwise import (
    sign as sign,
)
from thunder_ir.prims.elementwise import (
    signbit as signbit,
)
from thunder_ir.prims.elementwise import (
    sin as sin,
)
from thunder_ir.prims.elementwise import (
    sinh as sinh,
)
from thunder_ir.prims.elementwise import (
    sqrt as sqrt,
)
from thunder_ir.prims.elementwise import (
    sub as sub,
)
from thunder_ir.prims.elementwise import (
    tan as tan,
)
from thunder_ir.prims.elementwise import (
    tanh as tanh,
)
from thunder_ir.prims.elementwise import (
    trunc as trunc,
)
from thunder_ir.prims.elementwise import (
    trunc_divide as trunc_divide,
)
from thunder_ir.prims.elementwise import (
    where as where,
)
from thunder_ir.prims.factories import (
    bernoulli as bernoulli,
)
from thunder_ir.prims.factories import (
    bernoulli_like as bernoulli_like,
)
from thunder_ir.prims.factories import (
    copy_ as copy_,
)
from thunder_ir.prims.factories import (
    device_put as device_put,
)
from thunder_ir.prims.factories import (
    full as full,
)
from thunder_ir.prims.factories import (
    iota as iota,
)
from thunder_ir.prims.factories import (
    normal as normal,
)
from thunder_ir.prims.factories import (
    randint as randint,
)
from thunder_ir.prims.factories import (
    tensor as tensor,
)
from thunder_ir.prims.factories import (
    uniform as uniform,
)
from thunder_ir.prims.indexing import (
    convolution as convolution,
)
from thunder_ir.prims.indexing import (
    embedding as embedding,
)
from thunder_ir.prims.indexing import (
    gather as gather,
)
from thunder_ir.prims.indexing import (
    index_put as index_put,
)
from thunder_ir.prims.indexing import (
    index_select as index_select,
)
from thunder_ir.prims.indexing import (
    linear as linear,
)
from thunder_ir.prims.indexing import (
    matmul as matmul,
)
from thunder_ir.prims.indexing import (
    scatter_add as scatter_add,
)
from thunder_ir.prims.indexing import (
    take as take,
)
from thunder_ir.prims.prologue import GuardFailure as GuardFailure
from thunder_ir.prims.prologue import (
    check_constraint as check_constraint,
)
from thunder_ir.prims.prologue import (
    check_is as check_is,
)
from thunder_ir.prims.prologue import (
    check_keys as check_keys,
)
from thunder_ir.prims.prologue import (
    check_len as check_len,
)
from thunder_ir.prims.prologue import (
    check_type as check_type,
)
from thunder_ir.prims.prologue import (
    check_value as check_value,
)
from thunder_ir.prims.prologue import (
    python_return as python_return,
)
from thunder_ir.prims.prologue import (
    unpack_attr as unpack_attr,
)
from thunder_ir.prims.prologue import (
    unpack_cell as unpack_cell,
)
from thunder_ir.prims.prologue import (
    unpack_global as unpack_global,
)
from thunder_ir.prims.prologue import (
    unpack_key as unpack_key,
)
from thunder_ir.prims.prologue import (
    unpack_sequence as unpack_sequence,
)
from thunder_ir.prims.reductions import (
    amax as amax,
)
from thunder_ir.prims.reductions import (
    amin as amin,
)
from thunder_ir.prims.reductions import (
    argmax as argmax,
)
from thunder_ir.prims.reductions import (
    argmin as argmin,
)
from thunder_ir.prims.reductions import (
    cumprod as cumprod,
)
from thunder_ir.prims.reductions import (
    cumsum as cumsum,
)
from thunder_ir.prims.reductions import (
    prod as prod,
)
from thunder_ir.prims.reductions import (
    sum as sum,
)
from thunder_ir.prims.reductions import (
    var as var,
)
from thunder_ir.prims.reductions import (
    var_mean as var_mean,
)
from thunder_ir.prims.shape import (
    broadcast_in_dim as broadcast_in_dim,
)
from thunder_ir.prims.shape import (
    cat as cat,
)
from thunder_ir.prims.shape import (
    clone as clone,
)
from thunder_ir.prims.shape import (
    clone_layout as clone_layout,
)
from thunder_ir.prims.shape import (
    flip as flip,
)
from thunder_ir.prims.shape import (
    pad as pad,
)
from thunder_ir.prims.shape import (
    reshape as reshape,
)
from thunder_ir.prims.shape import (
    shallow_copy as shallow_copy,
)
from thunder_ir.prims.shape import (
    slice_prim as slice_prim,
)
from thunder_ir.prims.shape import (
    squeeze as squeeze,
)
from thunder_ir.prims.shape import (
    stop_gradient as stop_gradient,
)
from thunder_ir.prims.shape import (
    transpose as transpose,
)
from thunder_ir.prims.shape import (
    unsqueeze as unsqueeze,
)
from thunder_ir.prims.shape import (
    written_without_grad as written_without_grad,
)
