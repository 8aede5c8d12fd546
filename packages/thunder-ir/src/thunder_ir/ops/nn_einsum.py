"""torch.einsum as transposes, reshapes, sums and batched matmuls.

Operands are contracted left to right; each contraction is one ``prims.matmul`` over
(batch, left, contracted) x (batch, contracted, right), a pair with nothing to contract one
``prims.mul``, as torch's. Labels that only one operand has and the
output does not need are summed out first. Repeated labels within one operand (diagonals) and the
sublist format are not supported."""

from __future__ import annotations

from typing import Any

from thunder_ir import prims
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.nn_base import not_implemented, require_tensor
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import check

Label = Any  # a letter, or ("...", i) for the i-th broadcast dimension of an ellipsis


def _parse(equation: str, operands: list[TensorProxy]) -> tuple[list[list[Label]], list[Label]]:
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    check(
        len(terms) == len(operands),
        lambda: (
            "einsum(): more operands were provided than specified in the equation"
            if len(operands) > len(terms)
            else "einsum(): fewer operands were provided than specified in the equation"
        ),
    )
    ellipsis_rank = 0
    for term, op in zip(terms, operands):
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, op.ndim - len(term.replace("...", "")))
    subscripts: list[list[Label]] = []
    for i, (term, op) in enumerate(zip(terms, operands)):
        letters = term.replace("...", "")
        for c in letters:
            check(
                c.isalpha(),
                lambda: (
                    f"einsum(): invalid subscript given at index {eq.index(c)} in the equation string, subscripts must be in [a-zA-Z]"
                ),
            )
        if "..." in term:
            e = op.ndim - len(letters)
            check(
                e >= 0,
                lambda: (
                    f"einsum(): the number of subscripts in the equation ({len(letters)}) is more than the number of dimensions ({op.ndim}) for operand {i}"
                ),
            )
            before, _, after = term.partition("...")
            labels = [*before, *(("...", ellipsis_rank - e + j) for j in range(e)), *after]
        else:
            check(
                len(term) == op.ndim,
                lambda: (
                    f"einsum(): the number of subscripts in the equation ({len(term)}) does not match the number of dimensions ({op.ndim}) for operand {i} and no ellipsis was given"
                ),
            )
            labels = list(term)
        if len(set(labels)) != len(labels):
            raise not_implemented(
                "einsum", f"a repeated subscript within one operand ({term!r}, a diagonal)"
            )
        subscripts.append(labels)
    ell = [("...", j) for j in range(ellipsis_rank)]
    if arrow:
        check(rhs.count("...") <= 1, "einsum(): found more than one ellipsis in the output")
        before, has_ell, after = rhs.partition("...")
        out: list[Label] = [*before, *(ell if has_ell else []), *after]
        for c in rhs.replace("...", ""):
            check(
                any(c in s for s in subscripts),
                lambda: (
                    f"einsum(): output subscript {c} does not appear in the equation for any input operand"
                ),
            )
        check(
            len(set(out)) == len(out),
            "einsum(): output subscript appears more than once in the output",
        )
    else:
        counts: dict[Label, int] = {}
        for s in subscripts:
            for lab in s:
                if isinstance(lab, str):
                    counts[lab] = counts.get(lab, 0) + 1
        out = [*ell, *sorted(c for c, n in counts.items() if n == 1)]
    return subscripts, out


def _permute(x: TensorProxy, labels: list[Label], order: list[Label]) -> TensorProxy:
    perm = tuple(labels.index(lab) for lab in order)
    return x if perm == tuple(range(x.ndim)) else prims.transpose(x, perm)


def _reshape(x: TensorProxy, shape: tuple[Any, ...]) -> TensorProxy:
    return x if tuple(x.shape) == shape else prims.reshape(x, shape)


def _sum_out(
    x: TensorProxy, labels: list[Label], keep: set[Label]
) -> tuple[TensorProxy, list[Label]]:
    dims = tuple(i for i, lab in enumerate(labels) if lab not in keep)
    if not dims:
        return x, labels
    return prims.sum(x, dims), [lab for lab in labels if lab in keep]


def _outer(a: TensorProxy, b: TensorProxy, shape: tuple[Any, ...], n_batch: int) -> TensorProxy:
    """``a`` (batch, left) times ``b`` (batch, right) elementwise, broadcast to (batch, left,
    right): torch multiplies a pair with nothing to contract (each product rounded once, where
    a matmul over a contraction of one element would give the gradients' sums unrounded
    products)."""
    n_left = a.ndim - n_batch
    b_dims = (*range(n_batch), *range(n_batch + n_left, len(shape)))
    return prims.mul(  # type: ignore[no-any-return]
        prims.broadcast_in_dim(a, shape, tuple(range(a.ndim))),
        prims.broadcast_in_dim(b, shape, b_dims),
    )


def _prod(xs: list[Any]) -> Any:
    n: Any = 1
    for x in xs:
        n = n * x
    return n


@torchop("torch.einsum", tags=(OpTag.MATMUL,))
def einsum(equation: Any, *operands: Any) -> Any:
    check(
        isinstance(equation, str),
        "einsum(): the sublist format (operand, [dims], ...) is not supported",
        UnsupportedOptionError,
    )
    ops = (
        list(operands[0])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple))
        else list(operands)
    )
    check(len(ops) > 0, "einsum(): must provide at least one operand")
    for x in ops:
        require_tensor(x, "einsum", "operands")
    dtype = ops[0].dtype
    for x in ops[1:]:
        check(
            x.dtype == dtype, lambda: f"expected scalar type {dtype.name} but found {x.dtype.name}"
        )
    subscripts, out = _parse(equation, ops)

    # Sizes per label, broadcasting size-1 dimensions.
    sizes: dict[Label, Any] = {}
    for labels, x in zip(subscripts, ops):
        for lab, s in zip(labels, x.shape):
            cur = sizes.get(lab)
            if cur is None or (isinstance(cur, int) and cur == 1):
                sizes[lab] = s
            else:
                check(
                    (isinstance(s, int) and s == 1) or s == cur,
                    lambda: (
                        f"einsum(): operands do not broadcast with remapped shapes (original->remapped): subscript {lab} has sizes {cur} and {s}"
                    ),
                )
    tensors = []
    for labels, x in zip(subscripts, ops):
        target = tuple(sizes[lab] for lab in labels)
        tensors.append(
            x
            if tuple(x.shape) == target
            else prims.broadcast_in_dim(x, target, tuple(range(x.ndim)))
        )

    def needed_after(k: int) -> set[Label]:
        need = set(out)
        for s in subscripts[k + 1 :]:
            need.update(s)
        return need

    acc, acc_labels = _sum_out(
        tensors[0], subscripts[0], needed_after(0) | set(subscripts[1] if len(ops) > 1 else ())
    )
    for k in range(1, len(ops)):
        later = needed_after(k)
        b, b_labels = _sum_out(tensors[k], subscripts[k], later | set(acc_labels))
        acc, acc_labels = _sum_out(acc, acc_labels, later | set(b_labels))
        batch = [lab for lab in acc_labels if lab in b_labels and lab in later]
        contracted = [lab for lab in acc_labels if lab in b_labels and lab not in later]
        left = [lab for lab in acc_labels if lab not in b_labels]
        right = [lab for lab in b_labels if lab not in acc_labels]
        bs, ls, ks, rs = ([sizes[lab] for lab in g] for g in (batch, left, contracted, right))
        if contracted:
            a3 = _reshape(
                _permute(acc, acc_labels, batch + left + contracted),
                (_prod(bs), _prod(ls), _prod(ks)),
            )
            b3 = _reshape(
                _permute(b, b_labels, batch + contracted + right), (_prod(bs), _prod(ks), _prod(rs))
            )
            acc = _reshape(prims.matmul(a3, b3), (*bs, *ls, *rs))
        else:
            a2 = _permute(acc, acc_labels, batch + left)
            b2 = _permute(b, b_labels, batch + right)
            acc = _outer(a2, b2, (*bs, *ls, *rs), len(bs))
        acc_labels = batch + left + right
    acc, acc_labels = _sum_out(acc, acc_labels, set(out))
    return _permute(acc, acc_labels, out)
