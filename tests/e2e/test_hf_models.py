"""End to end: Hugging Face transformers models (tiny configs, random weights) under plain
``thunder.jit(model)`` with default options equal eager PyTorch: eval forward on two inputs (the
second a cache hit), and a training step whose loss and every parameter's gradient match."""

from __future__ import annotations

import copy

import pytest
import torch

import thunder
from thunder_ir import OpTag

hf_zoo = pytest.importorskip("hf_zoo")
pytest.importorskip("transformers", reason="transformers is a pinned test dependency")

# Architectures that cannot run yet, with the exact reason (none may be skipped silently).
XFAIL: dict[str, str] = {}


def _params(name: str, more: bool = False) -> list[object]:
    names = hf_zoo.ARCHITECTURES + (hf_zoo.MORE_ARCHITECTURES if more else ())
    return [
        pytest.param(n, marks=pytest.mark.xfail(reason=XFAIL[n], strict=True)) if n in XFAIL else n
        for n in names
    ]


@pytest.mark.parametrize("name", _params("eval", more=True))
def test_eval_forward_matches_eager(name: str) -> None:
    model = hf_zoo.build(name)
    jitted = thunder.jit(model)
    for seed in (1, 2):
        inputs = hf_zoo.inputs(name, seed)
        with torch.no_grad():
            expected, actual = model(**inputs), jitted(**inputs)
        assert type(actual) is type(expected)
        assert actual.keys() == expected.keys()
        torch.testing.assert_close(hf_zoo.logits(actual), hf_zoo.logits(expected))
        _assert_same_value(actual, expected, "output")
    assert thunder.cache_misses(jitted) == 1
    assert thunder.cache_hits(jitted) == 1


def _assert_same_value(actual: object, expected: object, path: str, depth: int = 0) -> None:
    """``actual`` is ``expected`` rebuilt: the same types, tensors equal, and the same parts are
    one object (a ModelOutput's item and attribute, a cache held twice)."""
    assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
        return
    if depth > 6 or expected is None or isinstance(expected, (bool, int, float, str)):
        assert depth > 6 or actual == expected, f"{path}: {actual!r} != {expected!r}"
        return
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), path  # type: ignore[arg-type]
        for i, (a, e) in enumerate(zip(actual, expected)):  # type: ignore[call-overload]
            _assert_same_value(a, e, f"{path}[{i}]", depth + 1)
        return
    if isinstance(expected, dict):
        assert list(actual) == list(expected), path  # type: ignore[call-overload]
        for k, e in expected.items():
            a = actual[k]  # type: ignore[index]
            if isinstance(k, str) and hasattr(expected, k):  # a ModelOutput: items are attributes
                assert (getattr(actual, k) is a) == (getattr(expected, k) is e), f"{path}.{k}"
            _assert_same_value(a, e, f"{path}[{k!r}]", depth + 1)
        return
    if hasattr(expected, "__dict__"):
        names = [n for n in vars(expected) if not n.startswith("__")]
        assert sorted(vars(actual)) == sorted(vars(expected)), path
        for n in names:
            _assert_same_value(getattr(actual, n), getattr(expected, n), f"{path}.{n}", depth + 1)


# Architectures whose eval program depends on more than the sizes under symbolic values, with the
# number of programs 3 sequence lengths take and why.
SYMBOLIC_PROGRAMS = {
    "mixtral": (
        3,
        "an op of its expert routing runs through the torch fallback, which specializes the token count",
    ),
    "qwen2_moe": (3, "as mixtral's"),
    "qwen3_moe": (3, "as mixtral's"),
    "phimoe": (3, "as mixtral's"),
    "gpt_oss": (3, "as mixtral's"),
    "deepseek_v3": (3, "as mixtral's"),
    "canine": (
        3,
        "its local attention loops over chunks of the sequence (a Python range over its length)",
    ),
}


@pytest.mark.parametrize("name", _params("symbolic", more=True))
def test_symbolic_sizes_serve_every_sequence_length(name: str) -> None:
    model = hf_zoo.build(name)
    jitted = thunder.jit(model, cache="symbolic values")
    for seed, length in ((1, 8), (2, 11), (3, 6)):
        inputs = hf_zoo.inputs(name, seed, length=length)
        with torch.no_grad():
            expected, actual = model(**inputs), jitted(**inputs)
        torch.testing.assert_close(hf_zoo.logits(actual), hf_zoo.logits(expected))
    programs = SYMBOLIC_PROGRAMS.get(name, (1, ""))[0]
    stats = thunder.compile_stats(jitted)
    assert stats.compilations <= programs and stats.eager_fallbacks == 0


@pytest.mark.parametrize("name", _params("train", more=True))
def test_training_step_matches_eager(name: str) -> None:
    eager = hf_zoo.build(name, seed=3).train()
    model = hf_zoo.build(name, seed=3).train()
    jitted = thunder.jit(model)
    inputs = hf_zoo.inputs(name, seed=4)
    for m, run in ((eager, eager), (model, jitted)):
        torch.manual_seed(6)  # the same random numbers (Phi-MoE's router samples in training)
        loss = hf_zoo.logits(run(**inputs)).float().square().mean()
        loss.backward()
        m.loss = loss.detach()
    torch.testing.assert_close(model.loss, eager.loss)
    named = dict(model.named_parameters())
    for pname, p in eager.named_parameters():
        q = named[pname]
        if p.grad is None:
            assert q.grad is None, pname
        else:
            assert q.grad is not None, pname
            torch.testing.assert_close(q.grad, p.grad, msg=lambda m, n=pname: f"{n}: {m}")


# transformers' own classes refuse activation checkpointing for these (eager raises too).
NO_CHECKPOINTING = ("albert", "resnet", "xlnet")
# Checkpointed layers with batch norms in training: eager's backward runs them again, updating
# the running statistics a second time, so the call runs eagerly (a compiled region updates once).
CHECKPOINTED_BATCH_NORMS = ("mobilevit",)


@pytest.mark.parametrize(
    "name",
    [n for n in hf_zoo.ARCHITECTURES + hf_zoo.MORE_ARCHITECTURES if n not in NO_CHECKPOINTING],
)
def test_training_step_with_gradient_checkpointing_matches_eager(name: str) -> None:
    """``model.activation_checkpointing_enable()``: each layer runs as a checkpointed region
    (transformers passes some tensors to it through a functools.partial), and a forward hook
    calls ``requires_grad_(True)`` on the input embeddings. Loss, every gradient and every
    buffer equal eager's, over two steps."""
    eager = hf_zoo.build(name, seed=3)
    model = hf_zoo.build(name, seed=3)
    for m in (eager, model):
        m.activation_checkpointing_enable()
        m.train()
    jitted = thunder.jit(model)
    for seed in (4, 5):
        inputs = hf_zoo.inputs(name, seed=seed)
        losses = []
        for m, run in ((eager, eager), (model, jitted)):
            m.zero_grad()
            torch.manual_seed(seed)  # the same random numbers in both
            loss = hf_zoo.logits(run(**inputs)).float().square().mean()
            loss.backward()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0])
        named = dict(model.named_parameters())
        for pname, p in eager.named_parameters():
            q = named[pname]
            assert (p.grad is None) == (q.grad is None), pname
            if p.grad is not None:
                torch.testing.assert_close(q.grad, p.grad, msg=lambda m, n=pname: f"{n}: {m}")
        buffers = dict(model.named_buffers())
        for bname, b in eager.named_buffers():
            torch.testing.assert_close(buffers[bname], b, msg=lambda m, n=bname: f"{n}: {m}")
    if name in CHECKPOINTED_BATCH_NORMS:
        assert thunder.compile_stats(jitted).eager_fallbacks > 0
        return
    regions = [
        b for b in thunder.last_traces(jitted)[0].bound_symbols if b.has_tag(OpTag.CHECKPOINT)
    ]
    assert regions, "no checkpointed region was recorded"
    assert thunder.compile_stats(jitted).eager_fallbacks == 0


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "mixtral", "qwen2_moe", "t5", "vit"])
def test_bfloat16_weights_and_cpu_autocast_forward_match_eager(name: str) -> None:
    """A model converted to bfloat16 (mixtral's experts then ask transformers' version probe,
    a cached function marked constant for the process), and a float32 model under CPU autocast."""
    model = hf_zoo.build(name)
    low = copy.deepcopy(model).to(torch.bfloat16)
    jitted_low, jitted = thunder.jit(low), thunder.jit(model)
    with torch.no_grad():
        for seed in (0, 1):
            inputs = hf_zoo.inputs(name, seed)
            if name in hf_zoo.IMAGES:
                low_inputs = {k: v.to(torch.bfloat16) for k, v in inputs.items()}
            else:
                low_inputs = inputs
            torch.testing.assert_close(
                hf_zoo.logits(jitted_low(**low_inputs)), hf_zoo.logits(low(**low_inputs))
            )
            with torch.autocast("cpu", dtype=torch.bfloat16):
                # A float32 value that differs in its last bits (a sum taken in another order:
                # qwen2_moe's expert outputs) can round to a neighbouring bfloat16 at the next
                # cast: one bfloat16 unit at the logits' magnitude.
                torch.testing.assert_close(
                    hf_zoo.logits(jitted(**inputs)),
                    hf_zoo.logits(model(**inputs)),
                    rtol=1.6e-2,
                    atol=4e-3,
                )
    for j in (jitted_low, jitted):
        assert thunder.compile_stats(j).eager_fallbacks == 0


def test_models_in_one_process_do_not_interfere() -> None:
    """Jitting several architectures in one process: each keeps its own program."""
    names = ("bert", "gpt2", "llama", "vit")
    models = {n: hf_zoo.build(n) for n in names}
    jitted = {n: thunder.jit(m) for n, m in models.items()}
    for _ in range(2):
        for n in names:
            inputs = hf_zoo.inputs(n, 5)
            with torch.no_grad():
                torch.testing.assert_close(
                    hf_zoo.logits(jitted[n](**inputs)), hf_zoo.logits(models[n](**inputs))
                )
    assert all(thunder.cache_misses(j) == 1 for j in jitted.values())


# Architectures whose loss with labels is not compiled (the call runs eagerly), with the reason.
# (DeBERTa-v2's, which branches on (labels >= 0).nonzero().size(0), compiles: a size from data.)
LABELS_XFAIL: dict[str, str] = {}


def _labels_params() -> list[object]:
    names = [n for n in hf_zoo.ARCHITECTURES + hf_zoo.MORE_ARCHITECTURES if n not in hf_zoo.IMAGES]
    return [
        pytest.param(n, marks=pytest.mark.xfail(reason=LABELS_XFAIL[n], strict=True))
        if n in LABELS_XFAIL
        else n
        for n in names
    ]


@pytest.mark.parametrize("name", _labels_params())
def test_training_step_with_labels_and_padding_matches_eager(name: str) -> None:
    """The model computes its own loss from ``labels`` (ignored positions included) under a
    padded ``attention_mask``: loss, logits and every gradient as eager's."""
    results = []
    for jit in (False, True):
        model = hf_zoo.build(name, seed=3).train()
        inputs = hf_zoo.inputs(name, seed=4)
        mask = torch.ones_like(inputs["input_ids"])
        mask[0, -3:] = 0
        inputs["attention_mask"] = mask
        g = torch.Generator().manual_seed(5)
        if "decoder_input_ids" in inputs:
            labels = torch.randint(2, 99, inputs["decoder_input_ids"].shape, generator=g)
            labels[0, -1] = -100
        elif type(model).__name__.endswith("ForSequenceClassification"):
            labels = torch.tensor([0, 1])
        else:
            labels = inputs["input_ids"].clone()
            labels[0, -3:] = -100
        inputs["labels"] = labels
        torch.manual_seed(6)
        run = thunder.jit(model) if jit else model
        out = run(**inputs)
        if jit:  # an eager run of the call would match trivially
            assert thunder.compile_stats(run).eager_fallbacks == 0
        out["loss"].backward()
        grads = {n: p.grad for n, p in model.named_parameters()}
        results.append((out["loss"].detach(), hf_zoo.logits(out).detach(), grads))
    (loss, logits, grads), (jloss, jlogits, jgrads) = results
    torch.testing.assert_close(jloss, loss)
    torch.testing.assert_close(jlogits, logits)
    for n, g in grads.items():
        if g is None:
            assert jgrads[n] is None, n
        else:
            torch.testing.assert_close(jgrads[n], g, msg=lambda m, n=n: f"{n}: {m}")


def _forward_hook_counts(model: torch.nn.Module) -> dict[str, int]:
    return {n: len(m._forward_hooks) for n, m in model.named_modules() if m._forward_hooks}


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "mixtral", "t5", "bart", "vit"])
def test_hidden_states_asked_for_on_the_first_call_install_transformers_hooks_as_eager(
    name: str,
) -> None:
    """The first call that asks for hidden states makes transformers install its capturing
    forward hooks (under a threading lock) and mark the model. Under thunder.jit that call's
    program registers them (its epilogue stores new hook functions, made from the same code, in
    the modules' hook dicts); the next call finds them and compiles the path that runs them. The
    models end with exactly eager's hooks, and every output equals eager's."""
    model = hf_zoo.build(name)
    reference = copy.deepcopy(model)
    jitted = thunder.jit(model)
    asks = [
        {"output_hidden_states": True},
        {"output_hidden_states": True, "output_attentions": True},
        {},
        {"output_hidden_states": True},
    ]
    with torch.no_grad():
        for seed, kw in enumerate(asks):
            inputs = hf_zoo.inputs(name, seed)
            expected, actual = reference(**inputs, **kw), jitted(**inputs, **kw)
            keys = [k for k in expected.keys() if k.endswith(("hidden_states", "attentions"))]
            assert bool(keys) == bool(kw)
            for k in keys:
                _assert_same_value(actual[k], expected[k], k)
            torch.testing.assert_close(hf_zoo.logits(actual), hf_zoo.logits(expected))
            assert _forward_hook_counts(model) == _forward_hook_counts(reference)
    assert _forward_hook_counts(model)  # installed, once
    assert thunder.compile_stats(jitted).eager_fallbacks == 0


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "t5", "vit"])
def test_hidden_states_and_attentions_match_eager(name: str) -> None:
    """``output_hidden_states`` / ``output_attentions``: transformers collects them with forward
    hooks into a dict it makes per call and stores on a module global. Here the hooks are
    installed by a first eager call."""
    model = hf_zoo.build(name)
    kw = {"output_hidden_states": True, "output_attentions": True}
    with torch.no_grad():
        model(**hf_zoo.inputs(name, 0), **kw)
        jitted = thunder.jit(model)
        for seed in (1, 2):
            inputs = hf_zoo.inputs(name, seed)
            expected, actual = model(**inputs, **kw), jitted(**inputs, **kw)
            keys = [k for k in expected.keys() if k.endswith(("hidden_states", "attentions"))]
            assert keys
            for k in keys:
                _assert_same_value(actual[k], expected[k], k)
        plain = jitted(**hf_zoo.inputs(name, 3))
        torch.testing.assert_close(
            hf_zoo.logits(plain), hf_zoo.logits(model(**hf_zoo.inputs(name, 3)))
        )
        assert plain.get("hidden_states") is None
    assert thunder.compile_stats(jitted).compilations == 2
