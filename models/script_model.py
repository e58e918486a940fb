#!/usr/bin/env python3
"""Writes one of these example networks as the TorchScript file hsipipe trains (`--model FILE`):

    /usr/bin/python3 models/script_model.py NAME --bands B --patch P --classes C --out FILE.pt [--seed S]

NAME: residual_cnn | spectral_spatial_transformer (the module models/NAME.py, whose build(bands, patch,
classes) makes the network). B, P and C are the cache's: `hsipipe info`/the manifest give bands and patch,
C is the number of label values. The initial weights are the file's (torch.manual_seed(S) first), the same
for every rank and fold. The file is checked by one forward pass of a batch of two before it is written.
A network of your own: give build() in a module of yours and pass its path as NAME (path/to/mynet.py).
"""
import argparse
import importlib.util
import pathlib
import sys

import torch


def load_builder(name: str):
    path = pathlib.Path(name)
    if path.suffix != ".py":
        path = pathlib.Path(__file__).with_name(name + ".py")
    if not path.exists():
        sys.exit(f"script_model: no network module {path}")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, "build"):
        sys.exit(f"script_model: {path} has no build(bands, patch, classes)")
    return mod.build


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("--bands", type=int, required=True)
    ap.add_argument("--patch", type=int, default=1)
    ap.add_argument("--classes", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    net = load_builder(a.name)(a.bands, a.patch, a.classes)
    scripted = torch.jit.script(net)  # scripting, not tracing: dropout and BatchNorm follow train()/eval()
    shape = (2, a.bands) if a.patch == 1 else (2, a.bands, a.patch, a.patch)
    scripted.eval()
    with torch.no_grad():
        out = scripted(torch.randn(*shape))
    if tuple(out.shape) != (2, a.classes):
        sys.exit(f"script_model: forward gave {tuple(out.shape)}, expected (2, {a.classes})")
    scripted.train()
    scripted.save(a.out)
    n = sum(p.numel() for p in net.parameters())
    print(f"script_model: {a.name} ({n} parameters) for {a.bands} bands, patch {a.patch}, {a.classes} classes -> {a.out}")


if __name__ == "__main__":
    main()
