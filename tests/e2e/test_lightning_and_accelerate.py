"""A jitted model in Lightning's ``Trainer`` and in accelerate's ``Accelerator``, against the same
runs in eager: losses per step, final weights, and the keys of what the tools save. Tiny models,
a few steps, CPU.

Lightning: the network inside the LightningModule is jitted (``self.model =
thunder.jit(self.model)`` in ``__init__`` or ``configure_model``); the Trainer takes only a
LightningModule (or torch.compile's module), so ``thunder.jit(lit_module)`` itself warns with that
advice. accelerate: ``prepare`` takes the ``ThunderModule`` and ``unwrap_model`` gives it back."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import thunder

STEPS = 4


def _network() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 1))


def _data(n: int = 4 * STEPS) -> DataLoader:  # type: ignore[type-arg]
    g = torch.Generator().manual_seed(1)
    return DataLoader(
        TensorDataset(torch.randn(n, 4, generator=g), torch.randn(n, 1, generator=g)), batch_size=4
    )


# --- Lightning ------------------------------------------------------------------------------

try:
    import lightning as L
except ImportError:  # the dev environment has it (constraints.txt)
    L = None

needs_lightning = pytest.mark.skipif(L is None, reason="lightning is not installed")


class _Lit(L.LightningModule if L is not None else nn.Module):  # type: ignore[misc]
    """The usual shape: the network is an attribute, ``training_step`` calls it and logs."""

    def __init__(self, jit: str = "") -> None:
        super().__init__()
        self.save_hyperparameters()
        self.jit = jit
        self.model = _network()
        if jit == "init":
            self.model = thunder.jit(self.model)
        self.losses: list[torch.Tensor] = []
        self.val_losses: list[torch.Tensor] = []

    def configure_model(self) -> None:
        # called by every fit/validate/test: jit once
        if self.jit == "configure_model" and not isinstance(self.model, thunder.ThunderModule):
            self.model = thunder.jit(self.model)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.model(x), y)
        self.losses.append(loss.detach().clone())
        self.log("loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        loss = nn.functional.mse_loss(self.model(x), y)
        self.val_losses.append(loss.clone())
        self.log("val_loss", loss)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def _trainer(tmp_path: Path, **kwargs: Any) -> Any:
    options: dict[str, Any] = {
        "max_steps": STEPS,
        "accelerator": "cpu",
        "devices": 1,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "default_root_dir": tmp_path,
    }
    return L.Trainer(**(options | kwargs))


def _fit(jit: str, tmp_path: Path, **kwargs: Any) -> tuple[_Lit, Any]:
    torch.manual_seed(0)
    module = _Lit(jit)
    trainer = _trainer(tmp_path / (jit or "eager"), **kwargs)
    trainer.fit(module, _data(), _data(8))
    return module, trainer


def _assert_same_module(a: nn.Module, b: nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for key in sa:
        torch.testing.assert_close(sa[key], sb[key], msg=key)


@needs_lightning
@pytest.mark.parametrize("jit", ["init", "configure_model"])
def test_lightning_trains_a_jitted_network_as_eager(jit: str, tmp_path: Path) -> None:
    eager, _ = _fit("", tmp_path, limit_val_batches=2, val_check_interval=2)
    jitted, _ = _fit(jit, tmp_path, limit_val_batches=2, val_check_interval=2)
    assert isinstance(jitted.model, thunder.ThunderModule)
    assert thunder.cache_hits(jitted.model) > 0  # the steps ran the compiled program
    assert len(jitted.losses) == STEPS
    torch.testing.assert_close(torch.stack(jitted.losses), torch.stack(eager.losses))
    # validation (eval mode, under inference_mode): the sanity check and two validations
    torch.testing.assert_close(torch.stack(jitted.val_losses), torch.stack(eager.val_losses))
    _assert_same_module(jitted, eager)  # the same keys (no ``_model.``), the same weights


@needs_lightning
def test_lightning_checkpoint_keys_are_the_eager_modules(tmp_path: Path) -> None:
    eager, _ = _fit("", tmp_path, enable_checkpointing=True)
    jitted, _ = _fit("init", tmp_path, enable_checkpointing=True)
    [path] = (tmp_path / "init").rglob("*.ckpt")
    checkpoint = torch.load(path, weights_only=False)
    assert list(checkpoint["state_dict"]) == list(eager.state_dict())
    # into the eager LightningModule, and into one whose network is jitted (the load walks
    # through the ThunderModule)
    _assert_same_module(_Lit.load_from_checkpoint(path, jit=""), jitted)
    reloaded = _Lit.load_from_checkpoint(path)  # hparams: jit="init"
    assert isinstance(reloaded.model, thunder.ThunderModule)
    _assert_same_module(reloaded, jitted)

    # resuming from it trains as eager resumed from its own
    [eager_path] = (tmp_path / "eager").rglob("*.ckpt")
    resumed = {}
    for jit, ckpt in (("", eager_path), ("init", path)):
        torch.manual_seed(0)
        module = _Lit(jit)
        _trainer(tmp_path / f"resumed-{jit}", max_steps=2 * STEPS).fit(
            module, _data(), ckpt_path=ckpt
        )
        resumed[jit] = module
    assert len(resumed["init"].losses) == STEPS
    torch.testing.assert_close(torch.stack(resumed["init"].losses), torch.stack(resumed[""].losses))
    _assert_same_module(resumed["init"], resumed[""])


@needs_lightning
def test_trainer_fit_of_a_jitted_lightning_module_says_what_to_do(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match=r"self\.model = thunder\.jit\(self\.model\)"):
        jm = thunder.jit(_Lit())
    with pytest.raises(TypeError, match="LightningModule"):  # Lightning's own check
        _trainer(tmp_path).fit(jm, _data())
    with warnings.catch_warnings():  # a plain module: no advice
        warnings.simplefilter("error")
        thunder.jit(_network())


# --- accelerate -----------------------------------------------------------------------------

try:
    import accelerate
except ImportError:  # the dev environment has it (constraints.txt)
    accelerate = None


@pytest.fixture
def fresh_accelerate_state() -> Any:
    """accelerate keeps its state per process (one mixed precision): each run starts afresh,
    and the next test finds none."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield AcceleratorState
    AcceleratorState._reset_state(reset_partial_state=True)


def _accelerate(jit: bool, mixed_precision: str, tmp_path: Path, state: Any) -> dict[str, Any]:
    from safetensors.torch import load_file

    state._reset_state(reset_partial_state=True)
    accelerator = accelerate.Accelerator(cpu=True, mixed_precision=mixed_precision)
    torch.manual_seed(0)
    network = _network()
    model = thunder.jit(network) if jit else network
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    prepared, optimizer, data = accelerator.prepare(model, optimizer, _data())
    losses = []
    for x, y in data:
        loss = nn.functional.mse_loss(prepared(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.detach())
    saved = tmp_path / ("jit" if jit else "eager")
    accelerator.save_model(prepared, saved)
    return {
        "network": network,
        "model": model,
        "prepared": prepared,
        "unwrapped": accelerator.unwrap_model(prepared),
        "losses": torch.stack(losses),
        "state_dict": accelerator.get_state_dict(prepared),
        "saved": load_file(saved / "model.safetensors"),
        # accelerate's autocast wrapper taken off (mixed precision)
        "without_autocast": accelerator.unwrap_model(prepared, keep_fp32_wrapper=False),
    }


@pytest.mark.skipif(accelerate is None, reason="accelerate is not installed")
@pytest.mark.parametrize("mixed_precision", ["no", "bf16"])
def test_accelerate_trains_a_jitted_model_as_eager(
    mixed_precision: str, tmp_path: Path, fresh_accelerate_state: Any
) -> None:
    eager = _accelerate(False, mixed_precision, tmp_path, fresh_accelerate_state)
    run = _accelerate(True, mixed_precision, tmp_path, fresh_accelerate_state)
    jm = run["model"]
    assert thunder.cache_hits(jm) > 0
    # bf16 autocast: thunder's casts are eager's, its kernels' rounding may differ
    tol = {"atol": 1e-2, "rtol": 1e-2} if mixed_precision == "bf16" else {}
    torch.testing.assert_close(run["losses"], eager["losses"], **tol)
    for a, b in zip(run["network"].state_dict().values(), eager["network"].state_dict().values()):
        torch.testing.assert_close(a, b, **tol)

    # what the user passed comes back: the ThunderModule (torch.compile's module comes back the
    # same way); its get_model() is the original module
    assert run["prepared"] is jm
    assert run["unwrapped"] is jm
    assert jm.get_model() is run["network"]
    # the keys are the original module's
    assert (
        list(run["state_dict"]) == list(eager["state_dict"]) == list(eager["network"].state_dict())
    )
    assert sorted(run["saved"]) == sorted(eager["saved"])

    # without the autocast wrapper the jitted model runs in float32, as eager's does
    assert run["without_autocast"] is jm
    x = torch.randn(3, 4)
    with torch.no_grad():
        out = jm(x)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, eager["without_autocast"](x), **tol)
