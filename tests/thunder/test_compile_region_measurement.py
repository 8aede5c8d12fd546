"""thunder.compile's fusion regions, once compiled in the background, time their compiled program
against their torch calls and keep the faster (``CompiledRegion``): the choice compares the two
calls of each pair (the machine's load changes during the measurement), every step through the
measurement and after it matches eager, and ``settled`` says when a region has chosen."""

from __future__ import annotations

import copy
import threading
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder.models import GPT, GPTConfig
from thunder.recipes import default_executors
from thunder_executors import background_compile
from thunder_executors import torchcompile as tc_module


class _FakeClock:
    """``time.perf_counter`` for the region's timings: each call of a timed function advances
    it by that function's cost times the machine's load when it ran."""

    def __init__(self, load: Callable[[int], float]) -> None:
        self.now = 0.0
        self.calls = 0
        self.load = load

    def perf_counter(self) -> float:
        return self.now

    def timed(self, fn: Callable[..., Any], cost: float) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            self.now += cost * self.load(self.calls)
            self.calls += 1
            return fn(*args)

        return run


def _program(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.tanh(torch.exp(a + b) * 0.5) - a


@pytest.mark.parametrize(
    ("compiled_cost", "high_load_first", "runs_compiled"),
    [(0.8, True, True), (1.25, False, False)],
    ids=["compiled-faster-load-falls", "compiled-slower-load-rises"],
)
def test_the_choice_compares_the_calls_of_each_pair(
    monkeypatch: Any, compiled_cost: float, high_load_first: bool, runs_compiled: bool
) -> None:
    # The calls alternate compiled, torch calls, ...; the load changes between the compiled and
    # the torch call of the 9th pair, so one side has one more call at the high load: its
    # median alone is 3x the other's, and the pairs still say which is faster.
    measured = tc_module.CompiledRegion.MEASURED_CALLS
    change = 2 * (measured // 2 + 1)  # the 9th pair's compiled call is the last before it

    def load(call: int) -> float:
        before = call <= change
        return 3.0 if before == high_load_first else 1.0

    clock = _FakeClock(load)
    monkeypatch.setattr(tc_module, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    monkeypatch.setattr(
        tc_module, "compile_direct", lambda fn, *args: clock.timed(fn, compiled_cost)
    )
    # An executor of its own: regions are cached per executor by their source.
    executor = tc_module.TorchCompileExecutor(
        f"torchcompile_bg_pairs_{int(compiled_cost * 100)}", background=True
    )
    fn = thunder.jit(_program, executors=(executor, "torch"))
    a, b = torch.randn(8, 16), torch.randn(16)
    torch.testing.assert_close(fn(a, b), _program(a, b))
    (region_bsym,) = thunder.last_traces(fn)[-1].fusion_regions
    region = region_bsym.sym.impl
    assert background_compile.wait_for_background_compiles(timeout=60)
    assert region.runs_compiled is None and region.status == "compiled"
    region.torch_calls = clock.timed(region.torch_calls, 1.0)
    for _ in range(2 * (measured + 1)):
        a, b = torch.randn(8, 16), torch.randn(16)
        torch.testing.assert_close(fn(a, b), _program(a, b))
    assert region.runs_compiled is runs_compiled
    assert region.settled


SMALL_GPT = GPTConfig(n_layer=1, n_head=2, n_embd=32, vocab_size=64, block_size=16)


def _gpt_step(model: torch.nn.Module, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    logits = model(idx)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    loss.backward()
    return loss


@pytest.mark.slow
@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_training_matches_eager_through_the_measurement_and_after(cache: str) -> None:
    # While measuring, the regions alternate between the compiled program and the torch calls
    # (forward and backward apart): every step equals eager's, and each region has chosen
    # after its measured calls.
    torch.manual_seed(0)
    model = GPT(SMALL_GPT)
    reference = copy.deepcopy(model)
    compiled = thunder.jit(model, executors=default_executors(), cache=cache)
    if "torchcompile_background" not in default_executors():
        pytest.skip("thunder.compile fuses with nvFuser here")

    def step(batch: int) -> None:
        shape = (batch, SMALL_GPT.block_size)
        idx = torch.randint(0, SMALL_GPT.vocab_size, shape)
        targets = torch.randint(0, SMALL_GPT.vocab_size, shape)
        loss = _gpt_step(compiled, idx, targets)
        expected = _gpt_step(reference, idx, targets)
        torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-4)
        for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=name)

    sizes = [2, 3] if cache == "symbolic values" else [2]
    step(sizes[0])
    regions = [
        r.sym.impl
        for t in (thunder.last_traces(compiled)[-1], thunder.last_backward_traces(compiled)[-1])
        for r in t.fusion_regions
    ]
    assert len(regions) >= 2  # forward and backward
    assert background_compile.wait_for_background_compiles(timeout=900)
    measured = 2 * (tc_module.CompiledRegion.MEASURED_CALLS + 1)
    for k in range(measured):
        step(sizes[k % len(sizes)])
    assert background_compile.wait_for_background_compiles(timeout=900)  # any other size's
    for k in range(measured):
        step(sizes[k % len(sizes)])
    assert all(r.runs_compiled is not None for r in regions), [r.status for r in regions]
    assert all(r.settled for r in regions)


def _embed(idx: torch.Tensor, table: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return torch.tanh(F.embedding(idx, table) * scale) + 1.0


def _measured_embedding(
    executor_name: str, clock: _FakeClock
) -> tuple[Callable[..., Any], Any, Callable[[], None]]:
    """``_embed`` jitted with a background region of its own, called until the region has
    measured its compiled program against its torch calls (1.0 each on ``clock``): the jitted
    function, its region (which checks its indices) and a call checked against eager."""
    executor = tc_module.TorchCompileExecutor(executor_name, background=True)
    fn = thunder.jit(_embed, executors=(executor, "torch"))
    table, scale = torch.randn(10, 4), torch.randn(4)

    def call() -> None:
        idx = torch.randint(0, 10, (3, 5))
        torch.testing.assert_close(fn(idx, table, scale), _embed(idx, table, scale))

    call()
    (region_bsym,) = thunder.last_traces(fn)[-1].fusion_regions
    region = region_bsym.sym.impl
    assert region.index_check is not None
    assert background_compile.wait_for_background_compiles(timeout=60)
    region.torch_calls = clock.timed(region.torch_calls, 1.0)
    for _ in range(2 * (tc_module.CompiledRegion.MEASURED_CALLS + 1)):
        call()
    return fn, region, call


def test_a_region_that_keeps_its_torch_calls_stops_checking_indices(monkeypatch: Any) -> None:
    """A region reading indices checks them before each call while its compiled program may run
    (inductor does not raise eager's error); once its torch calls are chosen they raise eager's
    error themselves, and the check (a read of the indices per call) is not paid again."""
    clock = _FakeClock(lambda call: 1.0)
    monkeypatch.setattr(tc_module, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    monkeypatch.setattr(tc_module, "compile_direct", lambda fn, *args: clock.timed(fn, 2.0))
    checks = []
    in_range = tc_module._indices_in_range
    monkeypatch.setattr(tc_module, "_indices_in_range", lambda *a: checks.append(1) or in_range(*a))
    fn, region, call = _measured_embedding("torchcompile_bg_index_check", clock)
    assert region.runs_compiled is False
    checked = len(checks)
    assert checked > 0
    for _ in range(5):
        call()
    assert len(checks) == checked
    bad, table, scale = torch.tensor([[1, 10]]), torch.randn(10, 4), torch.randn(4)
    with pytest.raises(IndexError) as want:
        _embed(bad, table, scale)
    with pytest.raises(IndexError) as got:
        fn(bad, table, scale)
    assert str(got.value) == str(want.value)


def test_the_measurement_counts_the_index_check_as_the_compiled_programs_time(
    monkeypatch: Any,
) -> None:
    """The compiled program is 10% faster than the torch calls but needs its indices checked
    first, which costs another 20%: the torch calls, which need no check, are kept."""
    clock = _FakeClock(lambda call: 1.0)
    monkeypatch.setattr(tc_module, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    monkeypatch.setattr(tc_module, "compile_direct", lambda fn, *args: clock.timed(fn, 0.9))
    in_range = tc_module._indices_in_range

    def timed_check(*args: Any) -> bool:
        clock.now += 0.2
        return in_range(*args)

    monkeypatch.setattr(tc_module, "_indices_in_range", timed_check)
    _, region, _ = _measured_embedding("torchcompile_bg_timed_check", clock)
    assert region.runs_compiled is False
    assert region._paired_ratio() == pytest.approx(1.1)


def _split_gate(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    a, b = (x @ w).chunk(2, -1)
    return (torch.tanh(a) * b).view(2, 2, 3) + 1.0


def _aten_calls(fn: Callable[..., Any], *args: Any) -> list[str]:
    with torch.profiler.profile() as prof:
        fn(*args)
    return sorted(e.name for e in prof.events() if e.name.startswith("aten::"))


def test_a_region_runs_its_ops_as_thunder_jit_runs_them_until_and_unless_compiled(
    monkeypatch: Any,
) -> None:
    """While its program compiles, and for good once its torch calls measure faster, a region
    runs its ops as thunder.jit runs them (``view`` as torch calls it, not its decomposition's
    ``reshape``): thunder.compile then costs what thunder.jit costs."""
    clock = _FakeClock(lambda call: 1.0)
    monkeypatch.setattr(tc_module, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    held = threading.Event()  # the compile waits until the calls made meanwhile are seen

    def compile_when_let(fn: Callable[..., Any], *args: Any) -> Callable[..., Any]:
        held.wait(timeout=60)
        return clock.timed(fn, 2.0)

    monkeypatch.setattr(tc_module, "compile_direct", compile_when_let)
    executor = tc_module.TorchCompileExecutor("torchcompile_bg_as_jit", background=True)
    fn = thunder.jit(_split_gate, executors=(executor, "torch"))

    def call() -> None:
        x, w = torch.randn(4, 8), torch.randn(8, 6)
        torch.testing.assert_close(fn(x, w), _split_gate(x, w))

    call()
    (region_bsym,) = thunder.last_traces(fn)[-1].fusion_regions  # the whole program
    region = region_bsym.sym.impl
    x, w = torch.randn(4, 8), torch.randn(8, 6)
    jitted = thunder.jit(_split_gate)
    jitted(x, w)
    as_jit = _aten_calls(jitted, x, w)
    assert "aten::view" in as_jit and "aten::reshape" not in as_jit  # (not a decomposition's)
    assert _aten_calls(fn, x, w) == as_jit  # its program compiles meanwhile
    held.set()
    assert background_compile.wait_for_background_compiles(timeout=60)
    region.torch_calls = clock.timed(region.torch_calls, 1.0)
    for _ in range(2 * (tc_module.CompiledRegion.MEASURED_CALLS + 1)):
        call()
    assert region.runs_compiled is False
    assert _aten_calls(fn, x, w) == as_jit
