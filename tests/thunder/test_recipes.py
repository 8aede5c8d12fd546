"""thunder.compile, recipes, thunder.Lookaside and cache="same input"."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

import thunder
from thunder.recipes import Operator, Quantize, QuantizedLinear
from thunder_executors.background_compile import wait_for_background_compiles

transformers = pytest.importorskip("transformers")


def _helper(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


def _program(x: torch.Tensor) -> torch.Tensor:
    return _helper(x) * 2


# -- Lookaside ----------------------------------------------------------------------------------


def test_lookasides_belong_to_one_program() -> None:
    with_cos = thunder.jit(_program, lookasides=[thunder.Lookaside(_helper, lambda x: x.cos())])
    plain = thunder.jit(_program)
    x = torch.randn(5)
    torch.testing.assert_close(with_cos(x), x.cos() * 2)
    torch.testing.assert_close(plain(x), x.sin() * 2)
    torch.testing.assert_close(with_cos(x), x.cos() * 2)
    assert "torch.cos" in str(thunder.last_traces(with_cos)[-1])


def test_lookaside_bad_input_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="must be callable"):
        thunder.Lookaside(_helper, 3)
    with pytest.raises(TypeError, match="thunder.Lookaside"):
        thunder.jit(_program, lookasides=[(_helper, torch.cos)])


# -- Recipe -------------------------------------------------------------------------------------


def test_overriding_setup_is_an_error_at_class_creation() -> None:
    with pytest.raises(TypeError, match="must not override"):

        class Bad(thunder.Recipe):
            def setup(self, model: Any) -> Any:
                return None


def test_compile_without_recipe_uses_available_executors(caplog: Any) -> None:
    from thunder_executors import executor_availability

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    with caplog.at_level("INFO", logger="thunder.recipes"):
        compiled = thunder.compile(model)
    chosen = thunder.recipes.default_executors()
    logged = [r.getMessage() for r in caplog.records if r.name == "thunder.recipes"]
    assert len(logged) == 1 and logged[0].startswith("thunder.compile: executors "), logged
    assert all(f"{name} (" in logged[0] for name in chosen), logged
    if not executor_availability()["nvfuser"][0]:
        assert chosen[0] == "torchcompile_background"
        assert "background thread" in logged[0]
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), model(x))
    available = executor_availability()
    for ex in thunder.recipes.default_executors():
        assert ex is not None and available[ex][0]
    compiled_fn = thunder.compile(_program, recipe=None)
    torch.testing.assert_close(compiled_fn(x), _program(x))


class _Config(thunder.Recipe):
    def __init__(self, **config: Any) -> None:
        self.config = config

    def setup_config(self) -> dict[str, Any]:
        return self.config


class _Replace(thunder.Recipe):
    def __init__(self, replacement: Any) -> None:
        self.replacement = replacement

    def setup_lookasides(self) -> list[thunder.Lookaside]:
        return [thunder.Lookaside(_helper, self.replacement)]


class _First(thunder.Transform):
    pass


class _Second(thunder.Transform):
    must_follow = (_First,)


class _Order(thunder.Recipe):
    def __init__(self, *transforms: thunder.Transform) -> None:
        self.transforms = list(transforms)

    def setup_transforms(self) -> list[thunder.Transform]:
        return self.transforms


def test_composition_merges_in_order_and_refuses_conflicts() -> None:
    x = torch.randn(4)
    compiled = thunder.compile(_program, recipe=[_Config(cache="no caching"), _Replace(torch.cos)])
    torch.testing.assert_close(compiled(x), x.cos() * 2)
    compiled(x)
    assert thunder.compile_stats(compiled).cache_hits == 0  # "no caching" applied

    with pytest.raises(ValueError, match="set the jit option 'cache' differently"):
        thunder.compile(_program, recipe=[_Config(cache="no caching"), _Config(cache="same input")])
    with pytest.raises(ValueError, match="replace .* differently"):
        thunder.compile(_program, recipe=[_Replace(torch.cos), _Replace(torch.tan)])
    with pytest.raises(ValueError, match="must follow"):
        thunder.compile(_program, recipe=[_Order(_Second()), _Order(_First())])
    thunder.compile(_program, recipe=[_Order(_First()), _Order(_Second())])  # the right order
    with pytest.raises(TypeError, match="unknown option"):
        thunder.compile(_program, recipe=_Config(no_such_option=1))
    with pytest.raises(TypeError, match="thunder.Recipe"):
        thunder.compile(_program, recipe="HFTransformers")


def test_empty_recipe_parts_mean_nothing() -> None:
    class Nothing(thunder.Recipe):
        def setup_lookasides(self) -> list[Any]:
            return []

        def setup_executors(self) -> None:
            return None

    x = torch.randn(3)
    torch.testing.assert_close(thunder.compile(_program, recipe=Nothing())(x), _program(x))


def test_setup_operators_kernel_applies_to_this_compile_only() -> None:
    calls: list[int] = []

    def my_gelu(a: torch.Tensor, approximate: str = "none") -> torch.Tensor:
        calls.append(1)
        return torch.nn.functional.gelu(a, approximate=approximate)

    class Kernel(thunder.Recipe):
        def setup_operators(self) -> list[Operator]:
            return [Operator(torch.nn.functional.gelu, my_gelu)]

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x) + 1

    x = torch.randn(6)
    compiled = thunder.compile(fn, recipe=Kernel())
    torch.testing.assert_close(compiled(x), fn(x))
    assert calls and "recipe_operators" in str(thunder.last_traces(compiled)[-1])
    calls.clear()
    other = thunder.compile(fn)
    torch.testing.assert_close(other(x), fn(x))
    assert not calls


# -- cache="same input" ---------------------------------------------------------------------------

STATE = {"k": 2.0}


def test_same_input_cache_is_never_stale() -> None:
    def f(x: torch.Tensor, n: int) -> torch.Tensor:
        return x * n + STATE["k"]

    jf = thunder.jit(f, cache=thunder.CACHE_OPTIONS.SAME_INPUT)
    assert thunder.jit(f, cache="same input") is not None
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(jf(x, 2), f(x, 2))
    x.mul_(3)  # same object, new values
    torch.testing.assert_close(jf(x, 2), f(x, 2))
    STATE["k"] = 5.0  # outside state the program reads
    torch.testing.assert_close(jf(x, 2), f(x, 2))
    y = torch.randn(2, 2)  # other objects and shapes
    torch.testing.assert_close(jf(y, 3), f(y, 3))
    torch.testing.assert_close(jf(x, 2), f(x, 2))
    STATE["k"] = 2.0


# -- Hugging Face models, quantization ---------------------------------------------------------


# Wider than tests/e2e/hf_zoo.py's models (hidden 32): int8 rounding error relative to a model's
# outputs shrinks with width, and the 1e-2 bound below is stated for configs like these.
def _tiny_bert() -> Any:
    cfg = transformers.BertConfig(
        vocab_size=128,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=3,
    )
    return transformers.BertForSequenceClassification(cfg).eval()


def _tiny_llama() -> Any:
    cfg = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(cfg).eval()


def _logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    return model(ids).logits  # type: ignore[no-any-return]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("make", [_tiny_bert, _tiny_llama], ids=["bert", "llama"])
def test_compile_hf_models_plain_and_quantized(make: Any) -> None:
    torch.manual_seed(0)
    model = make()
    ids = torch.randint(0, 128, (2, 12))
    with torch.no_grad():
        ref = _logits(model, ids)
        plain = thunder.compile(model)
        torch.testing.assert_close(_logits(plain, ids), ref)  # its regions still compiling
        assert wait_for_background_compiles(timeout=900)
        assert {r.sym.impl.status for r in thunder.last_traces(plain)[-1].fusion_regions} == {
            "compiled"
        }
        fresh = torch.randint(0, 128, (2, 12))
        torch.testing.assert_close(_logits(plain, fresh), _logits(model, fresh))
        hf = thunder.compile(model, recipe=thunder.recipes.HFTransformers())
        torch.testing.assert_close(_logits(hf, ids), ref)

        quantized_model = copy.deepcopy(model)
        float_bytes = sum(
            m.weight.numel() * m.weight.element_size()
            for m in quantized_model.modules()
            if type(m) is torch.nn.Linear
        )
        compiled = thunder.compile(
            quantized_model, recipe=[thunder.recipes.HFTransformers(), Quantize()]
        )
        out = _logits(compiled, ids)
        assert _rel(out, ref) < 1e-2
        layers = [m for m in quantized_model.modules() if isinstance(m, QuantizedLinear)]
        assert layers and not any(type(m) is torch.nn.Linear for m in quantized_model.modules())
        int8_bytes = sum(m.qweight.numel() + m.scale.numel() * 4 for m in layers)
        assert int8_bytes * 3.5 < float_bytes
        assert "int8_weight_linear" in str(thunder.last_traces(compiled)[-1])
        # the eager quantized model agrees with the compiled one
        torch.testing.assert_close(out, _logits(quantized_model, ids), atol=1e-4, rtol=1e-4)


def test_quantized_linear_gradients_flow_to_inputs_and_bias() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    compiled = thunder.compile(model, recipe=Quantize())  # quantizes the model in place
    x = torch.randn(5, 16, requires_grad=True)
    out = compiled(x)
    out.sum().backward()
    got = [x.grad.clone(), model[2].bias.grad.clone()]  # type: ignore[union-attr]
    x.grad = None
    model.zero_grad()
    assert isinstance(model[0], QuantizedLinear)
    model(x).sum().backward()  # the eager (dequantizing) quantized model
    torch.testing.assert_close(got[0], x.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got[1], model[2].bias.grad)


def test_recipes_validate_their_models() -> None:
    with pytest.raises(ValueError, match="PreTrainedModel"):
        thunder.compile(torch.nn.Linear(2, 2), recipe=thunder.recipes.HFTransformers())
    with pytest.raises(ValueError, match="bits must be 8 or 4"):
        Quantize(bits=3)
    with pytest.raises(ValueError, match="no nn.Linear"):
        thunder.compile(torch.nn.ReLU(), recipe=Quantize())


def test_four_bit_quantization_through_bitsandbytes() -> None:
    import bitsandbytes  # noqa: F401  (a pinned dev dependency: its 4-bit kernels run on CPU)

    from thunder.recipes import QuantizedLinear4bit

    torch.manual_seed(0)
    model = _tiny_llama()
    ids = torch.randint(0, 128, (2, 12))
    with torch.no_grad():
        ref = _logits(model, ids)
        quantized = copy.deepcopy(model)
        compiled = thunder.compile(
            quantized, recipe=[thunder.recipes.HFTransformers(), Quantize(bits=4)]
        )
        out = _logits(compiled, ids)
        layers = [m for m in quantized.modules() if isinstance(m, QuantizedLinear4bit)]
        assert layers and not any(type(m) is torch.nn.Linear for m in quantized.modules())
        torch.testing.assert_close(out, _logits(quantized, ids), atol=1e-5, rtol=1e-5)
        assert _rel(out, ref) < 0.25  # NF4: 4 bits per weight
        assert "nf4_weight_linear" in str(thunder.last_traces(compiled)[-1])
        packed = sum(m.qweight.numel() + m.absmax.numel() * 4 for m in layers)
        assert packed * 5 < sum(m.in_features * m.out_features * 4 for m in layers)
    assert thunder.compile_stats(compiled).eager_fallbacks == 0


def test_four_bit_without_bitsandbytes_is_refused_by_validate(monkeypatch: Any) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "bitsandbytes" else real(name, *a),
    )
    with pytest.raises(ValueError, match="needs bitsandbytes"):
        thunder.compile(torch.nn.Linear(2, 2), recipe=Quantize(bits=4))


def test_compiled_training_matches_eager_while_and_after_its_regions_compile() -> None:
    """thunder.compile's regions compile in the background: the steps before and after agree
    with eager (outputs and gradients), and the compiled programs' guards hold for the calls
    that follow (torch.compile compiles nothing more)."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
    )
    reference = copy.deepcopy(model)
    compiled = thunder.compile(model)

    def step() -> None:
        x = torch.randn(5, 8)
        model.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
        out = compiled(x)
        out.square().mean().backward()
        expected = reference(x)
        expected.square().mean().backward()
        torch.testing.assert_close(out, expected)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)

    step()
    regions = [
        *thunder.last_traces(compiled)[-1].fusion_regions,
        *thunder.last_backward_traces(compiled)[-1].fusion_regions,
    ]
    assert len(regions) >= 2  # forward and backward
    assert wait_for_background_compiles(timeout=900)
    assert {r.sym.impl.status for r in regions} == {"compiled"}
    graphs = counters["stats"]["unique_graphs"]
    for _ in range(2):
        step()
    assert counters["stats"]["unique_graphs"] == graphs
