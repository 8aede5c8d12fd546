"""Copies of jitted modules and functions: ``copy.deepcopy``, ``copy.copy``, ``pickle``,
``torch.save``/``torch.load``. A copy keeps what was given to the jit, never the compiled programs
(it compiles again), and shares no state with the original."""

from __future__ import annotations

import copy
import io
import pickle
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder
from thunder_ir import Transform


def _pickled(obj: Any) -> Any:
    return pickle.loads(pickle.dumps(obj))


def _saved(obj: Any) -> Any:
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


ROUND_TRIPS: dict[str, Callable[[Any], Any]] = {
    "deepcopy": copy.deepcopy,
    "pickle": _pickled,
    "torch.save": _saved,
}


# -- models and what they are called with -------------------------------------------------------


def _sequential() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3)
    )


def _sequential_inputs() -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (torch.randn(5, 4, requires_grad=True),), {}


def _tiny_gpt2() -> torch.nn.Module:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(
        n_embd=32, n_layer=2, n_head=4, vocab_size=64, n_positions=32, bos_token_id=0,
        eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(cfg)


def _tiny_llama() -> torch.nn.Module:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(cfg)


def _token_inputs() -> tuple[tuple[Any, ...], dict[str, Any]]:
    ids = torch.randint(0, 64, (2, 8))
    return (ids,), {"labels": ids}


MODELS = {
    "sequential": (_sequential, _sequential_inputs),
    "gpt2": (_tiny_gpt2, _token_inputs),
    "llama": (_tiny_llama, _token_inputs),
}


def _loss(out: Any) -> torch.Tensor:
    return out.sum() if isinstance(out, torch.Tensor) else out.loss


def _logits(out: Any) -> torch.Tensor:
    return out if isinstance(out, torch.Tensor) else out.logits


def _storages(module: torch.nn.Module) -> set[int]:
    tensors = [*module.parameters(), *module.buffers()]
    return {t.untyped_storage().data_ptr() for t in tensors if t.numel()}


def _bring_to(state: str, jm: Any, make_inputs: Callable[[], Any]) -> None:
    """No call, a forward, or a training step (forward, backward, optimizer step)."""
    if state == "fresh":
        return
    args, kwargs = make_inputs()
    out = jm(*args, **kwargs)
    if state == "trained":
        _loss(out).backward()
        opt = torch.optim.SGD(jm.parameters(), lr=0.1)
        opt.step()
        opt.zero_grad()


def _check_copy(jm: Any, cp: Any, model: torch.nn.Module, make_inputs: Callable[[], Any]) -> None:
    """``cp`` is a fresh, independent copy of ``jm``: same options, keys and values, no shared
    storage, no compiled program; it compiles once and matches eager and the original, gradients
    included; training it leaves the original as it was."""
    assert isinstance(cp, thunder.ThunderModule) and cp is not jm
    tf, ctf = jm._thunder_function, cp._thunder_function
    assert ctf.options == tf.options
    assert [e.name for e in ctf.executors] == [e.name for e in tf.executors]
    stats = thunder.compile_stats(cp)
    assert (stats.compilations, stats.cache_hits, stats.cache_misses, stats.last_traces) == (
        0, 0, 0, []
    )  # fmt: skip
    assert list(cp.state_dict()) == list(model.state_dict()) == list(jm.state_dict())
    for (k, a), (_, b) in zip(cp.state_dict().items(), model.state_dict().items()):
        torch.testing.assert_close(a, b, msg=k)
    assert not _storages(cp.get_model()) & _storages(model)
    assert cp.get_model() is not model

    eager = copy.deepcopy(model)  # the reference: eager PyTorch on the same weights
    for p in eager.parameters():
        p.grad = None
    for p in cp.parameters():
        p.grad = None
    before = {k: v.clone() for k, v in model.state_dict().items()}
    original_stats = copy.copy(thunder.compile_stats(jm))
    for call in range(2):
        args, kwargs = make_inputs()
        ref_args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        ref = eager(*ref_args, **kwargs)
        out = cp(*args, **kwargs)
        torch.testing.assert_close(_logits(out), _logits(ref))
        _loss(out).backward()
        _loss(ref).backward()
        for a, r in zip(args, ref_args):
            if a.requires_grad:
                torch.testing.assert_close(a.grad, r.grad)
        eager_params = dict(eager.named_parameters())
        for name, p in cp.named_parameters():
            torch.testing.assert_close(p.grad, eager_params[name].grad, msg=name)
    stats = thunder.compile_stats(cp)
    assert stats.eager_fallbacks == 0 and stats.last_traces
    assert stats.compilations >= 1 and stats.cache_hits >= 1
    assert thunder.last_backward_traces(cp)  # thunder's autodiff, not eager's
    # The original's cache and counters are its own; it still matches eager.
    assert thunder.compile_stats(jm) == original_stats
    with torch.no_grad():
        args, kwargs = make_inputs()
        torch.testing.assert_close(_logits(jm(*args, **kwargs)), _logits(model(*args, **kwargs)))

    # Training the copy leaves the original as it was.
    with torch.no_grad():
        for p in cp.parameters():
            p.sub_(0.5 * p.grad)
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k], msg=k)
    assert not any(
        torch.equal(a, b) for a, b in zip(cp.parameters(), model.parameters()) if a.numel() > 1
    )


@pytest.mark.parametrize("state", ["fresh", "called", "trained"])
@pytest.mark.parametrize("how", list(ROUND_TRIPS))
def test_jitted_sequential_round_trips(how: str, state: str) -> None:
    torch.manual_seed(0)
    model = _sequential()
    jm = thunder.jit(model)
    _bring_to(state, jm, _sequential_inputs)
    _check_copy(jm, ROUND_TRIPS[how](jm), model, _sequential_inputs)


@pytest.mark.parametrize("how", list(ROUND_TRIPS))
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_jitted_transformers_model_round_trips_after_a_training_step(name: str, how: str) -> None:
    make_model, make_inputs = MODELS[name]
    torch.manual_seed(0)
    model = make_model()
    jm = thunder.jit(model)
    _bring_to("trained", jm, make_inputs)
    _check_copy(jm, ROUND_TRIPS[how](jm), model, make_inputs)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_jitted_transformers_model_deepcopy_before_a_call(name: str) -> None:
    make_model, make_inputs = MODELS[name]
    torch.manual_seed(0)
    model = make_model()
    jm = thunder.jit(model)
    _check_copy(jm, copy.deepcopy(jm), model, make_inputs)


def test_torch_save_loads_in_another_process(tmp_path: Any) -> None:
    torch.manual_seed(0)
    model = _sequential()
    jm = thunder.jit(model, executors=["torch_ops", "torch"], recompile_limit=4)
    x = torch.randn(5, 4)
    jm(x).sum().backward()
    torch.save({"model": jm, "x": x, "want": model(x).detach()}, tmp_path / "jm.pt")
    script = f"""
import torch, thunder
saved = torch.load({str(tmp_path / "jm.pt")!r}, weights_only=False)
jm, x = saved["model"], saved["x"]
assert thunder.compile_stats(jm).compilations == 0
torch.testing.assert_close(jm(x), saved["want"])
assert thunder.compile_stats(jm).compilations == 1
assert [e.name for e in jm._thunder_function.executors] == ["torch_ops", "torch"]
assert jm._thunder_function.options.recompile_limit == 4
print("loaded")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and "loaded" in done.stdout, done.stderr


def test_shallow_copy_shares_the_module_not_the_cache() -> None:
    torch.manual_seed(0)
    model = _sequential()
    jm = thunder.jit(model, recompile_limit=3)
    x = torch.randn(5, 4)
    jm(x)
    cp = copy.copy(jm)
    # a shallow copy of the module, as eager's copy.copy: its parameters and submodules shared
    assert cp.get_model() is not model and cp.get_model()._parameters is model._parameters
    assert cp.get_model()._modules is model._modules
    assert cp._thunder_function is not jm._thunder_function
    assert cp._thunder_function.options == jm._thunder_function.options
    assert thunder.compile_stats(cp).compilations == 0
    torch.testing.assert_close(cp(x), model(x))
    assert thunder.compile_stats(cp).compilations == 1
    assert thunder.compile_stats(jm).compilations == 1 and thunder.compile_stats(jm).cache_hits == 0
    handle = cp.register_forward_hook(lambda m, i, o: o * 0)
    torch.testing.assert_close(jm(x), model(x))  # a hook on the copy is not the original's
    handle.remove()


# -- jitted functions ---------------------------------------------------------------------------


def _module_level_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ y) + x.sum()


@thunder.jit
def _decorated_fn(x: torch.Tensor) -> torch.Tensor:
    return x.cos() * 3


@pytest.mark.parametrize("how", ["deepcopy", "copy", "pickle", "torch.save"])
def test_jitted_function_copies_compile_again(how: str) -> None:
    jf = thunder.jit(_module_level_fn, cache="symbolic values", recompile_limit=2)
    x, y = torch.randn(3, 4), torch.randn(4, 5)
    jf(x, y)
    cp = copy.copy(jf) if how == "copy" else ROUND_TRIPS[how](jf)
    assert isinstance(cp, thunder.ThunderFunction) and cp is not jf
    assert cp.fn is _module_level_fn and cp.options == jf.options
    assert thunder.compile_stats(cp).compilations == 0
    x, y = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5)
    xr = x.detach().clone().requires_grad_()
    out, ref = cp(x, y), _module_level_fn(xr, y)
    torch.testing.assert_close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)
    assert thunder.compile_stats(cp).compilations == 1
    assert thunder.compile_stats(jf).compilations == 1


def test_jitted_function_pickles_by_reference() -> None:
    data = pickle.dumps(thunder.jit(_module_level_fn))
    assert b"_module_level_fn" in data and len(data) < 2000
    assert pickle.loads(pickle.dumps(_decorated_fn)) is _decorated_fn  # the global itself
    x = torch.randn(4)
    torch.testing.assert_close(_decorated_fn(x), x.cos() * 3)
    cp = copy.deepcopy(_decorated_fn)
    assert cp is not _decorated_fn and thunder.compile_stats(cp).compilations == 0
    torch.testing.assert_close(cp(x), x.cos() * 3)


# -- what is kept: transforms, lookasides, executors, recipes --------------------------------


class _CountingTransform(Transform):
    """Counts the programs it saw (state a copy has its own of)."""

    def __init__(self) -> None:
        self.seen = 0

    def transform_trace_post_optimization(self, computation: Any, **kwargs: Any) -> Any:
        self.seen += 1
        return computation


def _helper(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


def _replacement(x: torch.Tensor) -> torch.Tensor:
    return x.exp()


def _uses_helper(x: torch.Tensor) -> torch.Tensor:
    return _helper(x) * 2


@pytest.mark.parametrize("how", list(ROUND_TRIPS))
def test_transforms_and_lookasides_are_kept(how: str) -> None:
    transform = _CountingTransform()
    jf = thunder.jit(
        _uses_helper,
        transforms=[transform],
        lookasides=[thunder.Lookaside(_helper, _replacement)],
        executors=["torch"],
    )
    x = torch.randn(4)
    torch.testing.assert_close(jf(x), x.exp() * 2)
    cp = ROUND_TRIPS[how](jf)
    (copied,) = cp.transforms
    assert type(copied) is _CountingTransform and copied is not transform and copied.seen == 1
    assert [e.name for e in cp.executors] == ["torch"]
    torch.testing.assert_close(cp(x), x.exp() * 2)
    assert copied.seen == 2 and transform.seen == 1


def test_compiled_with_a_recipe_pickles(monkeypatch: pytest.MonkeyPatch) -> None:
    # No background torch.compile here: the recipe's parts are what is checked.
    monkeypatch.setattr(thunder.recipes, "default_executors", lambda: ("torch_ops", "torch"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    compiled = thunder.compile(model, recipe=thunder.recipes.Quantize())
    x = torch.randn(3, 16)
    with torch.no_grad():
        want = compiled(x)
        for how, round_trip in ROUND_TRIPS.items():
            cp = round_trip(compiled)
            names = [e.name for e in cp._thunder_function.executors]
            assert names[0].startswith("recipe_operators") and names[1:] == ["torch_ops", "torch"]
            torch.testing.assert_close(cp(x), want, msg=how)
            # the recipe's kernel runs the recipe's op (its lookaside recorded it)
            assert f"{names[0]}.int8_weight_linear(" in str(thunder.last_traces(cp)[-1]), how


def test_what_cannot_be_pickled_is_named() -> None:
    with pytest.raises(TypeError, match="function '.*<lambda>'"):
        pickle.dumps(thunder.jit(lambda x: x + 1))

    class Local(Transform):
        pass

    with pytest.raises(TypeError, match="transform .*Local"):
        pickle.dumps(thunder.jit(_module_level_fn, transforms=[Local()]))

    from thunder_executors import OperatorExecutor

    unregistered = OperatorExecutor("mine")
    unregistered.register_implementation(thunder_ir_sin(), lambda a: torch.sin(a))
    with pytest.raises(TypeError, match="executor <OperatorExecutor mine> .*not registered"):
        pickle.dumps(thunder.jit(_module_level_fn, executors=[unregistered]))


def test_a_distributed_model_is_not_copied(tmp_path: Any) -> None:
    import torch.distributed as dist

    import thunder.distributed

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        jm = thunder.jit(thunder.distributed.ddp(torch.nn.Linear(4, 2)))
        jm(torch.randn(3, 4)).sum().backward()
        for round_trip in (copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="prepared by thunder.distributed"):
                round_trip(jm)
    finally:
        dist.destroy_process_group()


def thunder_ir_sin() -> Any:
    from thunder_ir.ops import ALL_OPS

    return ALL_OPS["sin"]


# -- torch.load's default (weights_only=True) ---------------------------------------------------


def test_torch_load_weights_only_refuses_the_module_and_takes_its_state_dict() -> None:
    torch.manual_seed(0)
    model = _sequential()
    jm = thunder.jit(model)
    x = torch.randn(5, 4)
    jm(x)
    buf = io.BytesIO()
    torch.save(jm, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="weights_only"):
        torch.load(buf)  # code, not weights: torch's own message says how to load it
    # The weights alone load with weights_only=True, under the original module's keys.
    buf = io.BytesIO()
    torch.save(jm.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf)
    assert list(state) == list(model.state_dict())
    fresh = thunder.jit(_sequential())
    fresh.load_state_dict(state)
    torch.testing.assert_close(fresh(x), model(x))


# -- a jitted module inside another one ---------------------------------------------------------


class _Holder(torch.nn.Module):
    """A module whose network is jitted, as a LightningModule's is (``self.model =
    thunder.jit(self.model)``)."""

    def __init__(self, jits: int) -> None:
        super().__init__()
        self.model: torch.nn.Module = torch.nn.Sequential(
            torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3)
        )
        for _ in range(jits):
            self.model = thunder.jit(self.model)
        self.head = torch.nn.Linear(3, 1)


@pytest.mark.parametrize("jits", [1, 2])
def test_a_module_holding_a_jitted_one_saves_and_loads_the_original_keys(jits: int) -> None:
    torch.manual_seed(0)
    eager = _Holder(0)
    state = eager.state_dict()
    holder = _Holder(jits)
    assert list(holder.state_dict()) == list(state)  # no ``_model.`` in the keys
    # nn.Module.load_state_dict walks the ThunderModule's children: the keys are found anyway
    assert not holder.load_state_dict(state).missing_keys
    for key, value in holder.state_dict().items():
        torch.testing.assert_close(value, state[key])
    assert "_thunder_loading_under" not in vars(holder.model)
    # and what does not fit is named by the original keys
    broken = {k: v for k, v in state.items() if k != "model.0.bias"} | {
        "model.extra": state["head.bias"]
    }
    result = holder.load_state_dict(broken, strict=False)
    assert result.missing_keys == ["model.0.bias"]
    assert result.unexpected_keys == ["model.extra"]
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "model\.0\.bias"'):
        holder.load_state_dict(broken)
    # the keys of the module's own paths (``named_parameters``) load as well (one jit)
    if jits == 1:
        paths = dict(holder.named_parameters()) | dict(holder.named_buffers())
        assert "model.0.weight" in paths
        assert not holder.load_state_dict(paths).missing_keys
    x = torch.randn(4, 2)
    holder.eval()
    eager.eval()
    with torch.no_grad():
        torch.testing.assert_close(holder.head(holder.model(x)), eager.head(eager.model(x)))
