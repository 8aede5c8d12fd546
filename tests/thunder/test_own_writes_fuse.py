"""Under a fusion executor with grad mode off, in-place writes into memory only the program sees
(``y = bn(x); y += r``, an inplace ReLU of a computed value) are written as new values, so they
join the fusion region instead of splitting it; writes into inputs, into what the program
returns, and programs torch.autograd records keep their writes, and every result is eager's."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import thunder

FUSING = ("torchcompile", "torch_ops", "torch")


def residual_block(x, w1, w2):
    y = F.conv2d(x, w1, padding=1)
    y = F.relu(y, inplace=True)
    y = F.conv2d(y, w2, padding=1)
    y += x  # the residual, written into the conv's fresh output
    y.relu_()
    return y.mean((2, 3))


def test_writes_into_own_values_join_the_region():
    w1, w2 = torch.randn(4, 4, 3, 3), torch.randn(4, 4, 3, 3)
    jf = thunder.jit(residual_block, executors=FUSING)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 4, 8, 8)
            torch.testing.assert_close(jf(x, w1, w2), residual_block(x, w1, w2))
    trace = thunder.last_traces(jf)[-1]
    assert len(trace.fusion_regions) == 1, trace.python()
    assert "add_" not in trace.python() and "relu_" not in trace.python()


def writes_input_and_output(x, acc):
    acc.add_(x)  # the caller's tensor: stays a write
    y = x * 2
    y.mul_(3)  # returned: the caller gets the written tensor and a view of it
    return y, y.view(-1)


def test_writes_the_caller_sees_stay_writes():
    jf = thunder.jit(writes_input_and_output, executors=FUSING)
    with torch.no_grad():
        x = torch.randn(3, 4)
        acc, expected_acc = torch.zeros(3, 4), torch.zeros(3, 4)
        y, flat = jf(x, acc)
        ey, eflat = writes_input_and_output(x, expected_acc)
    torch.testing.assert_close((y, flat, acc), (ey, eflat, expected_acc))
    assert flat.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()


class BasicBlock(torch.nn.Module):
    """A ResNet basic block, written as torchvision writes it (inplace ReLU, ``out += x``)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.relu = torch.nn.ReLU(inplace=True)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


def test_a_resnet_block_in_eval_matches_eager():
    torch.manual_seed(0)
    block = BasicBlock(8)
    with torch.no_grad():  # statistics other than the defaults
        for bn in (block.bn1, block.bn2):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    block.eval()
    reference = copy.deepcopy(block)
    jm = thunder.jit(block, executors=FUSING)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 8, 8, 8)
            torch.testing.assert_close(jm(x), reference(x))
    assert len(thunder.last_traces(jm)[-1].fusion_regions) == 1


def test_programs_autograd_records_keep_their_writes():
    def f(w):
        h = w.sigmoid()
        h.add_(1)  # sigmoid's backward needs h: eager raises at backward
        return h.sum()

    w = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        f(w).backward()
    jf = thunder.jit(f, executors=FUSING, disable_torch_autograd=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        jf(w).backward()
