"""Thunder as a torch.compile backend (``thunder.dynamo``): dynamo's graphs compiled by thunder
equal eager, forward and gradients, across graph breaks, symbolic sizes and refusals."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch._dynamo

import thunder
from thunder.dynamo import ThunderCompiler, subgraphs, thunderfx
from thunder.models.gpt import GPT, GPTConfig


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _grads(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}


def test_backend_by_name_in_a_fresh_process_without_importing_thunder():
    script = textwrap.dedent(
        """
        import sys, torch
        f = torch.compile(lambda x: torch.tanh(x) * 2 + x.sin(), backend="thunder")
        x = torch.randn(5)
        torch.testing.assert_close(f(x), torch.tanh(x) * 2 + x.sin())
        assert "thunder.dynamo" in sys.modules  # torch found the backend by its entry point
        g = torch.compile(lambda x: x + 1, backend="thunder", options={"executors": ["torch"]})
        torch.testing.assert_close(g(x), x + 1)
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


def test_a_gpt_trains_through_the_backend_like_eager():
    config = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
    torch.manual_seed(0)
    eager = GPT(config)
    model = GPT(config)
    model.load_state_dict(eager.state_dict())
    compiled = thunderfx(model)
    for seed in (1, 2):
        torch.manual_seed(seed)
        idx = torch.randint(0, 64, (2, 16))
        for m, run in ((eager, eager), (model, compiled)):
            m.zero_grad()
            logits = run(idx)
            logits.float().square().mean().backward()
            m.out = logits.detach()
        torch.testing.assert_close(model.out, eager.out)
        want = _grads(eager)
        got = _grads(model)
        assert got.keys() == want.keys()
        for name in want:
            torch.testing.assert_close(got[name], want[name], msg=lambda m, n=name: f"{n}: {m}")
    graphs = subgraphs(compiled)
    assert graphs and all(g.runs == "thunder" for g in graphs)
    assert all(thunder.compile_stats(g.function).compilations == 1 for g in graphs)
    assert thunder.last_backward_traces(graphs[0].function)  # thunder's own backward


def _breaks(x: torch.Tensor) -> torch.Tensor:
    y = torch.relu(x) * 2
    print("a graph break", end="\r")
    if y.sum() > 1:  # a branch on data
        y = y * y.max().item()
    return torch.sigmoid(y) + _native(y)


@torch.compiler.disable
def _native(y: torch.Tensor) -> torch.Tensor:
    return y.nonzero().float().mean() * torch.ones_like(y)


def test_graph_breaks_split_and_each_graph_is_thunders(capsys):
    compiled = thunderfx(_breaks)
    for seed in range(4):
        torch.manual_seed(seed)
        x = (torch.randn(6) * (1 if seed % 2 else 0.01)).requires_grad_()
        got = compiled(x)
        (gx,) = torch.autograd.grad(got.sum(), x)
        want = _breaks(x)
        (wx,) = torch.autograd.grad(want.sum(), x)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(gx, wx)
    graphs = subgraphs(compiled)
    assert len(graphs) >= 3 and all(g.runs == "thunder" for g in graphs)


def test_dynamic_sizes_compile_once():
    compiled = thunderfx(lambda x: torch.softmax(x * x.shape[-1], dim=-1), dynamic=True)
    for n in (3, 5, 8, 13):
        x = torch.randn(2, n)
        torch.testing.assert_close(compiled(x), torch.softmax(x * n, dim=-1))
    (graph,) = subgraphs(compiled)
    assert graph.dynamic
    assert thunder.compile_stats(graph.function).compilations == 1


def _checkpointed(x: torch.Tensor) -> torch.Tensor:
    body = lambda a: torch.sin(a) * torch.cos(a)  # noqa: E731
    return torch.utils.checkpoint.checkpoint(body, x, use_reentrant=False) * 3


def _autocast(x: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x.T
    return y.float() + 1


@pytest.mark.parametrize("fn", [_checkpointed, _autocast])
def test_region_calls_of_fx_graphs_are_thunders(fn):
    compiled = thunderfx(fn)
    x = torch.randn(4, 4, requires_grad=True)
    got = compiled(x)
    (gx,) = torch.autograd.grad(got.sum(), x)
    want = fn(x)
    (wx,) = torch.autograd.grad(want.sum(), x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(gx, wx)
    assert [g.runs for g in subgraphs(compiled)] == ["thunder"]


class _Sin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


def _custom_function_between(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(_Sin.apply(torch.cos(x) * 3) * 2) + x


@pytest.mark.parametrize("fallback", ["eager", "inductor"])
def test_a_graph_thunder_refuses_runs_by_the_fallback_and_says_why(fallback):
    # "eager": the graph is split around the nodes thunder refuses (a torch.autograd.Function
    # in an FX graph), thunder runs the rest; "inductor": inductor runs the whole graph.
    compiled = thunderfx(_custom_function_between, fallback=fallback)
    for _ in range(2):
        x = torch.randn(5, requires_grad=True)
        got = compiled(x)
        (gx,) = torch.autograd.grad(got.sum(), x)
        xe = x.detach().requires_grad_()
        want = _custom_function_between(xe)
        (wx,) = torch.autograd.grad(want.sum(), xe)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(gx, wx)
    graph, *parts = subgraphs(compiled)
    assert graph.fallback_reason
    if fallback == "eager":
        assert graph.runs.startswith("thunder in 2 part(s), eager: autograd_function_apply")
        assert len(parts) == 2 and all(p.runs == "thunder" for p in parts)
        assert all(thunder.compile_stats(p.function).compilations == 1 for p in parts)
    else:
        assert graph.runs.startswith("inductor: ") and not parts


def _writes_a_pattern_between(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = (x @ w).fill_diagonal_(0.5)  # no functional variant: torch runs it
    return torch.tanh(y * 2) + x.sum()


def test_a_call_torch_must_run_splits_the_graph_around_it():
    # Dynamo keeps fill_diagonal_ in its graph; thunder's trace cannot hold it, so the graph
    # runs in parts: thunder's programs around the call, which FX runs by torch. Never the whole
    # graph eagerly, and never a nested torch.compile.
    compiled = thunderfx(_writes_a_pattern_between)
    for _ in range(2):
        x = torch.randn(4, 4)
        w = torch.randn(4, 4, requires_grad=True)
        got = compiled(x, w)
        (gw,) = torch.autograd.grad(got.sum(), w)
        we = w.detach().requires_grad_()
        want = _writes_a_pattern_between(x, we)
        (ww,) = torch.autograd.grad(want.sum(), we)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(gw, ww)
    graph, *parts = subgraphs(compiled)
    assert graph.runs.startswith("thunder in 2 part(s), eager: torch.Tensor.fill_diagonal_")
    assert "no functional variant" in graph.fallback_reason
    assert len(parts) == 2 and all(p.runs == "thunder" for p in parts)


def test_the_backends_options_are_checked():
    with pytest.raises(TypeError, match="unknown option"):
        ThunderCompiler(executor=["torch"])
    with pytest.raises(ValueError, match="fallback must be one of"):
        ThunderCompiler(fallback="aot")
    f = torch.compile(lambda x: x * 2, backend="thunder", mode="max-autotune")
    with pytest.raises(Exception, match="has no mode 'max-autotune'"):
        f(torch.ones(2))
    with pytest.raises(TypeError, match="thunderfx's result"):
        subgraphs(lambda x: x)


def test_thunderfx_passes_thunders_options():
    compiled = thunderfx(lambda x: x.exp() + 1, executors=["torch"], cache="symbolic values")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), x.exp() + 1)
    (graph,) = subgraphs(compiled)
    assert [e.name for e in graph.function.executors] == ["torch"]


def test_each_graph_has_its_report_and_a_reproducer_that_runs(tmp_path):
    compiled = thunderfx(_breaks)
    x = torch.randn(6, requires_grad=True)
    compiled(x).sum().backward()
    folders = thunder.dynamo.write_reports(compiled, tmp_path)
    assert len(folders) == len(subgraphs(compiled)) >= 2
    for folder in folders:
        assert (folder / "runs.txt").read_text().strip() == "thunder"
        assert "def forward" in (folder / "graph.py").read_text()
        assert "<html" in (folder / "report.html").read_text()
    done = subprocess.run(
        [sys.executable, str(folders[0] / "reproducer" / "run.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "agree" in done.stdout
