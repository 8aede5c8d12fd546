"""Depthwise CPU convolutions run on channels-last tensors (``thunder_executors.channels_last``):
the values are eager's, every tensor the program returns or lays out by strides has eager's
strides, writes stay where eager makes them, and inputs laid out otherwise compile again."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

import thunder


class Depthwise(nn.Module):
    """Two MobileNet blocks: pointwise, depthwise, batch norm, activation, residual."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.Conv2d(c, c, 1),
                nn.BatchNorm2d(c),
                nn.ReLU6(),
                nn.Conv2d(c, c, 3, padding=1, groups=c),
                nn.BatchNorm2d(c),
                nn.Hardswish(),
            )
            for _ in range(2)
        )
        self.head = nn.Linear(c, 5)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        for block in self.blocks:
            y = y + block(y)
        return y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


def _model() -> Depthwise:
    m = Depthwise().eval()
    for b in m.modules():
        if isinstance(b, nn.BatchNorm2d):  # eval statistics that are not the identity
            b.running_mean.uniform_(-0.5, 0.5)
            b.running_var.uniform_(0.5, 2.0)
    return m


def _uses_channels_last(jf: object) -> bool:
    return "to_channels_last" in str(thunder.last_traces(jf)[-1])


def _assert_as_eager(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert got.stride() == want.stride()


def test_depthwise_network_runs_channels_last_with_eager_values():
    m = _model()
    jm = thunder.jit(m)
    with torch.no_grad():
        for _ in range(3):  # fresh data on every call: one program
            x = torch.randn(2, 3, 12, 12)
            _assert_as_eager(jm(x), m(x))
    assert _uses_channels_last(jm)
    assert thunder.compile_stats(jm).cache_misses == 1


def test_returned_feature_maps_have_eager_strides():
    m = _model()
    jf = thunder.jit(m.features)
    with torch.no_grad():
        x = torch.randn(2, 3, 10, 10)
        out = jf(x)
        _assert_as_eager(out, m.features(x))
    assert out.is_contiguous()
    assert _uses_channels_last(jf)


def test_a_view_after_the_convolutions_sees_eager_strides():
    m = _model()

    def flattened(x: torch.Tensor) -> torch.Tensor:
        y = m.features(x)
        return y.view(y.shape[0], y.shape[1], -1).softmax(-1)  # a view eager's strides allow

    jf = thunder.jit(flattened)
    with torch.no_grad():
        x = torch.randn(2, 3, 10, 10)
        _assert_as_eager(jf(x), flattened(x))
    assert _uses_channels_last(jf)


def _two_depthwise(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return F.conv2d(F.relu(F.conv2d(x, w1, padding=1, groups=4)), w2, padding=1, groups=4)


def test_a_write_a_copy_would_hide_keeps_eager_layouts():
    def written(x, w1, w2):
        y = _two_depthwise(x, w1, w2)  # channels-last, where eager's is contiguous
        v = y.view(-1)  # a view of y: the write below shows through it
        y.mul_(2)
        return v.sum(), y

    jf = thunder.jit(written)
    args = torch.randn(2, 4, 8, 8), torch.randn(4, 1, 3, 3), torch.randn(4, 1, 3, 3)
    with torch.no_grad():
        got, want = jf(*args), written(*args)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-4)
    _assert_as_eager(got[1], want[1])
    assert not _uses_channels_last(jf)  # a copy for the view would not see the write


def test_a_view_of_a_channels_last_value_reads_a_copy():
    def viewed(x, w1, w2):
        y = _two_depthwise(x, w1, w2)
        return y.view(2, 4, -1).amax(-1), y.permute(0, 2, 3, 1).sum(-1)

    jf = thunder.jit(viewed)
    args = torch.randn(2, 4, 8, 8), torch.randn(4, 1, 3, 3), torch.randn(4, 1, 3, 3)
    with torch.no_grad():
        for got, want in zip(jf(*args), viewed(*args), strict=True):
            _assert_as_eager(got, want)
    assert _uses_channels_last(jf)


def test_inputs_laid_out_otherwise_compile_again():
    m = _model()
    jm = thunder.jit(m.features)
    with torch.no_grad():
        x = torch.randn(2, 3, 10, 10)
        _assert_as_eager(jm(x), m.features(x))
        xc = x.contiguous(memory_format=torch.channels_last)
        _assert_as_eager(jm(xc), m.features(xc))  # eager: channels-last results
        _assert_as_eager(jm(x), m.features(x))
    assert thunder.compile_stats(jm).cache_misses == 2


def test_dense_convolutions_of_computed_weights_keep_their_layout():
    """oneDNN lays a weight out for its channels-last kernels on every call: a dense
    convolution over many channels runs slower so, unless its weight is the program's input,
    which is laid out once (test_packed_convolutions.py)."""

    def dense(x, w1, w2):
        return F.conv2d(F.relu(F.conv2d(x, w1 * 2, padding=1)), w2 + 1, padding=1)

    jf = thunder.jit(dense)
    x, w1, w2 = torch.randn(2, 96, 8, 8), torch.randn(96, 96, 3, 3), torch.randn(96, 96, 3, 3)
    with torch.no_grad():
        _assert_as_eager(jf(x, w1, w2), dense(x, w1, w2))
    assert not _uses_channels_last(jf)


def test_dense_convolutions_of_input_weights_run_channels_last_packed():
    def dense(x, w1, w2):
        return F.conv2d(F.relu(F.conv2d(x, w1, padding=1)), w2, padding=1)

    jf = thunder.jit(dense)
    x = torch.randn(2, 96, 8, 8)
    # (scaled as an initializer does: values of order 1, so that 1e-5 bounds the sums' rounding)
    w1, w2 = torch.randn(96, 96, 3, 3) * 0.03, torch.randn(96, 96, 3, 3) * 0.03
    with torch.no_grad():
        _assert_as_eager(jf(x, w1, w2), dense(x, w1, w2))
    from thunder_executors import packed_convolutions

    if packed_convolutions.available():
        assert _uses_channels_last(jf)
        assert str(thunder.last_traces(jf)[-1]).count("packed_conv2d(") == 2


def test_an_image_stem_of_any_kernel_runs_channels_last():
    """A convolution over an image's few channels runs channels-last at least as fast (a 7x7
    stem over 3 channels: about twice as fast), so its input is converted, not its output."""

    class Stem(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 7, stride=2, padding=3)
            self.dw1 = nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.dw2 = nn.Conv2d(8, 8, 3, padding=1, groups=8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.dw2(F.relu(self.dw1(F.relu(self.stem(x)))))

    m = Stem().eval()
    jm = thunder.jit(m)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 16, 16)
            _assert_as_eager(jm(x), m(x))
    body = str(thunder.last_traces(jm)[-1])
    converted = [line for line in body.splitlines() if "to_channels_last(" in line]
    assert len(converted) == 1 and "f32[2, 3, 16, 16]" in converted[0]  # the image itself


def test_training_step_is_unchanged():
    m = _model().train()
    e = copy.deepcopy(m)
    jm = thunder.jit(m)
    x = torch.randn(2, 3, 8, 8)
    jm(x).sum().backward()
    e(x).sum().backward()
    for (name, p), q in zip(m.named_parameters(), e.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    for b, c in zip(m.buffers(), e.buffers(), strict=True):
        torch.testing.assert_close(b, c)


def test_no_grad_training_mode_updates_statistics_as_eager():
    m = _model().train()
    e = copy.deepcopy(m)
    jm = thunder.jit(m)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 8, 8)
            torch.testing.assert_close(jm(x), e(x), rtol=1e-5, atol=1e-5)
    for b, c in zip(m.buffers(), e.buffers(), strict=True):
        torch.testing.assert_close(b, c)


def test_a_write_through_a_view_of_a_copy_keeps_eager_layouts():
    def written(x, w1, w2):
        y = _two_depthwise(x, w1, w2)
        v = y.view(-1)  # eager: a view of y, so the write below changes y
        v.mul_(2)
        return y

    jf = thunder.jit(written)
    args = torch.randn(2, 4, 8, 8), torch.randn(4, 1, 3, 3), torch.randn(4, 1, 3, 3)
    with torch.no_grad():
        _assert_as_eager(jf(*args), written(*args))
    assert not _uses_channels_last(jf)


def test_dropout_draws_eager_numbers():
    def dropped(x, w1, w2):
        return F.dropout(_two_depthwise(x, w1, w2), 0.5, training=True)

    jf = thunder.jit(dropped)
    args = torch.randn(2, 4, 8, 8), torch.randn(4, 1, 3, 3), torch.randn(4, 1, 3, 3)
    with torch.no_grad():
        torch.manual_seed(0)
        got = jf(*args)
        torch.manual_seed(0)
        want = dropped(*args)
    _assert_as_eager(got, want)
