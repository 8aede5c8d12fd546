"""A convolutional block shaped like MobileNetV3's: the ops eager runs as one kernel each
(convolutions, BatchNorm, ReLU, Hardswish, pooling) that a compiler must not make slower."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ConvBlock"]


class ConvBlock(nn.Module):
    """Conv, BatchNorm, ReLU, depthwise conv, BatchNorm, Hardswish, max and average pooling, and
    a linear head over ``classes``."""

    def __init__(self, channels: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.dw = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv(x)))
        x = F.hardswish(self.bn2(self.dw(x)))
        x = F.adaptive_avg_pool2d(F.max_pool2d(x, 2), 1).flatten(1)
        return self.head(x)  # type: ignore[no-any-return]
