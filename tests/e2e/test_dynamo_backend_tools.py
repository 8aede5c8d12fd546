"""Thunder as a torch.compile backend in the tools that choose compilers that way: the Hugging
Face zoo through ``torch.compile(model, backend="thunder")`` (eval forward and a training step
equal eager), Hugging Face ``Trainer(torch_compile_backend="thunder")`` and Lightning's
``Trainer.fit`` of a ``torch.compile``d module."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
import torch._dynamo
from torch import nn

import thunder
from thunder.dynamo import ThunderCompiler, subgraphs

hf_zoo = pytest.importorskip("hf_zoo")
transformers = pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compiled(model: nn.Module) -> tuple[Any, ThunderCompiler]:
    compiler = ThunderCompiler()
    return torch.compile(model, backend=compiler), compiler


@pytest.mark.parametrize("name", hf_zoo.ARCHITECTURES)
def test_zoo_through_the_backend_equals_eager(name: str) -> None:
    model = hf_zoo.build(name)
    compiled, compiler = _compiled(model)
    for seed in (1, 2):
        inputs = hf_zoo.inputs(name, seed)
        with torch.no_grad():
            expected, actual = model(**inputs), compiled(**inputs)
        torch.testing.assert_close(hf_zoo.logits(actual), hf_zoo.logits(expected))

    eager = hf_zoo.build(name, seed=3).train()
    trained = hf_zoo.build(name, seed=3).train()
    run_trained, train_compiler = _compiled(trained)
    inputs = hf_zoo.inputs(name, seed=4)
    for m, run in ((eager, eager), (trained, run_trained)):
        torch.manual_seed(6)
        loss = hf_zoo.logits(run(**inputs)).float().square().mean()
        loss.backward()
        m.loss = loss.detach()
    torch.testing.assert_close(trained.loss, eager.loss)
    named = dict(trained.named_parameters())
    for pname, p in eager.named_parameters():
        q = named[pname]
        assert (p.grad is None) == (q.grad is None), pname
        if p.grad is not None:
            torch.testing.assert_close(q.grad, p.grad, msg=lambda m, n=pname: f"{n}: {m}")
    graphs = subgraphs(compiler) + subgraphs(train_compiler)
    assert graphs and all(g.runs == "thunder" for g in graphs), [g.runs for g in graphs]
    assert any(thunder.last_backward_traces(g.function) for g in subgraphs(train_compiler))


class _Rows(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, n: int = 12, length: int = 8) -> None:
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, 99, (n, length), generator=g)  # the zoo's vocabulary

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _hf_train(model: nn.Module, out: Path, **options: Any) -> list[float]:
    pytest.importorskip("accelerate")
    trainer = hf_zoo.train_with_trainer(model, _Rows(), out, **options)
    return hf_zoo.trainer_losses(trainer)  # type: ignore[no-any-return]


def test_hf_trainer_trains_a_model_compiled_with_the_thunder_backend_like_eager(
    tmp_path: Path,
) -> None:
    # Trainer(torch_compile_backend="thunder") is refused by accelerate, which accepts only the
    # names of its DynamoBackend enum; a model compiled before is taken as it is (its forward's
    # signature is torch.compile's (*args, **kwargs): the columns are kept as they are).
    model = hf_zoo.build("llama").train()  # the zoo's tiny Llama (vocabulary 99)
    eager = _hf_train(copy.deepcopy(model), tmp_path / "eager")
    compiler = ThunderCompiler()
    compiled = _hf_train(
        torch.compile(model, backend=compiler), tmp_path / "thunder", remove_unused_columns=False
    )
    assert len(compiled) == len(eager) == 3
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)
    graphs = subgraphs(compiler)
    assert graphs and all(g.runs == "thunder" for g in graphs)


try:
    import lightning as L
except ImportError:  # the dev environment has it (constraints.txt)
    L = None


class _Lit(L.LightningModule if L is not None else nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        self.losses: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        self.losses.append(loss.detach().clone())
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.skipif(L is None, reason="lightning is not installed")
def test_lightning_fits_a_module_compiled_with_the_thunder_backend(tmp_path: Path) -> None:
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g))

    def fit(module: Any, root: Path) -> None:
        trainer = L.Trainer(
            max_steps=4,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=root,
        )
        trainer.fit(module, DataLoader(data, batch_size=4))

    torch.manual_seed(0)
    eager = _Lit()
    torch.manual_seed(0)
    lit = _Lit()
    compiler = ThunderCompiler()
    fit(eager, tmp_path / "eager")
    fit(torch.compile(lit, backend=compiler), tmp_path / "thunder")
    assert len(lit.losses) == 4
    torch.testing.assert_close(torch.stack(lit.losses), torch.stack(eager.losses))
    graphs = subgraphs(compiler)
    assert graphs and all(g.runs == "thunder" for g in graphs)
