"""A spectral-spatial residual CNN (in the spirit of Zhong et al., SSRN, IEEE TGRS 2018, reduced): a 1x1
convolution maps the bands to `width` channels, two residual blocks of 3x3 convolutions with BatchNorm, global
average pooling, dropout and a linear head. Not built into hsipipe: script it and bring it with --model FILE.

Input: [N, B] (cache layout pixel: treated as a 1x1 patch) or [N, B, p, p]; output logits [N, C].
"""
import torch
from torch import nn


class ResidualBlock(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return torch.relu(x + h)  # the residual branch


class ResidualCNN(nn.Module):
    def __init__(self, bands: int, patch: int, classes: int, width: int = 32, dropout: float = 0.3):
        super().__init__()
        self.reduce = nn.Conv2d(bands, width, 1, bias=False)
        self.bn = nn.BatchNorm2d(width)
        self.block1 = ResidualBlock(width)
        self.block2 = ResidualBlock(width)
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.unsqueeze(-1).unsqueeze(-1)
        h = torch.relu(self.bn(self.reduce(x)))
        h = self.block2(self.block1(h))
        h = h.mean(dim=[2, 3])
        return self.fc(self.drop(h))


def build(bands: int, patch: int, classes: int) -> nn.Module:
    return ResidualCNN(bands, patch, classes)
