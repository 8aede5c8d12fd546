"""``thunder.write_report``'s pieces, without a browser (tests/e2e/test_report_in_browser.py opens
the page): the compile history, the memory timeline, the graph, the per-region profile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import thunder
from thunder.report import SECTIONS
from thunder.report.graph import trace_graph_svg
from thunder.report.memory import live_memory
from thunder.report.profiling import profile_program


def _mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    h = torch.nn.functional.gelu(x @ w1)
    return (h @ w2).softmax(-1)


def test_compile_stats_keep_every_compilation_and_why() -> None:
    jf = thunder.jit(_mlp)
    w1, w2 = torch.randn(4, 8), torch.randn(8, 3)
    jf(torch.randn(2, 4), w1, w2)
    jf(torch.randn(5, 4), w1, w2)  # CALL-2
    jf(torch.randn(5, 4), w1, w2)
    first, second = thunder.compile_stats(jf).history
    assert (first.number, first.reason) == (1, None) and second.number == 2
    assert "x.shape: (2, 4) -> (5, 4)" in (second.reason or "")
    assert second.call_site is not None and second.call_site.endswith(
        f"{Path(__file__).name}:{_line_of('# CALL-2')}"
    )
    assert second.seconds > 0 and {"interpretation", "transforms", "codegen"} <= set(second.timings)


def _line_of(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line and "_line_of" not in line)


def test_memory_of_forward_and_backward() -> None:
    jf = thunder.jit(_mlp)
    x, w1, w2 = torch.randn(64, 32), torch.randn(32, 128, requires_grad=True), torch.randn(128, 8)
    jf(x, w1, w2).sum().backward()
    forward, backward = thunder.last_traces(jf)[-1], thunder.last_backward_traces(jf)[-1]
    timeline = live_memory(forward, backward)
    steps = timeline.steps
    assert timeline.backward_start is not None and 0 < timeline.backward_start < len(steps)
    inputs = (64 * 32 + 32 * 128 + 128 * 8) * 4
    assert all(s.inputs == inputs for s in steps)  # the inputs are live throughout
    # The forward saves the (64, 128) activations for the backward; they stay until its end.
    assert steps[timeline.backward_start - 1].saved >= 64 * 128 * 4
    assert all(s.phase == "forward" for s in steps[: timeline.backward_start])
    peak = timeline.peak
    assert peak is not None and peak.total == max(s.total for s in steps)
    assert live_memory(forward).backward_start is None


def test_the_graph_draws_every_statement_and_links_regions() -> None:
    jf = thunder.jit(_mlp)
    with torch.no_grad():
        jf(torch.randn(2, 4), torch.randn(4, 8), torch.randn(8, 3))
    trace = thunder.last_traces(jf)[-1]
    svg = trace_graph_svg(trace)
    statements = [b for b in trace.bound_symbols if b.sym.module != "python"]
    statements = [b for b in statements if "return" not in b.sym.name]
    assert svg.startswith("<svg") and svg.count("<rect") == len(statements)
    assert svg.count('class="edge"') >= len(statements) - 2  # a chain: each reads the one before
    assert "too many" in trace_graph_svg(trace, max_nodes=1)


def test_profile_times_each_region_and_op() -> None:
    jf = thunder.jit(_mlp)
    args = (torch.randn(2, 4), torch.randn(4, 8, requires_grad=True), torch.randn(8, 3))
    jf(*args).sum().backward()
    rows = profile_program(thunder.compile_stats(jf), args, {}, runs=2)
    labels = {(r.phase, r.label) for r in rows}
    assert {("forward", "total"), ("backward", "total")} <= labels
    assert any(p == "forward" and "gelu" in label for p, label in labels)
    assert all(r.cpu_ms >= 0 and r.calls > 0 for r in rows)


def test_the_page_has_every_section_and_no_network(tmp_path: Path) -> None:
    jf = thunder.jit(_mlp)
    w1, w2 = torch.randn(4, 8), torch.randn(8, 3)
    jf(torch.randn(2, 4), w1, w2)
    jf(torch.randn(3, 4), w1, w2)
    page = thunder.write_report(jf, tmp_path / "r.html").read_text()
    assert [m for m in re.findall(r"<section id='(\w+)'>", page)] == list(SECTIONS)
    assert "x.shape: (2, 4) -&gt; (3, 4)" in page  # why it recompiled
    assert "default-src 'none'" in page  # the page may load nothing
    assert not re.search(r"(src|href)=['\"]?https?:", page)


def test_profile_needs_a_call() -> None:
    jf = thunder.jit(_mlp)
    jf(torch.randn(2, 4), torch.randn(4, 8), torch.randn(8, 3))
    with pytest.raises(ValueError, match="needs args"):
        thunder.write_report(jf, "unused.html", profile=True)
    with pytest.raises(ValueError, match="nothing ran yet"):
        thunder.write_report(thunder.jit(_mlp), "unused.html")


def _trains_inside(w: torch.Tensor) -> torch.Tensor:
    loss = (w * 2).sum()
    loss.backward()  # thunder differentiates a program as a whole: this call runs eagerly
    return loss


def test_a_program_that_only_ran_eagerly_says_why(tmp_path: Path) -> None:
    jf = thunder.jit(_trains_inside)
    with pytest.warns(UserWarning, match="ran eagerly"):
        jf(torch.randn(3, requires_grad=True))
    page = thunder.write_report(jf, tmp_path / "r.html").read_text()
    assert [m for m in re.findall(r"<section id='(\w+)'>", page)] == list(SECTIONS)
    eager = re.search(r"<section id='eager'>(.*?)</section>", page, flags=re.S)
    assert eager is not None and "1 call(s) ran eagerly" in eager[1]
    assert "backward" in eager[1] and f"{Path(__file__).name}:" in eager[1]
    assert "No compiled program" in page
