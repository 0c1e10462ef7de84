"""Small CNNs defined in code: the AMCoDA seed CNN and a tiny residual network."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class AmcodaCNN(nn.Module):
    """The CNN of the AMCoDA paper: 16x56x56 in, three 3x3 convolutions with ReLU
    (16->16 s1, 16->32 s2, 32->32 s1, padding 1), a 7x7 / stride 7 average pool
    (28x28 -> 4x4), and a fully connected layer 512 -> 16. No biases: the seed's ALU
    has none (its CONV and FC ops take an input and a weight only)."""

    def __init__(self, in_channels: int = 16, num_classes: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 3, stride=1, padding=1, bias=False)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(32, 32, 3, stride=1, padding=1, bias=False)
        self.relu3 = nn.ReLU()
        self.pool = nn.AvgPool2d(7, stride=7)
        self.fc = nn.Linear(32 * 4 * 4, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu1(self.conv1(x))
        x = self.relu2(self.conv2(x))
        x = self.relu3(self.conv3(x))
        x = self.pool(x)
        return self.fc(torch.flatten(x, 1))


class AmcodaCNN4(nn.Module):
    """A 4-conv CNN the seed never ran, for checking the seed machine beyond its own
    model: 8x32x32 in; 5x5 / 3x3 stride 2 / 3x3 / 1x1 convolutions (16-32-32-64
    channels, padding 2 / 1 / 1 / 0) with ReLU, a 4x4 / stride 4 average pool
    (16x16 -> 4x4), a fully connected layer 1024 -> 10. No biases, as on the seed."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(8, 16, 5, stride=1, padding=2, bias=False)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(32, 32, 3, stride=1, padding=1, bias=False)
        self.relu3 = nn.ReLU()
        self.conv4 = nn.Conv2d(32, 64, 1, stride=1, padding=0, bias=False)
        self.relu4 = nn.ReLU()
        self.pool = nn.AvgPool2d(4, stride=4)
        self.fc = nn.Linear(64 * 4 * 4, 10, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu1(self.conv1(x))
        x = self.relu2(self.conv2(x))
        x = self.relu3(self.conv3(x))
        x = self.relu4(self.conv4(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class BasicBlock(nn.Module):
    """Two 3x3 conv + batch-norm layers with an identity (or 1x1 projection) shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class ResNetTiny(nn.Module):
    """A CIFAR-style residual network: a 3x3 stem, two basic blocks (16 and 32
    channels, the second with stride 2), global average pooling, a classifier."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.layer1 = BasicBlock(16, 16, 1)
        self.layer2 = BasicBlock(16, 32, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.stem(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def classification_loss(output: torch.Tensor, *inputs: torch.Tensor) -> torch.Tensor:
    """Cross entropy of the logits against class 0 for every sample (the labels are
    made in the graph, so the step needs no label input)."""
    labels = torch.zeros(output.shape[0], dtype=torch.long, device=output.device)
    return F.cross_entropy(output, labels)
