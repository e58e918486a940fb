"""A small spectral-spatial transformer (in the spirit of SSFTT, Sun et al., IEEE TGRS 2022, and of ViT):
every pixel of the p x p patch is a token whose embedding is a linear map of its spectrum; a learned position
embedding and a class token are added, `depth` pre-norm encoder layers (multi-head self-attention and an MLP,
both with dropout and residual connections) follow, and the class token's state gives the logits. Written to
script cleanly (no **kwargs, no einops). Not built into hsipipe: script it and bring it with --model FILE.

Input: [N, B] (layout pixel: one token) or [N, B, p, p]; output logits [N, C].
"""
import torch
from torch import nn


class EncoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(2 * dim, dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + self.drop(a)
        return x + self.drop(self.mlp(self.norm2(x)))


class SpectralSpatialTransformer(nn.Module):
    def __init__(self, bands: int, patch: int, classes: int, dim: int = 64, depth: int = 2, heads: int = 4,
                 dropout: float = 0.1):
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(bands, dim)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, patch * patch + 1, dim) * 0.02)
        self.layers = nn.ModuleList([EncoderLayer(dim, heads, dropout) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.unsqueeze(-1).unsqueeze(-1)
        n = x.size(0)
        tokens = self.embed(x.flatten(2).transpose(1, 2))  # [N, p*p, dim]: one token a pixel
        h = torch.cat([self.cls.expand(n, -1, -1), tokens], dim=1) + self.pos[:, : tokens.size(1) + 1]
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h[:, 0]))


def build(bands: int, patch: int, classes: int) -> nn.Module:
    return SpectralSpatialTransformer(bands, patch, classes)
