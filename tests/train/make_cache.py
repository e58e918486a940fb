#!/usr/bin/python3
"""Writes a small synthetic hsipipe cache (npy backend) with numpy alone, following src/cache/cache.hpp,
for the train tests (independent of `hsipipe decode`). Also writes, for the shard test, the patches
numpy cuts from the scene (np.pad 'reflect' or 'constant') as expected_patches.npy.

usage: make_cache.py DIR --rows H --cols W --bands B --classes C --layout pixel|patch|cube
                     [--patch P] [--dtype float32|float16] [--border reflect|zero] [--seed S]
                     [--unlabeled FRACTION] [--scenes K] [--expected]
Every scene has the same size; class c has a distinct mean spectrum plus noise, so models can learn.
"""
import argparse
import json
import os

import numpy as np
import xxhash


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--rows", type=int, default=12)
    ap.add_argument("--cols", type=int, default=10)
    ap.add_argument("--bands", type=int, default=16)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--layout", default="pixel")
    ap.add_argument("--patch", type=int, default=1)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--border", default="reflect")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--unlabeled", type=float, default=0.2)
    ap.add_argument("--scenes", type=int, default=1)
    ap.add_argument("--noise", type=float, default=0.3)
    ap.add_argument("--expected", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    dt = np.float16 if a.dtype == "float16" else np.float32
    H, W, B, C = a.rows, a.cols, a.bands, a.classes
    means = rng.normal(0, 1, size=(C, B))
    label_values = [2 * c + 1 for c in range(C)]  # non-contiguous label values: 1, 3, 5, ...
    cubes, labels, coords = [], [], []
    for s in range(a.scenes):
        cls = rng.integers(0, C, size=(H, W))
        cube = means[cls] + a.noise * rng.normal(0, 1, size=(H, W, B))
        cubes.append(cube.astype(dt))
        lab = np.where(rng.random((H, W)) < a.unlabeled, 0, np.array(label_values)[cls])
        for r in range(H):
            for c in range(W):
                if lab[r, c] > 0:
                    labels.append(lab[r, c])
                    coords.append((s, r, c))
    labels = np.array(labels, dtype=np.int32)
    coords = np.array(coords, dtype=np.int32).reshape(-1, 3)
    N = len(labels)
    p = a.patch if a.layout != "pixel" else 1
    h = p // 2
    mode = "reflect" if a.border == "reflect" else "constant"
    padded = [np.pad(cb, ((h, h), (h, h), (0, 0)), mode=mode) for cb in cubes]
    patches = np.empty((N, B, p, p), dtype=dt)
    for i, (s, r, c) in enumerate(coords):
        patches[i] = padded[s][r:r + p, c:c + p, :].transpose(2, 0, 1)
    os.makedirs(a.dir, exist_ok=True)
    if a.layout == "pixel":
        np.save(os.path.join(a.dir, "samples.npy"), patches[:, :, 0, 0].copy())
    elif a.layout == "patch":
        np.save(os.path.join(a.dir, "samples.npy"), patches)
    else:
        for s, cb in enumerate(cubes):
            np.save(os.path.join(a.dir, "cube_%d.npy" % s), cb)
    np.save(os.path.join(a.dir, "labels.npy"), labels)
    np.save(os.path.join(a.dir, "coords.npy"), coords)
    np.save(os.path.join(a.dir, "band_mean.npy"), np.zeros(B))
    np.save(os.path.join(a.dir, "band_std.npy"), np.ones(B))
    np.save(os.path.join(a.dir, "wavelengths.npy"), np.linspace(400, 2500, B))
    if a.expected:
        np.save(os.path.join(a.dir, "expected_patches.npy"), patches.astype(np.float32))
    # data_checksum as src/cache/cache.hpp defines it, computed here independently (python3-xxhash): XXH3-64
    # of each stored item (pixel/patch: a sample; cube: a row of a scene), then of the labels and the coords
    # bytes, and XXH3-64 over those values as little-endian uint64
    if a.layout == "pixel":
        items = [np.ascontiguousarray(patches[i, :, 0, 0]).tobytes() for i in range(N)]
    elif a.layout == "patch":
        items = [patches[i].tobytes() for i in range(N)]
    else:
        items = [np.ascontiguousarray(cb[r]).tobytes() for cb in cubes for r in range(H)]
    hashes = [xxhash.xxh3_64_intdigest(b) for b in items]
    hashes += [xxhash.xxh3_64_intdigest(labels.tobytes()), xxhash.xxh3_64_intdigest(coords.tobytes())]
    checksum = "%016x" % xxhash.xxh3_64_intdigest(np.array(hashes, dtype="<u8").tobytes())
    manifest = {
        "format_version": 2, "n_samples": int(N), "n_bands": B, "layout": a.layout, "dtype": a.dtype,
        "data_checksum": checksum, "sources": ["synthetic (tests/train/make_cache.py)"],
        "backend": "npy", "patch": p if a.layout != "pixel" else 1, "border": a.border,
        "scenes": [{"name": "scene%d" % s, "rows": H, "cols": W} for s in range(a.scenes)],
        "label_values": label_values,
    }
    with open(os.path.join(a.dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    print(N)


if __name__ == "__main__":
    main()
