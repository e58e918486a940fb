"""hsipipe's networks in PyTorch, with the layer names of `hsipipe export` files (src/train/models.cpp).

A model trained with hsipipe, used from PyTorch:

    import hsipipe_models as hm
    net, info = hm.load("model.pt")          # torch.load + the network + load_state_dict, eval mode
    x = hm.preprocess(pixels, info["meta"])  # [N, source bands] raw values (SPy: load(scale=False)) -> as the cache holds them
    logits = net(torch.from_numpy(x))        # spectral models; spatial ones take [N, bands, p, p] patches
    labels = np.asarray(info["label_values"])[logits.argmax(1).numpy()]

Input of every network: float32 [N, bands] (a spectrum) or [N, bands, p, p] (a band-first patch centred on
the pixel; spectral models take its centre). Output: logits [N, n_classes]; class i is label value
label_values[i]. The state_dict names (`conv1.weight`, `fc.bias`, ...) are those below, in this order.

`preprocess` is the cache's transform, from the export's meta (the run's preprocessing.json): the kept
bands (1-based in the manifest), x' = (x - shift) / scale per band, then with PCA (x' - mean) projected on
the components, then rounded to the cache's dtype (float16 caches store IEEE half). An invalid pixel
(NaN in a band) is 0 in every band. Patches are cut from the transformed scene with the manifest's border
rule: "reflect" is numpy's pad mode 'reflect', "zero" pads 0.
"""
import json
import math
import re

import numpy as np
import torch
from torch import nn


class Hu1d(nn.Module):
    """Hu et al. 2015, 1-D CNN on the spectrum."""

    def __init__(self, bands, n_classes, patch=1):
        super().__init__()
        self.kernel = math.ceil(bands / 9.0)
        self.pool_size = math.ceil(self.kernel / 5.0)
        self.conv = nn.Conv1d(1, 20, self.kernel)
        self.pool = nn.MaxPool1d(self.pool_size)
        self.features = 20 * ((bands - self.kernel + 1) // self.pool_size)
        self.fc1 = nn.Linear(self.features, 100)
        self.fc2 = nn.Linear(100, n_classes)

    def forward(self, x):
        h = torch.tanh(self.pool(self.conv(centre(x).unsqueeze(1))))
        return self.fc2(torch.tanh(self.fc1(h.reshape(-1, self.features))))


class Mlp(nn.Module):
    """Four fully connected layers on the spectrum."""

    def __init__(self, bands, n_classes, patch=1):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(bands, 256), nn.Linear(256, 512)
        self.fc3, self.fc4 = nn.Linear(512, 256), nn.Linear(256, n_classes)

    def forward(self, x):
        h = centre(x)
        for fc in (self.fc1, self.fc2, self.fc3):
            h = torch.relu(fc(h))
        return self.fc4(h)


class Li3d(nn.Module):
    """Li et al. 2017, 3-D CNN."""

    def __init__(self, bands, n_classes, patch, n_planes=16):
        super().__init__()
        self.conv1 = nn.Conv3d(1, n_planes, (7, 3, 3), padding=(1, 0, 0))
        self.conv2 = nn.Conv3d(n_planes, 2 * n_planes, (3, 3, 3), padding=(1, 0, 0))
        self.features = 2 * n_planes * (bands - 4) * (patch - 4) * (patch - 4)
        self.fc = nn.Linear(self.features, n_classes)

    def forward(self, x):
        h = torch.relu(self.conv2(torch.relu(self.conv1(x.unsqueeze(1)))))
        return self.fc(h.reshape(-1, self.features))


class Hamida3d(nn.Module):
    """Hamida et al. 2018, 3-D CNN with strided spectral convolutions as pooling."""

    def __init__(self, bands, n_classes, patch):
        super().__init__()
        self.conv1 = nn.Conv3d(1, 20, (3, 3, 3), padding=1 if patch == 3 else 0)
        self.pool1 = nn.Conv3d(20, 20, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0))
        self.conv2 = nn.Conv3d(20, 35, (3, 3, 3), padding=(1, 0, 0))
        self.pool2 = nn.Conv3d(35, 35, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0))
        self.conv3 = nn.Conv3d(35, 35, (3, 1, 1), padding=(1, 0, 0))
        self.conv4 = nn.Conv3d(35, 35, (2, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0))
        with torch.no_grad():
            self.features = self._features(torch.zeros(1, 1, bands, patch, patch)).numel()
        self.fc = nn.Linear(self.features, n_classes)

    def _features(self, v):
        v = self.pool1(torch.relu(self.conv1(v)))
        v = self.pool2(torch.relu(self.conv2(v)))
        return torch.relu(self.conv4(torch.relu(self.conv3(v))))

    def forward(self, x):
        return self.fc(self._features(x.unsqueeze(1)).reshape(-1, self.features))


class HybridSN(nn.Module):
    """Roy et al. 2020: three 3-D convolutions, one 2-D convolution, three fully connected layers."""

    def __init__(self, bands, n_classes, patch):
        super().__init__()
        self.conv1 = nn.Conv3d(1, 8, (7, 3, 3))
        self.conv2 = nn.Conv3d(8, 16, (5, 3, 3))
        self.conv3 = nn.Conv3d(16, 32, (3, 3, 3))
        self.channels2d = 32 * (bands - 12)
        self.conv4 = nn.Conv2d(self.channels2d, 64, 3)
        self.features = 64 * (patch - 8) * (patch - 8)
        self.fc1 = nn.Linear(self.features, 256)
        self.drop1 = nn.Dropout(0.4)
        self.fc2 = nn.Linear(256, 128)
        self.drop2 = nn.Dropout(0.4)
        self.fc3 = nn.Linear(128, n_classes)

    def forward(self, x):
        h = x.unsqueeze(1)
        for conv in (self.conv1, self.conv2, self.conv3):
            h = torch.relu(conv(h))
        h = torch.relu(self.conv4(h.reshape(-1, self.channels2d, h.shape[3], h.shape[4])))
        h = self.drop1(torch.relu(self.fc1(h.reshape(-1, self.features))))
        return self.fc3(self.drop2(torch.relu(self.fc2(h))))


class Ssftt(nn.Module):
    """Sun et al. 2022, SSFTT (zgr6010/HSI_SSFTT's SSFTTnet with flat layer names): conv3d + BN + ReLU,
    conv2d + BN + ReLU, a 4-token Gaussian-weighted tokenizer plus a class token, one transformer encoder
    layer (dim 64, 8 heads, mlp 8) and a linear head on the class token. src/train/models/ssftt.cpp."""

    def __init__(self, bands, n_classes, patch):
        super().__init__()
        self.conv3d = nn.Conv3d(1, 8, 3)
        self.bn3d = nn.BatchNorm3d(8)
        self.channels2d = 8 * (bands - 2)
        self.conv2d = nn.Conv2d(self.channels2d, 64, 3)
        self.bn2d = nn.BatchNorm2d(64)
        self.token_wA = nn.Parameter(torch.empty(1, 4, 64))
        self.token_wV = nn.Parameter(torch.empty(1, 64, 64))
        self.pos_embedding = nn.Parameter(torch.empty(1, 5, 64))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 64))
        self.ln1 = nn.LayerNorm(64)
        self.to_qkv = nn.Linear(64, 192)
        self.attn_out = nn.Linear(64, 64)
        self.ln2 = nn.LayerNorm(64)
        self.mlp1 = nn.Linear(64, 8)
        self.mlp2 = nn.Linear(8, 64)
        self.head = nn.Linear(64, n_classes)
        self.drop = nn.Dropout(0.1)
        nn.init.xavier_normal_(self.token_wA)
        nn.init.xavier_normal_(self.token_wV)
        nn.init.normal_(self.pos_embedding, std=0.02)
        nn.init.xavier_uniform_(self.head.weight)
        nn.init.normal_(self.head.bias, std=1e-6)

    def _attention(self, x):
        b, n, _ = x.shape
        q, k, v = self.to_qkv(x).reshape(b, n, 3, 8, 8).permute(2, 0, 3, 1, 4)  # 'b n (qkv h d) -> qkv b h n d'
        attn = (torch.einsum("bhid,bhjd->bhij", q, k) * 64 ** -0.5).softmax(dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", attn, v).transpose(1, 2).reshape(b, n, 64)
        return self.drop(self.attn_out(out))

    def forward(self, x):
        h = torch.relu(self.bn3d(self.conv3d(x.unsqueeze(1))))
        h = torch.relu(self.bn2d(self.conv2d(h.reshape(-1, self.channels2d, h.shape[3], h.shape[4]))))
        xs = h.flatten(2).transpose(1, 2)  # 'b c h w -> b (h w) c'
        a = torch.einsum("bij,bjk->bik", xs, self.token_wA.transpose(1, 2)).transpose(1, 2).softmax(dim=-1)
        t = torch.einsum("bij,bjk->bik", a, torch.einsum("bij,bjk->bik", xs, self.token_wV))
        t = self.drop(torch.cat((self.cls_token.expand(x.shape[0], -1, -1), t), dim=1) + self.pos_embedding)
        t = self._attention(self.ln1(t)) + t
        t = self.drop(self.mlp2(self.drop(nn.functional.gelu(self.mlp1(self.ln2(t)))))) + t
        return self.head(t[:, 0])


class SpectralFormer(nn.Module):
    """Hong et al. 2021, SpectralFormer (danfenghong/IEEE_TGRS_SpectralFormer's ViT, mode 'CAF', with flat layer
    names): group-wise spectral embedding (each band a token: its p x p patch and those of the two neighbouring
    bands, circularly, as gain_neighborhood_band with band_patches 3), class token, position embedding, 5 pre-norm
    layers (dim 64, 4 heads of 16, mlp 8, dropout 0.1) with cross-layer adaptive fusion (a [1, 2] Conv2d over
    the tokens before layers 3-5), LayerNorm + linear head on the class token. src/train/models/spectralformer.cpp.
    `from_reference` renames a reference state_dict (its log/*.pt) to these names."""

    def __init__(self, bands, n_classes, patch, depth=5, dim=64, heads=4, dim_head=16, mlp=8):
        super().__init__()
        self.heads, self.dim_head, self.inner = heads, dim_head, heads * dim_head
        self.patch_to_embedding = nn.Linear(3 * patch * patch, dim)
        self.pos_embedding = nn.Parameter(torch.randn(1, bands + 1, dim))
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.norm1 = nn.ModuleList([nn.LayerNorm(dim) for _ in range(depth)])
        self.to_qkv = nn.ModuleList([nn.Linear(dim, 3 * self.inner, bias=False) for _ in range(depth)])
        self.to_out = nn.ModuleList([nn.Linear(self.inner, dim) for _ in range(depth)])
        self.norm2 = nn.ModuleList([nn.LayerNorm(dim) for _ in range(depth)])
        self.ff1 = nn.ModuleList([nn.Linear(dim, mlp) for _ in range(depth)])
        self.ff2 = nn.ModuleList([nn.Linear(mlp, dim) for _ in range(depth)])
        self.skipcat = nn.ModuleList([nn.Conv2d(bands + 1, bands + 1, (1, 2)) for _ in range(depth - 2)])
        self.head_norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_classes)
        self.drop = nn.Dropout(0.1)

    def _attention(self, i, x):
        b, n, _ = x.shape
        q, k, v = self.to_qkv[i](x).reshape(b, n, 3, self.heads, self.dim_head).permute(2, 0, 3, 1, 4)
        attn = (torch.einsum("bhid,bhjd->bhij", q, k) * self.dim_head ** -0.5).softmax(dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", attn, v).transpose(1, 2).reshape(b, n, self.inner)
        return self.drop(self.to_out[i](out))

    def forward(self, x):
        f = x.flatten(2)  # [N, B, p*p]; then the bands b-1, b, b+1 (circular): [N, B, 3 p*p]
        t = self.patch_to_embedding(torch.cat((f.roll(1, 1), f, f.roll(-1, 1)), dim=2))
        t = self.drop(torch.cat((self.cls_token.expand(x.shape[0], -1, -1), t), dim=1) + self.pos_embedding)
        last = []
        for i in range(len(self.norm1)):
            last.append(t)
            if i > 1:
                t = self.skipcat[i - 2](torch.stack((t, last[i - 2]), dim=3)).squeeze(3)
            t = self._attention(i, self.norm1[i](t)) + t
            t = self.drop(self.ff2[i](self.drop(nn.functional.gelu(self.ff1[i](self.norm2[i](t)))))) + t
        return self.head(self.head_norm(t[:, 0]))

    @staticmethod
    def from_reference(sd):
        """The reference's ViT state_dict (transformer.layers.I.0.fn.norm.weight, ...) under these names."""
        subs = [(r"transformer\.layers\.(\d+)\.0\.fn\.norm\.", r"norm1.\1."),
                (r"transformer\.layers\.(\d+)\.0\.fn\.fn\.to_qkv\.", r"to_qkv.\1."),
                (r"transformer\.layers\.(\d+)\.0\.fn\.fn\.to_out\.0\.", r"to_out.\1."),
                (r"transformer\.layers\.(\d+)\.1\.fn\.norm\.", r"norm2.\1."),
                (r"transformer\.layers\.(\d+)\.1\.fn\.fn\.net\.0\.", r"ff1.\1."),
                (r"transformer\.layers\.(\d+)\.1\.fn\.fn\.net\.3\.", r"ff2.\1."),
                (r"transformer\.skipcat\.", "skipcat."), (r"mlp_head\.0\.", "head_norm."), (r"mlp_head\.1\.", "head.")]
        out = {}
        for k, v in sd.items():
            for pat, rep in subs:
                k = re.sub("^" + pat, rep, k)
            out[k] = v
        return out


MODELS = {"hu1d": Hu1d, "mlp": Mlp, "li3d": Li3d, "hamida3d": Hamida3d, "hybridsn": HybridSN, "ssftt": Ssftt,
          "spectralformer": SpectralFormer}


def centre(x):
    """The spectrum of [N, B] as is, or of the centre pixel of [N, B, p, p]."""
    return x if x.dim() == 2 else x[:, :, x.shape[2] // 2, x.shape[3] // 2]


def build(model, bands, n_classes, patch=1):
    return MODELS[model](int(bands), int(n_classes), int(patch))


def load(path):
    """The exported network in eval mode, and the export's dict (meta parsed from its JSON text)."""
    d = torch.load(path)
    if d.get("format") != "hsipipe-model":
        raise ValueError(f"{path}: not an hsipipe export (format {d.get('format')!r})")
    net = build(d["model"], d["bands"], d["n_classes"], d["patch"])
    net.load_state_dict(d["state_dict"])
    net.eval()
    d = dict(d)
    d["meta"] = json.loads(d["meta"])
    return net, d


def preprocess(pixels, meta):
    """[N, source bands] raw values -> [N, bands] float32 exactly as the cache stores a pixel."""
    m = meta["preprocessing"]["manifest"]
    kept = np.asarray(m["bands"]["kept"], dtype=np.int64) - 1
    x = np.asarray(pixels, dtype=np.float32)[:, kept].astype(np.float64)
    invalid = np.isnan(x[:, 0]) if x.shape[1] else np.zeros(len(x), bool)
    z = (x - np.asarray(m["statistics"]["shift"])) / np.asarray(m["statistics"]["scale"])
    pca = m.get("pca")
    if isinstance(pca, dict):
        z = (z - np.asarray(pca["mean"])) @ np.asarray(pca["components"], dtype=np.float64).T
    out = z.astype(np.float32)
    out[invalid] = 0
    if m.get("dtype", "float32") == "float16":
        out = out.astype(np.float16).astype(np.float32)
    return out


def patches(cube, rows, cols, p, border="reflect"):
    """[len(rows), B, p, p] band-first patches of a transformed [H, W, B] cube around (rows, cols)."""
    h = p // 2
    padded = np.pad(cube, ((h, h), (h, h), (0, 0)), mode="reflect" if border == "reflect" else "constant")
    dy, dx = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    out = padded[np.asarray(rows)[:, None, None] + dy, np.asarray(cols)[:, None, None] + dx]  # [N, p, p, B]
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))
