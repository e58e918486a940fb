#!/usr/bin/python3
"""What a PyTorch user writes to map a whole scene with a model exported by `hsipipe export`: the baseline of
scripts/bench_predict.sh (Debian's python3-torch, numpy and SPy).

    py_predict_baseline.py MODEL.pt SCENE.hdr OUT.npy [--batch 1024] [--threads N]

1. SPy loads the ENVI scene into memory ([H, W, B], raw values: no reflectance scale factor applied);
2. numpy normalises it with the export's statistics (scripts/hsipipe_models.preprocess: kept bands,
   shift/scale, PCA, dtype rounding), invalid pixels (NaN) as hsipipe does;
3. batches of `--batch` pixels (spectra, or p x p patches cut from the reflect-padded transformed cube)
   go through the exported network under torch.no_grad();
4. the argmax's label values are saved as a uint16 [H, W] .npy (nodata 0 where a pixel is invalid).
Prints one JSON line: pixels, seconds (load, transform, inference, total) and pixels/s.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import spectral.io.envi as envi
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hsipipe_models as hm  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("scene")
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    net, d = hm.load(a.model)
    cube = np.asarray(envi.open(a.scene).load(scale=False), dtype=np.float32)  # [H, W, B] raw values, as hsipipe reads them
    t1 = time.perf_counter()
    H, W, B = cube.shape
    t = hm.preprocess(cube.reshape(-1, B), d["meta"]).reshape(H, W, -1)
    invalid = np.isnan(cube[:, :, 0])
    del cube
    m = d["meta"]["preprocessing"]["manifest"]
    p = int(d["patch"])
    half = p // 2
    padded = np.pad(t, ((half, half), (half, half), (0, 0)), mode="reflect" if m.get("border", "reflect") == "reflect" else "constant")
    t2 = time.perf_counter()
    labels = np.asarray(d["label_values"], dtype=np.uint16)
    out = np.zeros(H * W, dtype=np.uint16)
    flat = t.reshape(H * W, -1)
    dy, dx = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    with torch.no_grad():
        for i0 in range(0, H * W, a.batch):
            idx = np.arange(i0, min(i0 + a.batch, H * W))
            if p == 1:
                x = flat[idx]
            else:
                r, c = idx // W, idx % W
                x = np.ascontiguousarray(padded[r[:, None, None] + dy, c[:, None, None] + dx].transpose(0, 3, 1, 2))
            out[idx] = labels[net(torch.from_numpy(x)).argmax(1).numpy()]
    out[invalid.reshape(-1)] = 0
    t3 = time.perf_counter()
    np.save(a.out, out.reshape(H, W))
    t4 = time.perf_counter()
    print(json.dumps({"pixels": H * W, "load_s": t1 - t0, "transform_s": t2 - t1, "inference_s": t3 - t2,
                      "total_s": t4 - t0, "pixels_per_s": H * W / (t4 - t0), "threads": a.threads, "batch": a.batch}))


if __name__ == "__main__":
    main()
