"""``thunder.write_report`` opened in a real headless browser (Debian's Chromium): the page loads
without console errors (its own script also records any error into the page), runs its script to
the end and shows every section, for a small GPT, a Hugging Face Llama, and a program with fusion
regions split apart.

Chromium is found at ``/usr/bin/chromium`` (or ``THUNDER_CHROMIUM``); without it these tests are
skipped, unless ``THUNDER_REQUIRE_CHROMIUM=1`` (``.ci/run`` installs it and sets that)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import thunder
from thunder.models.gpt import GPT, GPTConfig
from thunder.report import SECTIONS

CHROMIUM = os.environ.get("THUNDER_CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).exists():
    if os.environ.get("THUNDER_REQUIRE_CHROMIUM") == "1":
        raise RuntimeError(f"THUNDER_REQUIRE_CHROMIUM=1 but there is no browser at {CHROMIUM}")
    pytest.skip(f"no Chromium at {CHROMIUM}", allow_module_level=True)

# Without the background-networking switches Chromium waits for the network, which a closed
# machine never answers.
_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


def _open(page: Path, tmp_path: Path) -> str:
    """The DOM after the page loaded and its scripts ran; fails on any console message."""
    profile = tmp_path / f"chromium-{page.stem}"
    done = subprocess.run(
        [CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], "\n".join(console)  # the page logs nothing; an error would be here
    return done.stdout


def _check_page(dom: str) -> dict[str, str]:
    """Every section is there with content, the script ran to its end without an error; the
    sections' HTML by id."""
    assert 'data-ready="1"' in dom
    assert re.search(r'id="report-status" data-errors="0"[^>]*>ready<', dom)
    found = dict(re.findall(r'<section id="(\w+)">(.*?)</section>', dom, flags=re.S))
    assert list(found) == list(SECTIONS)
    for name, html in found.items():
        assert "<h2>" in html and len(re.sub(r"<[^>]+>", "", html)) > 40, name
    nav = re.search(r'<nav id="nav">(.*?)</nav>', dom, flags=re.S)
    assert nav is not None and nav[1].count("<a ") == len(SECTIONS)  # built by the script
    return found


def test_report_of_a_small_gpt(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32))
    jm = thunder.jit(model)
    idx = torch.randint(0, 64, (2, 8))
    jm(idx).sum().backward()
    jm(torch.randint(0, 64, (2, 6))).sum().backward()  # a recompile, with its reason
    page = thunder.write_report(jm, tmp_path / "gpt.html", args=(idx[:, :6],), profile=True)
    sections = _check_page(_open(page, tmp_path))
    assert "idx.shape: (2, 8) -&gt; (2, 6)" in sections["history"]
    assert "torch_ops.sdpa_flash" in sections["profile"]  # measured per op and region
    assert "sdpa_flash_backward" in sections["profile"]
    assert sections["graph"].count("<rect") > 40  # forward and backward statements
    assert "peak" in sections["memory"] and "saved for backward" in sections["memory"]
    assert "autodiff forward" in sections["passes"] and "what changed" in sections["passes"]
    assert "check_tensors" in sections["guards"]


def test_report_of_a_hugging_face_llama(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=99,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    jm = thunder.jit(transformers.LlamaForCausalLM(config))
    ids = torch.randint(0, 99, (2, 8))
    jm(input_ids=ids, labels=ids).loss.backward()
    page = thunder.write_report(jm, tmp_path / "llama.html")
    sections = _check_page(_open(page, tmp_path))
    assert "LlamaForCausalLM" in sections["summary"]
    assert "Not measured" in sections["profile"]
    # The same program, reproduced in a fresh process, agrees with eager.
    folder = thunder.write_reproducer(
        jm, tmp_path / "llama-repro", kwargs={"input_ids": ids, "labels": ids}
    )
    done = subprocess.run(
        [sys.executable, "run.py", "--runs", "1"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "OK: thunder's results agree with eager's" in done.stdout


def _split(x: torch.Tensor) -> torch.Tensor:
    a = torch.sin(x) * 2
    i = torch.multinomial(a.abs() + 0.1, 1)  # not fusible: the regions around it split
    return torch.cos(a) + i


def test_report_of_fusion_regions(tmp_path: Path) -> None:
    jf = thunder.jit(_split, executors=("torchcompile", "torch_ops", "torch"))
    x = torch.randn(4, 4)
    jf(x)
    page = thunder.write_report(jf, tmp_path / "fusion.html", args=(x,), profile=True)
    dom = _open(page, tmp_path)
    sections = _check_page(dom)
    fusion = sections["fusion"]
    assert 'id="region-forward-fusion0"' in fusion and 'id="region-forward-fusion1"' in fusion
    assert "split from the torchcompile region" in fusion and "torch.multinomial" in fusion
    assert "source of fusion1" in fusion
    assert 'href="#region-forward-fusion1"' in sections["graph"]  # a box links to its region
    assert "torchcompile.fusion0" in sections["profile"]
