"""VJP rules of the collectives: each gradient is the adjoint communication (an all-gather's is
a reduce-scatter, a sum all-reduce's is a sum all-reduce). Asynchronous collectives are
scheduling for passes that place communication (data-parallel gradient sync), not
differentiated."""

from __future__ import annotations

from thunder_ir import BoundSymbol, TensorProxy, prims
from thunder_transforms.autodiff.registry import GradPairs, bound_arguments, register_vjp

__all__: list[str] = []


def _synchronous(bsym: BoundSymbol) -> dict[str, object]:
    args = bound_arguments(bsym)
    if args.get("do_async"):
        raise NotImplementedError(
            f"{bsym.sym.id} with do_async=True is not differentiable; call it synchronously"
        )
    return args


def _linear_op(args: dict[str, object], what: str) -> str:
    op = args["op"]
    if op not in ("sum", "avg"):
        raise NotImplementedError(f"{what} with op={op!r} is not differentiable")
    return str(op)


@register_vjp(prims.all_reduce)
def _all_reduce(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = _synchronous(bsym)
    op = _linear_op(args, "prims.all_reduce")
    return [(args["a"], prims.all_reduce(g, op, args["group"]))]


@register_vjp(prims.all_gather)
def _all_gather(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = _synchronous(bsym)
    grad = prims.reduce_scatter(g, "sum", args["group"], args["world_size"])
    return [(args["a"], grad)]


@register_vjp(prims.reduce_scatter)
def _reduce_scatter(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = _synchronous(bsym)
    op = _linear_op(args, "prims.reduce_scatter")
    world_size = args["world_size"]
    grad = prims.all_gather(g, args["group"], world_size)
    if op == "avg":
        grad = prims.div(grad, float(world_size))  # type: ignore[arg-type]
    return [(args["a"], grad)]


@register_vjp(prims.broadcast)
def _broadcast(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Every rank's result is the source's input: its gradient is the sum of all of theirs, and
    # the other ranks' inputs get none.
    import torch.distributed as dist

    args = _synchronous(bsym)
    total = prims.all_reduce(g, "sum", args["group"])
    if dist.get_rank(args["group"]) != args["src"]:  # type: ignore[arg-type]
        total = prims.mul(total, 0.0)  # type: ignore[arg-type]
    return [(args["a"], total)]
