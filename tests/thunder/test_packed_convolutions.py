"""CPU inference programs run dense 2-D convolutions of the model's weights on weights laid out
for oneDNN once (thunder_executors/packed_convolutions.py), in channels-last layout: the same
values as eager, and never a stale weight when the model's weights change between calls."""

from __future__ import annotations

import gc
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder
from thunder_executors import packed_convolutions
from thunder_executors.packed_convolutions import packed_conv2d

pytestmark = pytest.mark.skipif(
    not packed_convolutions.available(), reason="this torch has no oneDNN packed convolution"
)


class _Block(torch.nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c)
        self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class _Net(torch.nn.Module):
    """A ResNet-like stack: a stem, residual blocks of dense 3x3 convolutions over 96 channels
    (weights large enough to be packed), a strided one, a pooled head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 96, 3, stride=2, padding=1)
        self.blocks = torch.nn.Sequential(_Block(96), _Block(96))
        self.down = torch.nn.Conv2d(96, 128, 3, stride=2, padding=1, dilation=1)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.down(self.blocks(torch.relu(self.stem(x))))
        return features, self.head(features.mean((2, 3)))


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    model = _Net().eval()
    with torch.no_grad():  # batch norm statistics other than the identity
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    return model


def _packed_calls(jm: torch.nn.Module) -> int:
    return str(thunder.last_traces(jm)[-1]).count("packed_conv2d(")


def _check(jm: torch.nn.Module, model: torch.nn.Module, x: torch.Tensor) -> None:
    got, want = jm(x), model(x)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert got[0].stride() == want[0].stride()  # eager's layout for what the program returns


def test_inference_runs_dense_convolutions_packed_like_eager() -> None:
    model = _net()
    jm = thunder.jit(model)
    with torch.no_grad():
        for batch in (2, 2, 3):
            _check(jm, model, torch.randn(batch, 3, 20, 20))
    # the blocks' four and the strided one; the stem's weight is too small to gain from it
    assert _packed_calls(jm) == 5


@pytest.mark.parametrize(
    "change",
    ["in-place update", "load_state_dict", "data swap", "new parameter", "optimizer step"],
)
def test_a_changed_weight_is_never_read_stale(change: str) -> None:
    model = _net()
    jm = thunder.jit(model)
    x = torch.randn(2, 3, 20, 20)
    with torch.no_grad():
        _check(jm, model, x)
    conv = model.blocks[0].conv1
    if change == "in-place update":
        with torch.no_grad():
            conv.weight.mul_(-2.0)
    elif change == "load_state_dict":
        state = {
            k: v * 0.5 if k.endswith("conv2.weight") else v for k, v in model.state_dict().items()
        }
        model.load_state_dict(state)
    elif change == "data swap":
        conv.weight.data = torch.randn_like(conv.weight)
    elif change == "new parameter":
        conv.weight = torch.nn.Parameter(torch.randn_like(conv.weight))
    else:
        model.train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        model(torch.randn(2, 3, 20, 20))[1].sum().backward()
        optimizer.step()
        model.eval()
    with torch.no_grad():
        for _ in range(2):
            _check(jm, model, torch.randn(2, 3, 20, 20))
    with torch.no_grad():
        _check(jm, model, x)


def test_training_and_grad_mode_programs_are_left_as_they_were() -> None:
    """Programs autograd records keep ``F.conv2d`` (the packed op has no derivative)."""
    model = _net()
    jm = thunder.jit(model)
    x = torch.randn(2, 3, 20, 20, requires_grad=True)
    out = jm(x)
    (out[0].sum() + out[1].sum()).backward()
    assert _packed_calls(jm) == 0
    grads = [p.grad.clone() for p in model.parameters()]
    x_grad = x.grad.clone()
    model.zero_grad()
    x.grad = None
    want = model(x)
    (want[0].sum() + want[1].sum()).backward()
    torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(x_grad, x.grad, atol=1e-4, rtol=1e-4)
    for g, p in zip(grads, model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, atol=1e-4, rtol=1e-4)


def test_onednn_turned_off_runs_eager_convolutions() -> None:
    model = _net()
    jm = thunder.jit(model)
    with torch.no_grad():
        _check(jm, model, torch.randn(2, 3, 20, 20))
        with torch.backends.mkldnn.flags(enabled=False):
            x = torch.randn(2, 3, 20, 20)
            _check(jm, model, x)


def _cl(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous(memory_format=torch.channels_last)


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 3),
    channels=st.sampled_from([2, 4, 6]),
    out_channels=st.sampled_from([2, 4, 8]),
    size=st.integers(3, 9),
    kernel=st.sampled_from([1, 2, 3]),
    stride=st.sampled_from([1, 2, (1, 2)]),
    padding=st.sampled_from([0, 1, (0, 1)]),
    dilation=st.sampled_from([1, 2]),
    groups=st.sampled_from([1, 2]),
    bias=st.booleans(),
)
def test_packed_conv2d_equals_conv2d(
    batch: int,
    channels: int,
    out_channels: int,
    size: int,
    kernel: int,
    stride: object,
    padding: object,
    dilation: int,
    groups: int,
    bias: bool,
) -> None:
    if (size + 2 * 1 - dilation * (kernel - 1) - 1) < 0 or size < dilation * (kernel - 1) + 1:
        return  # no output
    x = _cl(torch.randn(batch, channels, size, size))
    w = torch.randn(out_channels, channels // groups, kernel, kernel)
    b = torch.randn(out_channels) if bias else None
    with torch.no_grad():
        for _ in range(2):  # laid out, then the kept layout
            want = F.conv2d(x, w, b, stride, padding, dilation, groups)
            got = packed_conv2d(x, w, b, stride, padding, dilation, groups)
            assert got.stride() == want.stride()
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_packed_conv2d_falls_back_where_it_cannot_pack() -> None:
    w = torch.randn(4, 4, 3, 3, requires_grad=True)
    x = _cl(torch.randn(2, 4, 6, 6))
    # Grad needed: F.conv2d, with its derivative.
    out = packed_conv2d(x, w, None, 1, 1)
    assert out.grad_fn is not None
    out.sum().backward()
    assert w.grad is not None
    with torch.no_grad():
        # A contiguous input; string padding; an inference tensor's weight.
        for args in [
            (x.contiguous(), w, None, 1, 1),
            (x, w, None, 1, "same"),
        ]:
            torch.testing.assert_close(packed_conv2d(*args), F.conv2d(*args))
    with torch.inference_mode():
        wi = torch.randn(4, 4, 3, 3)
        torch.testing.assert_close(packed_conv2d(x, wi, None, 1, 1), F.conv2d(x, wi, None, 1, 1))
        wi.mul_(2.0)  # not versioned: never kept
        torch.testing.assert_close(packed_conv2d(x, wi, None, 1, 1), F.conv2d(x, wi, None, 1, 1))


def test_a_kept_layout_goes_with_its_weight() -> None:
    cache = packed_convolutions._packed
    with torch.no_grad():
        w = torch.randn(8, 8, 3, 3)
        x = _cl(torch.randn(1, 8, 5, 5))
        packed_conv2d(x, w, None, 1, 1)
        [kept] = [entry for (ident, _), entry in cache._entries.items() if ident == id(w)]
        assert kept[3].is_mkldnn  # the layout kept for it
        del w
        gc.collect()
        assert kept[0]() is None
        assert all(entry[0] is not kept[0] for entry in cache._entries.values())


def test_bfloat16_and_other_dtypes_keep_conv2d() -> None:
    model = _net().to(torch.float64)
    jm = thunder.jit(model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.randn(2, 3, 20, 20, dtype=torch.float64)
        _check(jm, model, x)
    assert _packed_calls(jm) == 0


def test_images_of_varying_sizes_keep_one_layout_per_weight() -> None:
    model = _net()
    jm = thunder.jit(model)
    weight = model.blocks[0].conv1.weight
    with torch.no_grad():
        for size in (20, 24, 17, 31):
            _check(jm, model, torch.randn(2, 3, size, size + 3))
    entries = [k for k in packed_convolutions._packed._entries if k[0] == id(weight)]
    assert len(entries) == 1


class _PermutedNorms(torch.nn.Module):
    """ConvNeXt's pattern: layer norms over channels between ``permute``s, so every convolution
    after the stem takes a channels-last input without any conversion."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(8, 96, 4, stride=4)  # (not an image's 3: those convert)
        self.norm1 = torch.nn.LayerNorm(96)
        self.depthwise = torch.nn.Conv2d(96, 96, 7, padding=3, groups=96)
        self.norm2 = torch.nn.LayerNorm(96)
        self.down = torch.nn.Conv2d(96, 192, 2, stride=2)

    def _norm(self, norm: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._norm(self.norm1, self.stem(x))
        x = x + self._norm(self.norm2, self.depthwise(x))
        return self.down(x)


def test_channels_last_inputs_run_packed_without_a_conversion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pass packs a convolution whose input is channels-last already, and its first check
    of oneDNN (run while the pass computes on fake tensors) tests real ones."""
    monkeypatch.setattr(packed_convolutions, "_available", None)
    torch.manual_seed(0)
    model = _PermutedNorms().eval()
    jm = thunder.jit(model)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 8, 32, 32)
            got, want = jm(x), model(x)
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
            assert got.stride() == want.stride()
    assert packed_convolutions._available is True
    assert _packed_calls(jm) == 1  # the strided one (the others' weights are small)
    assert "to_channels_last" not in str(thunder.last_traces(jm)[-1])


def test_the_check_of_onednn_runs_on_real_tensors_under_a_fake_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setattr(packed_convolutions, "_available", None)
    with FakeTensorMode():
        assert packed_convolutions.available()
    assert packed_convolutions._available is True
