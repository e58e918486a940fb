#!/usr/bin/env python3
"""Streamed shards (issue 46): a shard larger than --shard-memory-mb is mapped from the cache file instead of read
into memory, and training gives the same results bit for bit.

For a patch-layout npy cache, a patch-layout HDF5 cache (chunked), a cube-layout npy cache and a cube-layout HDF5
cache, 2 ranks train li3d 2 epochs with --deterministic, once with the shard in memory (the default on this
machine) and once with --shard-memory-mb 1 (each rank's shard is larger than 1 MiB):
- predictions.csv and scores.npy are byte-identical;
- the log says each rank's shard was streamed, and only in the forced run;
- metrics.json's train.io says so (shard_streamed_per_rank, streamed_bytes_read_per_rank at least one epoch's
  training samples' bytes; 0 in memory), and the host memory split is recorded.
And --host-memory-mb 1 (a ring + window + model that cannot fit even streaming) is refused before any work:
exit 2, an error giving the figures, no fold directory written.
Run by ctest (HSIPIPE_BIN set).
"""
import json
import os
import sys

BIN = os.environ["HSIPIPE_BIN"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from hsitest import run, check, read, in_temp_dir  # noqa: E402


def train(w, cache, out, *extra, expect=0):
    return run(["train", "--cache", f"{w}/{cache}", "--folds", f"{w}/{cache}.json", "--model", "li3d", "--fold", "0",
                "--epochs", "2", "--batch", "32", "--deterministic", "--device", "cpu", "--quiet", "--out", f"{w}/{out}",
                *extra], ranks=2, expect=expect)


def same_training(w, cache, layout, backend):
    args = ["--layout", layout, "--patch", "5", "--backend", backend]
    run(["decode", "--scene", f"{w}/s/scene.hdr", "--labels", f"{w}/s/labels.hdr", "--ignore-label", "0", *args,
         "--out", f"{w}/{cache}", "--no-progress"], ranks=2)
    run(["folds", "--cache", f"{w}/{cache}", "--k", "3", "--seed", "7", "--out", f"{w}/{cache}.json"])
    held = train(w, cache, f"{cache}_mem")
    streamed = train(w, cache, f"{cache}_stream", "--shard-memory-mb", "1")
    what = f"{layout} layout, {backend}"
    check("shard streamed" not in held and streamed.count("shard streamed from the cache file") == 2,
          f"{what}: the log says both ranks' shards were streamed, and only under --shard-memory-mb 1")
    for f in ("predictions.csv", "scores.npy"):
        check(read(f"{w}/{cache}_mem/fold-0/{f}") == read(f"{w}/{cache}_stream/fold-0/{f}"),
              f"{what}: {f} of the streamed shard is byte-identical to the in-memory shard's")
    io_mem = json.load(open(f"{w}/{cache}_mem/fold-0/metrics.json"))["train"]["io"]
    io = json.load(open(f"{w}/{cache}_stream/fold-0/metrics.json"))["train"]["io"]
    shard = io["shard_bytes_per_rank"]
    check(io["shard_streamed_per_rank"] == [1, 1] and io_mem["shard_streamed_per_rank"] == [0, 0]
          and io_mem["streamed_bytes_read_per_rank"] == [0, 0],
          f"{what}: metrics.json says the shards were streamed (and were not in memory)")
    # two epochs over ~2/3 of the shard's samples, then the validation third: at least the shard's bytes once
    check(all(s > (1 << 20) and b >= s for s, b in zip(shard, io["streamed_bytes_read_per_rank"])),
          f"{what}: each rank's shard ({shard} bytes) is over 1 MiB and the gathers read {io['streamed_bytes_read_per_rank']} "
          "bytes from the mapping")
    hm = io["host_memory"]
    check(hm["shard_limit_bytes"] == 1 << 20 and hm["shard_limit_from"] == "--shard-memory-mb"
          and min(hm["ring_bytes"], hm["window_bytes"], hm["model_bytes"]) > 0,
          f"{what}: the host memory split (ring {hm['ring_bytes']}, window {hm['window_bytes']}, model {hm['model_bytes']}) "
          "is recorded")


def refusal(w):
    msg = train(w, "patch_npy", "nofit", "--host-memory-mb", "1", expect=2)
    check("host memory" in msg and "loader ring" in msg and "streaming window" in msg and "--host-memory-mb" in msg
          and "hash" not in msg.lower() and not os.path.exists(f"{w}/nofit/fold-0"),
          "--host-memory-mb 1: refused (exit 2) with the ring, window and model figures, before any fold work")
    msg = train(w, "patch_npy", "over", "--host-memory-mb", "64", "--shard-memory-mb", "4096")
    check("warning: --shard-memory-mb holds shards up to 4.00 GiB" in msg and "host memory per rank: 64.00 MiB" in msg,
          "--shard-memory-mb above what the host memory leaves: a warning before the load, naming the option")
    msg = train(w, "patch_npy", "badopt", "--shard-memory-mb", "lots", expect=2)
    check("--shard-memory-mb lots" in msg, "--shard-memory-mb lots: refused, naming the option")


def body(w):
    # 160 x 80 pixels, 48 bands, float32: a patch shard is ~6400 x 4.8 KB per rank, a cube shard ~80 rows x 15 KB
    run(["synth", "--out", f"{w}/s", "--rows", "160", "--cols", "80", "--bands", "48", "--classes", "4", "--seed", "5"])
    for cache, layout, backend in (("patch_npy", "patch", "npy"), ("patch_h5", "patch", "h5"),
                                   ("cube_npy", "cube", "npy"), ("cube_h5", "cube", "h5")):
        same_training(w, cache, layout, backend)
    refusal(w)


def main():
    in_temp_dir("hsipipe-stream-", body)


if __name__ == "__main__":
    main()
