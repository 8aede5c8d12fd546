"""A module's forward that registers, assigns or deletes its own buffers, parameters,
submodules and attributes: thunder's outputs, gradients and the module's state after each call
equal an eager twin's, over several calls (cache hits and recompiles), for both caches."""

import functools
import warnings

import pytest
import torch

import thunder

CACHES = [{}, {"cache": "symbolic values"}]


def _state(m: torch.nn.Module) -> dict:
    """What a caller sees of a module's state: every store's names in order, their values, and
    its plain attributes."""
    out: dict = {}
    for name, mod in m.named_modules():
        out[f"{name}:buffers"] = list(mod._buffers)
        out[f"{name}:parameters"] = list(mod._parameters)
        out[f"{name}:modules"] = list(mod._modules)
        out[f"{name}:non_persistent"] = sorted(mod._non_persistent_buffers_set)
        for store in ("_buffers", "_parameters"):
            for k, v in getattr(mod, store).items():
                out[f"{name}:{store}:{k}"] = None if v is None else (type(v), v.detach().clone())
        for k, v in vars(mod).items():
            if not k.startswith("_") and k != "training":
                out[f"{name}:attr:{k}"] = (
                    (type(v), v.detach().clone()) if isinstance(v, torch.Tensor) else v
                )
    return out


def _assert_same_state(thunder_module: torch.nn.Module, eager_module: torch.nn.Module) -> None:
    got, want = _state(thunder_module), _state(eager_module)
    assert list(got) == list(want)
    for k in want:
        if (
            isinstance(want[k], tuple)
            and len(want[k]) == 2
            and isinstance(want[k][1], torch.Tensor)
        ):
            assert got[k][0] is want[k][0], k
            torch.testing.assert_close(got[k][1], want[k][1], msg=k)
        else:
            assert got[k] == want[k], k


def _run_like_eager(make, inputs, jit_kwargs, *, grads: bool = False) -> None:
    torch.manual_seed(0)
    eager = make()
    torch.manual_seed(0)
    compiled = make()
    jm = thunder.jit(compiled, **jit_kwargs)
    for i, x in enumerate(inputs):
        xe = x.clone().requires_grad_(grads)
        xt = x.clone().requires_grad_(grads)
        want = eager(xe)
        got = jm(xt)
        torch.testing.assert_close(got, want, msg=f"call {i}")
        if grads:
            want.float().pow(2).sum().backward()
            got.float().pow(2).sum().backward()
            torch.testing.assert_close(xt.grad, xe.grad, msg=f"call {i} input grad")
            for (n, pe), (_, pt) in zip(
                eager.named_parameters(), compiled.named_parameters(), strict=True
            ):
                if pe.grad is None:
                    assert pt.grad is None, n
                else:
                    torch.testing.assert_close(pt.grad, pe.grad, msg=f"call {i} grad {n}")
                pe.grad = pt.grad = None
        _assert_same_state(compiled, eager)


def _inputs(n: int = 4, shape: tuple[int, ...] = (3,)) -> list[torch.Tensor]:
    return [torch.randn(shape) for _ in range(n)]


class _Forward(torch.nn.Module):
    """A module whose forward is ``body`` (a function of the module and the input)."""

    def __init__(self, body, setup=None):
        super().__init__()
        self.body = body
        if setup is not None:
            setup(self)

    def forward(self, x):
        return self.body(self, x)


def _two_buffers(m, x):
    m.register_buffer("b", x * 2)
    m.register_buffer("c", x * 3)
    return x + 1


def _buffer_then_parameter(m, x):
    m.register_buffer("b", x * 2)
    m.register_parameter("p", None)
    return x + 1


def _buffer_then_module(m, x):
    m.register_buffer("b", x * 2)
    m.add_module("sub", torch.nn.Identity())
    return x + 1


def _buffer_then_register_module(m, x):
    m.register_buffer("b", x * 2)
    m.register_module("sub", torch.nn.Identity())
    return x + len(m._modules)


def _buffer_then_len(m, x):
    m.register_buffer("b", x * 2)
    m.register_buffer("c", x - 1, persistent=False)
    return x + len(m._buffers) + len(m.state_dict())


def _grow_counter_buffer(m, x):
    # a new buffer each call (named by how many there are)
    m.register_buffer(f"b{len(m._buffers)}", x.sum().reshape(1))
    m.register_buffer(f"b{len(m._buffers)}", x.mean().reshape(1))
    return x * len(m._buffers)


def _setattr_twice(m, x):
    if "b" not in m._buffers:
        m.register_buffer("b", torch.zeros_like(x))
    m.b = m.b + x
    m.b = m.b * 2
    return x + m.b


def _item_assign_twice(m, x):
    m._buffers["b"] = x * 2
    m._buffers["c"] = x + m._buffers["b"]
    return x + len(m._buffers)


CHANGES_REGISTERED = [
    _two_buffers,
    _buffer_then_parameter,
    _buffer_then_module,
    _buffer_then_register_module,
    _buffer_then_len,
    _grow_counter_buffer,
    _setattr_twice,
    _item_assign_twice,
]


@pytest.mark.parametrize("jit_kwargs", CACHES, ids=["default", "symbolic"])
@pytest.mark.parametrize("body", CHANGES_REGISTERED, ids=lambda f: f.__name__)
def test_registering_twice_in_one_call_like_eager(body, jit_kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a call may run split; its results must still agree)
        _run_like_eager(lambda: _Forward(body), _inputs(), jit_kwargs)


class _LazyMask(torch.nn.Module):
    """A causal mask and positions built lazily, and rebuilt larger, in forward."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(4, 12)

    def forward(self, x):
        t = x.shape[1]
        if not hasattr(self, "mask") or self.mask.shape[0] < t:
            self.register_buffer(
                "mask", torch.ones(t, t, dtype=torch.bool).tril(), persistent=False
            )
            self.register_buffer("pos", torch.arange(t), persistent=False)
        q, k, v = self.qkv(x).chunk(3, -1)
        a = (q @ k.transpose(1, 2)).masked_fill(~self.mask[:t, :t], float("-inf")).softmax(-1)
        return a @ v + self.pos[:t, None]


@pytest.mark.parametrize("jit_kwargs", CACHES, ids=["default", "symbolic"])
def test_lazily_built_mask_like_eager(jit_kwargs):
    inputs = [torch.randn(2, t, 4) for t in (3, 2, 5, 5, 4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run_like_eager(_LazyMask, inputs, jit_kwargs, grads=True)


def _with_buffer(m):
    m.register_buffer("b", torch.ones(3))


def _with_everything(m):
    m.register_buffer("b", torch.ones(3))
    m.register_buffer("keep", torch.full((3,), 2.0))
    m.p = torch.nn.Parameter(torch.ones(3))
    m.k = torch.ones(3)
    m.sub = torch.nn.Linear(3, 3)
    m.register_buffer("np", torch.full((3,), 0.5), persistent=False)


def _del_if_in_buffers(m, x):
    if "b" in m._buffers:
        x = x - m.b
        del m.b
    return x


def _del_if_in_buffers_unread(m, x):
    if "b" in m._buffers:
        del m.b
    return x * 2


def _del_after_get(m, x):
    b = m._buffers.get("b")
    if b is not None:
        x = x - b
        del m.b
    return x


def _del_then_len(m, x):
    if "b" in m._buffers:
        x = x - m.b
        del m.b
    return x + len(m._buffers) + len(list(m.buffers()))


def _del_or_register(m, x):
    if "b" in m._buffers:
        y = x - m.b
        del m.b
    else:
        m.register_buffer("b", x * 2)
        y = x
    return y


def _del_parameter(m, x):
    if "p" in m._parameters:
        x = x * m.p
        del m.p
    return x + len(m._parameters)


def _del_submodule(m, x):
    if "sub" in m._modules:
        x = m.sub(x)
        del m.sub
    return x + len(m._modules)


def _del_attribute(m, x):
    if "k" in m.__dict__:
        x = x - m.k
        del m.k
    return x


def _reassign_buffer_then_read_store(m, x):
    if "b" in m._buffers:
        m.b = m.b + x
        return x * m._buffers["b"] + len(m._buffers)
    return x


def _buffer_becomes_parameter(m, x):
    if "b" in m._buffers:
        x = x - m.b
        del m.b
        m.b = torch.nn.Parameter(torch.full((3,), 3.0))
    return x + len(m._parameters) + len(m._buffers)


def _module_replaced(m, x):
    if isinstance(m.sub, torch.nn.Linear):
        x = m.sub(x)
        m.sub = torch.nn.Identity()
    return x + len(m._modules)


def _del_without_looking_then_len(m, x):
    # the store is first read after nn.Module's own __delattr__ changed it
    if hasattr(m, "b"):
        x = x - m.b
        del m.b
    return x + len(m._buffers)


def _del_then_state_dict(m, x):
    if "b" in m._buffers:
        x = x - m.b
        del m.b
    return x + len(m.state_dict()) + len(dict(m.named_buffers()))


def _del_non_persistent(m, x):
    if "np" in m._buffers:
        x = x * m.np
        del m.np
    else:
        m.register_buffer("np", x.detach() + 1, persistent=False)
    return x + len(m._non_persistent_buffers_set) + len(m.state_dict())


_SPARE = torch.nn.Identity()


def _add_existing_module(m, x):
    if "extra" not in m._modules:
        m.add_module("extra", _SPARE)
    else:
        del m.extra
    return x + len(m._modules) + len(list(m.children()))


def _assign_buffer_then_buffers(m, x):
    m.keep = m.keep * x
    return x + sum(b.sum() for b in m.buffers())


def _store_held_across_delete(m, x):
    # the program holds the store (its copy of it) while nn.Module's __delattr__ changes it
    bufs, params = m._buffers, m._parameters
    if "b" in bufs:
        x = x - m.b
        del m.b
    if "p" in params:
        x = x * m.p
        del m.p
    return x + len(bufs) + sum(v.sum() for v in bufs.values()) + len(params)


def _store_held_across_assign(m, x):
    bufs = m._buffers
    m.keep = bufs["keep"] * x
    m.keep = m.keep + 1
    return x + bufs["keep"] + len(bufs)


CHANGES_DELETED = [
    _store_held_across_delete,
    _store_held_across_assign,
    _del_without_looking_then_len,
    _del_then_state_dict,
    _del_non_persistent,
    _add_existing_module,
    _assign_buffer_then_buffers,
    _del_if_in_buffers,
    _del_if_in_buffers_unread,
    _del_after_get,
    _del_then_len,
    _del_or_register,
    _del_parameter,
    _del_submodule,
    _del_attribute,
    _reassign_buffer_then_read_store,
    _buffer_becomes_parameter,
    _module_replaced,
]


@pytest.mark.parametrize("jit_kwargs", CACHES, ids=["default", "symbolic"])
@pytest.mark.parametrize("body", CHANGES_DELETED, ids=lambda f: f.__name__)
def test_deleting_after_looking_in_the_store_like_eager(body, jit_kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run_like_eager(lambda: _Forward(body, _with_everything), _inputs(), jit_kwargs)


@pytest.mark.parametrize("jit_kwargs", CACHES, ids=["default", "symbolic"])
def test_state_untouched_when_the_call_fails(jit_kwargs):
    """A call that raises after deleting a buffer leaves the module as eager leaves it."""

    def body(m, x):
        if "b" in m._buffers:
            x = x - m.b
            del m.b
        raise ValueError("after the delete")

    eager, compiled = _Forward(body, _with_buffer), _Forward(body, _with_buffer)
    jm = thunder.jit(compiled, **jit_kwargs)
    with pytest.raises(ValueError):
        eager(torch.randn(3))
    with pytest.raises(ValueError):
        jm(torch.randn(3))
    _assert_same_state(compiled, eager)


class _Config:
    pass


@pytest.mark.parametrize("jit_kwargs", CACHES, ids=["default", "symbolic"])
def test_container_changed_then_read_through_its_holder(jit_kwargs):
    """An outside dict or list the program changes, read again inside what holds it (an
    object's ``vars``, a list of lists): the guards describe what the call found."""

    def make():
        cfg = _Config()
        cfg.seen = {}
        cfg.scale = 2
        groups = [[], [1]]

        def fn(x):
            cfg.seen[len(cfg.seen)] = 1
            groups[0].append(1)
            held = sum(len(v) for v in vars(cfg).values() if isinstance(v, dict))
            return x * cfg.scale + held + sum(len(g) for g in groups)

        return fn, cfg, groups

    eager, eager_cfg, eager_groups = make()
    traced, cfg, groups = make()
    jf = thunder.jit(traced, **jit_kwargs)
    for i, x in enumerate(_inputs()):
        torch.testing.assert_close(jf(x), eager(x), msg=f"call {i}")
        assert cfg.seen == eager_cfg.seen and groups == eager_groups


@functools.lru_cache
def _cached_scale(n: int) -> int:
    return n * 2


@pytest.mark.parametrize("jit_kwargs", CACHES, ids=["default", "symbolic"])
def test_a_call_run_eagerly_finds_the_module_as_it_was(jit_kwargs):
    """Tracing deletes a buffer (nn.Module's own __delattr__), then the call runs eagerly (an
    lru_cache helper): undoing the trace's writes put the buffer back among the buffers, not
    as a plain attribute, so the eager run counts it."""

    def body(m, x):
        n = len(m._buffers)
        if hasattr(m, "b"):
            x = x - m.b
            del m.b
        return x * _cached_scale(n)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run_like_eager(lambda: _Forward(body, _with_everything), _inputs(), jit_kwargs)
