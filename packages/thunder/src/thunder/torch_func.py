"""Calls of a jitted callable under ``torch.func`` transforms.

Under one ``grad``/``vjp`` level (``jacrev`` too: it vmaps the vjp) the compiled program runs:
thunder's ``autograd.Function`` runs its forward on the unwrapped tensors and its backward below
the transforms (``thunder_transforms.autodiff.functorch_backward``). Anything else (``vmap``,
``jvp``/``jacfwd``, ``functionalize``, nested transforms such as ``grad(grad(f))``, or a program
compiled with ``disable_torch_autograd=True``) runs the original function eagerly, with one
warning per jitted callable: the compiled program cannot see functorch's batched or dual tensors
and its backward is differentiable once.

A call made while a forward-mode AD level is open (``torch.autograd.forward_ad.dual_level``) runs
eagerly too: dual tensors may reach it (an argument, a parameter, a global), and the compiled
program does not compute eager's tangents (a custom ``autograd.Function``'s ``jvp``, thunder's
``autograd.Function`` which has none).
"""

from __future__ import annotations

from torch._C._functorch import TransformType, get_interpreter_stack, peek_interpreter_stack
from torch.autograd import forward_ad

__all__ = ["eager_reason", "forward_ad", "transforms_active"]

# None when no torch.func transform is active (a C call: the cached path checks it).
transforms_active = peek_interpreter_stack

_NAMES = {
    TransformType.Grad: "grad/vjp",
    TransformType.Vmap: "vmap",
    TransformType.Jvp: "jvp",
    TransformType.Functionalize: "functionalize",
}


def eager_reason(disable_torch_autograd: bool) -> str | None:
    """None when the compiled program serves a call under the active transforms; else why the
    call runs eagerly."""
    kinds = [i.key() for i in get_interpreter_stack() or ()]
    forward_mode = forward_ad._current_level >= 0
    if not kinds and not forward_mode:
        return None  # (torch.compile's frames can leave a level peeked with none active)
    if forward_mode and TransformType.Jvp not in kinds:
        return (
            "is called under forward-mode AD (torch.autograd.forward_ad.dual_level), whose "
            "tangents the compiled program does not compute as eager does"
        )
    if kinds == [TransformType.Grad] and not disable_torch_autograd:
        return None
    names = " inside ".join(f"torch.func {_NAMES.get(k, k.name)}" for k in reversed(kinds))
    if kinds == [TransformType.Grad]:
        return f"is called under {names} and was jitted with disable_torch_autograd=True"
    return (
        f"is called under {names}; thunder compiles calls under a single torch.func grad/vjp "
        "(or jacrev) level only"
    )
