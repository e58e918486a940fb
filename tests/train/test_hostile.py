#!/usr/bin/env python3
"""The second hostile battery (issue 43): commands that once destroyed a user's file or used tampered data
without a word. Every case expects a non-zero exit, a message naming the file and field, every file intact, and
a rerun that works. Run by ctest (HSIPIPE_BIN, HSIPIPE_SOURCE_DIR set); scripts/hostile_battery.sh prints the
same cases as a table.

  1  no command overwrites what the user did not name: export --out onto a checkpoint, an existing file,
     a cache; predict --name ../x and [scene.../x]; a second predict of one name (--force replaces it); folds
     --out over another file (the same bytes again are no loss); synth over a scene; cog OUT = IN
  2  a checkpoint is tied to its run and fold: another fold's (predict --fold, --ensemble, export, report)
     and another seed's checkpoint are refused naming meta.fold / meta.config.seed
  3  a live run is locked: a second train into a fold being trained is refused naming the holder; a killed
     holder's lock is taken over
  4  manifest.json and preprocessing.json are sealed: an edited statistics.shift or label_values stops train,
     predict and export (manifest_xxh3, record_xxh3); the seal is reproduced in Python (core/seal.hpp)
  5  sizes are checked at open: scenes[0].rows = 4e9 (seal recomputed) is refused by train before any fold;
     a label of 70000 is refused by decode, naming the label file
  6  --threads / --prefetch beyond their bounds are ConfigErrors; a thread the system refuses is an error
  7  /dev/zero, /dev/urandom and folders where a file is meant are refused at once
  9  train --out CACHE; --batch beyond 2^31; a scene.tif beside scene.hdr is read as the TIFF; SIGTERM during
     decode says so; messages: a negative manifest value, a data file that is a folder, binary header bytes
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

BIN = os.environ["HSIPIPE_BIN"]
SRC = os.environ["HSIPIPE_SOURCE_DIR"]
FAILS = []


def run(args, ranks=1, env=None, cwd=None, timeout=600):
    cmd = ([] if ranks == 1 else ["mpiexec", "-n", str(ranks), "--oversubscribe"]) + [BIN] + args
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=cwd, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def must(args, **kw):
    rc, out = run(args, **kw)
    if rc != 0:
        sys.exit(f"FAIL (set-up): hsipipe {' '.join(args)}: exit {rc}\n{out}")
    return out


def check(cond, what, log=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)
        if log:
            print("     " + log.strip().replace("\n", "\n     ")[-1500:])


def refused(args, want_rc, words, what, **kw):
    """Runs hsipipe ARGS; checks the exit code (an int, or a tuple of accepted ones) and that every word is in
    the message."""
    rc, out = run(args, **kw)
    ok_rc = rc in want_rc if isinstance(want_rc, tuple) else rc == want_rc
    check(ok_rc and all(w in out for w in words), f"{what}: exit {rc}, message names {words}", out)
    return out


def digest(path):
    with open(path, "rb") as f:
        return f.read()


def seal(text, key):
    """core/seal.hpp's seal, recomputed in Python: the 16 zeros in, XXH3-64 of the text, the hex digits out."""
    import xxhash
    pat = '\n "' + key + '": "'
    at = text.index(pat) + len(pat)
    zeroed = text[:at] + "0" * 16 + text[at + 16:]
    return zeroed[:at] + xxhash.xxh3_64_hexdigest(zeroed.encode()) + zeroed[at + 16:]


def edit_json(path, change, reseal=None):
    with open(path) as f:
        j = json.load(f)
    change(j)
    text = json.dumps(j, indent=1) + "\n"
    if reseal:
        text = seal(text, reseal)
    with open(path, "w") as f:
        f.write(text)


def set_up(w):
    must(["synth", "--out", f"{w}/scene", "--rows", "30", "--cols", "30", "--bands", "20", "--classes", "4", "--seed", "5"])
    must(["decode", "--scene", f"{w}/scene/scene.hdr", "--labels", f"{w}/scene/labels.hdr", "--out", f"{w}/cache",
          "--backend", "npy", "--no-progress"])
    must(["folds", "--cache", f"{w}/cache", "--k", "3", "--seed", "7", "--out", f"{w}/folds.json"])
    tr = ["--cache", f"{w}/cache", "--folds", f"{w}/folds.json", "--model", "mlp", "--epochs", "1", "--batch", "16", "--deterministic"]
    must(["train"] + tr + ["--fold", "all", "--out", f"{w}/run"])
    must(["train"] + tr + ["--fold", "0", "--seed", "2", "--out", f"{w}/run_seed2"])
    return tr


def item1(w, tr):
    ck = f"{w}/run/fold-1/checkpoint.pt"
    before = digest(ck)
    refused(["export", "--run", f"{w}/run", "--fold", "1", "--out", ck, "--force"], 2, ["checkpoint.pt", "training run"],
            "1 export --out onto the fold's own checkpoint (--force or not)")
    check(digest(ck) == before, "1 the checkpoint is intact")
    with open(f"{w}/notes.txt", "w") as f:
        f.write("my notes\n")
    refused(["export", "--run", f"{w}/run", "--fold", "1", "--out", f"{w}/notes.txt"], 2, ["notes.txt", "--force"],
            "1 export --out onto an existing file")
    check(digest(f"{w}/notes.txt") == b"my notes\n", "1 notes.txt is intact")
    rc, out = run(["export", "--run", f"{w}/run", "--fold", "1", "--out", f"{w}/notes.txt", "--force"])
    check(rc == 0 and digest(f"{w}/notes.txt") != b"my notes\n", "1 export --force replaces it", out)
    refused(["export", "--run", f"{w}/run", "--fold", "1", "--out", f"{w}/cache/model.pt"], 2, ["cache"],
            "1 export --out into a cache")
    check(not os.path.exists(f"{w}/cache/model.pt"), "1 nothing written into the cache")
    # predict names are file stems
    os.makedirs(f"{w}/deep/maps")
    pr = ["predict", "--run", f"{w}/run", "--fold", "0", "--scene", f"{w}/scene/scene.hdr"]
    refused(pr + ["--name", "../../victim", "--out", f"{w}/deep/maps"], 2, ["--name", "../../victim", "file stem"],
            "1 predict --name ../../victim")
    with open(f"{w}/p.ini", "w") as f:
        f.write(f"[scene.../../x]\npath = {w}/scene/scene.hdr\n")
    refused(["predict", "--config", f"{w}/p.ini", "--run", f"{w}/run", "--fold", "0", "--out", f"{w}/deep/maps"], 2,
            ["../../x"], "1 predict with an INI [scene.../../x]")
    check(not [f for f in os.listdir(w) if f.startswith(("victim", "x_"))] and not os.listdir(f"{w}/deep/maps"),
          "1 nothing written outside (or inside) --out")
    must(pr + ["--name", "s", "--out", f"{w}/maps"])
    tif = digest(f"{w}/maps/s_class.tif")
    refused(pr + ["--name", "s", "--out", f"{w}/maps"], 2, ["s_class.tif", "--force"], "1 a second predict of one name")
    check(digest(f"{w}/maps/s_class.tif") == tif, "1 the first map is intact")
    rc, out = run(pr + ["--name", "s", "--out", f"{w}/maps", "--force"])
    check(rc == 0, "1 predict --force replaces the scene's maps", out)
    refused(pr + ["--name", "s", "--out", f"{w}/run/fold-0/maps"], 2, ["training run"], "1 predict --out inside a run's fold")
    # folds: another file refused, the same bytes again accepted
    fo = ["folds", "--cache", f"{w}/cache", "--k", "3", "--seed", "7"]
    rc, out = run(fo + ["--out", f"{w}/folds.json"])
    check(rc == 0, "1 folds rerun writing the same bytes: accepted", out)
    refused(fo + ["--out", f"{w}/notes.txt"], 2, ["notes.txt", "--force"], "1 folds --out over another file")
    refused(fo + ["--out", f"{w}/run/preprocessing.json", "--force"], 2, ["training run"], "1 folds --out onto a run's record")
    # synth over a scene, cog OUT = IN
    refused(["synth", "--out", f"{w}/scene", "--rows", "8", "--cols", "8", "--bands", "4"], 2, ["scene.hdr", "--force"],
            "1 synth over an existing scene")
    check(digest(f"{w}/scene/scene.hdr").find(b"lines = 30") >= 0, "1 the scene is intact")
    must(["cog", f"{w}/scene/scene.hdr", f"{w}/scene.tif"])
    refused(["cog", f"{w}/scene.tif", f"{w}/scene.tif", "--force"], 2, ["is IN"], "1 cog OUT = IN")
    refused(["cog", f"{w}/scene/scene.hdr", f"{w}/scene.tif"], 2, ["--force"], "1 cog onto an existing file")


def item2(w, tr):
    run_dir = f"{w}/run"
    saved = digest(f"{run_dir}/fold-0/checkpoint.pt")
    shutil.copy(f"{run_dir}/fold-1/checkpoint.pt", f"{run_dir}/fold-0/checkpoint.pt")
    refused(["predict", "--run", run_dir, "--fold", "0", "--scene", f"{w}/scene/scene.hdr", "--out", f"{w}/m2"], 3,
            ["fold-0/checkpoint.pt", "meta.fold"], "2 predict --fold 0 with fold 1's checkpoint")
    refused(["predict", "--run", run_dir, "--ensemble", "--scene", f"{w}/scene/scene.hdr", "--out", f"{w}/m2"], 3,
            ["meta.fold"], "2 predict --ensemble with fold 1's checkpoint in fold-0/")
    refused(["export", "--run", run_dir, "--fold", "0", "--out", f"{w}/m2.pt"], 3, ["meta.fold"], "2 export --fold 0")
    refused(["report", run_dir], 3, ["meta.fold"], "2 report")
    check(not os.path.exists(f"{w}/m2") and not os.path.exists(f"{w}/m2.pt"), "2 nothing written")
    shutil.copy(f"{w}/run_seed2/fold-0/checkpoint.pt", f"{run_dir}/fold-0/checkpoint.pt")
    refused(["predict", "--run", run_dir, "--fold", "0", "--scene", f"{w}/scene/scene.hdr", "--out", f"{w}/m2"], 3,
            ["meta.config.seed"], "2 predict with another seed's checkpoint")
    refused(["report", run_dir], 3, ["meta.config.seed"], "2 report with another seed's checkpoint")
    with open(f"{run_dir}/fold-0/checkpoint.pt", "wb") as f:
        f.write(saved)
    rc, out = run(["predict", "--run", run_dir, "--ensemble", "--scene", f"{w}/scene/scene.hdr", "--out", f"{w}/m2"])
    check(rc == 0, "2 with its own checkpoint back, the ensemble maps", out)
    refused(["train"] + tr + ["--fold", "1", "--lr", "0.01", "--force", "--out", run_dir], 2, ["--lr", "0.01", "run.config.lr"],
            "2 a fold trained into the run with another --lr")


def item3(w, tr):
    env = {"HSIPIPE_TEST_STEP_DELAY_MS": "30"}
    args = [BIN, "train"] + [a if a != "1" else "200" for a in tr] + ["--fold", "2", "--out", f"{w}/live"]
    live = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **env})
    for _ in range(600):
        if os.path.exists(f"{w}/live/fold-2/epochs.jsonl"):
            break
        time.sleep(0.05)
    for flag in ("--resume", "--force"):
        refused(["train"] + [a if a != "1" else "200" for a in tr] + ["--fold", "2", flag, "--out", f"{w}/live"], 1,
                ["fold-2.lock", "another hsipipe train", "pid " + str(live.pid)], f"3 train {flag} into a fold being trained")
    live.kill()
    live.wait()
    check(os.path.exists(f"{w}/live/fold-2.lock"), "3 the killed holder left its lock file")
    rc, out = run(["train"] + tr + ["--fold", "2", "--force", "--out", f"{w}/live"])
    check(rc == 0 and not os.path.exists(f"{w}/live/fold-2.lock"), "3 the next train takes the stale lock over and removes it", out)
    lines = open(f"{w}/live/fold-2/epochs.jsonl").read().splitlines()
    check(len(lines) == 1, f"3 epochs.jsonl holds the one epoch trained ({len(lines)} lines)")


def item4(w, tr):
    shutil.copytree(f"{w}/cache", f"{w}/cache_e")
    edit_json(f"{w}/cache_e/manifest.json", lambda j: j["statistics"]["shift"].__setitem__(0, j["statistics"]["shift"][0] + 1))
    refused(["train"] + [a if a != f"{w}/cache" else f"{w}/cache_e" for a in tr] + ["--fold", "0", "--out", f"{w}/r4"], 3,
            ["cache_e/manifest.json", "manifest_xxh3"], "4 train on a cache whose statistics.shift[0] was edited")
    check(not os.path.exists(f"{w}/r4"), "4 no run made")
    refused(["verify", f"{w}/cache_e"], (3, 5), ["manifest"], "4 verify refuses it too")
    shutil.copytree(f"{w}/run", f"{w}/run_e")
    edit_json(f"{w}/run_e/preprocessing.json", lambda j: j["manifest"]["label_values"].append(9))
    for cmd in (["predict", "--run", f"{w}/run_e", "--fold", "0", "--scene", f"{w}/scene/scene.hdr", "--out", f"{w}/m4"],
                ["export", "--run", f"{w}/run_e", "--fold", "0", "--out", f"{w}/m4.pt"]):
        refused(cmd, 3, ["preprocessing.json", "record_xxh3"], f"4 {cmd[0]} with preprocessing.json's label_values edited")
    # the seal as documented, recomputed in Python, is the one hsipipe wrote
    text = open(f"{w}/cache/manifest.json").read()
    check(seal(text, "manifest_xxh3") == text, "4 the manifest's seal recomputed in Python (xxhash) is hsipipe's")
    prov = json.load(open(f"{w}/run/preprocessing.json"))["run"]
    check(prov["data_checksum"] == json.load(open(f"{w}/cache/manifest.json"))["data_checksum"],
          "4 the run records its identity (data_checksum) in preprocessing.json")


def item5(w, tr):
    shutil.copytree(f"{w}/cache", f"{w}/cache_r")
    edit_json(f"{w}/cache_r/manifest.json", lambda j: j["scenes"][0].__setitem__("rows", 4000000000), reseal="manifest_xxh3")
    for cmd, what in ((["folds", "--cache", f"{w}/cache_r", "--k", "3", "--out", f"{w}/f5.json"], "folds"),
                      (["train"] + [a if a != f"{w}/cache" else f"{w}/cache_r" for a in tr] + ["--fold", "0", "--out", f"{w}/r5"], "train")):
        refused(cmd, 3, ["cache_r/manifest.json", "scenes[0].rows", "4000000000"], f"5 {what}: scenes[0].rows = 4e9 (resealed)")
    check(not os.path.exists(f"{w}/r5"), "5 train made no run (refused before fold 0)")
    # a label raster with 70000
    lab = np.fromfile(f"{w}/scene/labels.img", dtype=np.uint8).reshape(30, 30).astype(np.int32)
    lab[3, 4] = 70000
    lab.tofile(f"{w}/big_labels.img")
    with open(f"{w}/big_labels.hdr", "w") as f:
        f.write("ENVI\nsamples = 30\nlines = 30\nbands = 1\nheader offset = 0\nfile type = ENVI Standard\n"
                "data type = 3\ninterleave = bsq\nbyte order = 0\n")
    refused(["decode", "--scene", f"{w}/scene/scene.hdr", "--labels", f"{w}/big_labels.hdr", "--out", f"{w}/c5", "--no-progress"],
            3, ["big_labels.hdr", "label", "70000", "65534"], "5 decode of a label 70000")
    check(not os.path.exists(f"{w}/c5"), "5 no cache made")


def item6(w, tr):
    refused(["train"] + tr + ["--fold", "0", "--threads", "1000", "--out", f"{w}/r6"], 2, ["--threads", "1000"], "6 --threads 1000")
    refused(["train"] + tr + ["--fold", "0", "--prefetch", "1000000000", "--out", f"{w}/r6"], 2, ["--prefetch"], "6 --prefetch 1e9")
    # threads the system refuses: 256 producers with 256 MiB stacks under a 12 GiB address-space limit
    shell = (f"ulimit -s 262144; ulimit -v 12000000; exec {BIN} train " + " ".join(tr) + f" --fold 0 --threads 256 --out {w}/r6")
    p = subprocess.run(["bash", "-c", shell], capture_output=True, text=True)
    out = p.stdout + p.stderr
    check(p.returncode in (1, 2) and "--threads 256" in out and "terminate called" not in out,
          f"6 a thread the system refuses: an error naming --threads, not an abort (exit {p.returncode})", out)
    check(not os.path.exists(f"{w}/r6"), "6 no run made")


def item7(w, tr):
    t0 = time.time()
    refused(["train"] + [a if a != f"{w}/folds.json" else "/dev/zero" for a in tr] + ["--fold", "0", "--out", f"{w}/r7"], 4,
            ["/dev/zero", "not a regular file"], "7 train --folds /dev/zero")
    refused(["folds", "--check", "/dev/urandom", "--cache", f"{w}/cache"], 4, ["/dev/urandom", "not a regular file"],
            "7 folds --check /dev/urandom")
    refused(["folds", "--check", f"{w}/scene", "--cache", f"{w}/cache"], 4, ["is a folder"], "9 a folds path that is a folder")
    refused(["decode", "--config", "/dev/zero", "--out", f"{w}/c7"], 2, ["/dev/zero", "--config"], "7 --config /dev/zero")
    check(time.time() - t0 < 60, "7 each refused at once")


def item9(w, tr):
    refused(["train"] + tr + ["--fold", "0", "--out", f"{w}/cache"], 2, ["lies in the cache"], "9 train --out CACHE")
    refused(["train"] + tr + ["--fold", "0", "--out", f"{w}/cache/run"], 2, ["lies in the cache"], "9 train --out CACHE/run")
    refused(["train"] + tr + ["--fold", "0", "--batch", "1000000000000", "--out", f"{w}/r9"], 2, ["--batch"], "9 --batch 1e12")
    rc, out = run(["train"] + [a if a != "16" else "100000" for a in tr] + ["--fold", "0", "--out", f"{w}/r9"])
    m = json.load(open(f"{w}/r9/fold-0/metrics.json")) if rc == 0 else {}
    eff = m.get("train", {}).get("batch_effective")
    check(rc == 0 and eff is not None and eff < 100000 and "exceeds" in out,
          f"9 --batch 100000 over a small fold: one step, batch_effective {eff} recorded", out)
    # a GeoTIFF named explicitly, with an ENVI header of its stem beside it, is read as the TIFF
    shutil.copy(f"{w}/scene/scene.hdr", f"{w}/scene.hdr")
    rc_t, out_t = run(["info", f"{w}/scene.tif"])
    rc_e, out_e = run(["info", f"{w}/scene/scene.hdr"])
    check(rc_t == 0 and "GTiff" in out_t or "GeoTIFF" in out_t or "GDAL" in out_t,
          "9 info scene.tif beside scene.hdr: read by GDAL as the TIFF", out_t)
    # SIGTERM during decode
    p = subprocess.Popen([BIN, "decode", "--scene", f"{w}/scene/scene.hdr", "--labels", f"{w}/scene/labels.hdr", "--out",
                          f"{w}/c9", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, "HSIPIPE_TEST_DELAY_PUBLISH_MS": "4000"})
    time.sleep(1.5)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    check(p.returncode == -signal.SIGTERM and "interrupted by SIGTERM" in out and "run the same command again" in out,
          f"9 SIGTERM during decode says so (status {p.returncode})", out)
    check(not os.path.exists(f"{w}/c9"), "9 nothing published")
    rc, out = run(["decode", "--scene", f"{w}/scene/scene.hdr", "--labels", f"{w}/scene/labels.hdr", "--out", f"{w}/c9", "--no-progress"])
    check(rc == 0 and not [f for f in os.listdir(w) if f.startswith("c9.")], "9 the rerun decodes and removes the lock and copy", out)
    # messages
    shutil.copytree(f"{w}/cache", f"{w}/cache_n")
    edit_json(f"{w}/cache_n/manifest.json", lambda j: j.__setitem__("n_bands", -5), reseal="manifest_xxh3")
    refused(["folds", "--cache", f"{w}/cache_n", "--k", "3", "--out", f"{w}/f9.json"], 3, ["n_bands", "-5"],
            "9 a negative manifest value is printed as it is")
    os.makedirs(f"{w}/dirscene/scene.img")
    shutil.copy(f"{w}/scene/scene.hdr", f"{w}/dirscene/scene.hdr")
    refused(["info", f"{w}/dirscene/scene.hdr"], (3, 4), ["scene.img", "is a folder"], "9 a data file that is a folder")
    with open(f"{w}/bin.hdr", "wb") as f:
        f.write(b"ENVI\nsamples = 3\x01\x02\x1b[31m\xff\xfe\nlines = 2\n")
    rc, out = run(["info", f"{w}/bin.hdr"])
    check(rc != 0 and "\x1b" not in out and "\x01" not in out, "9 binary header bytes are not echoed raw", out)


def main():
    w = tempfile.mkdtemp(prefix="hsipipe-hostile-")
    try:
        tr = set_up(w)
        for item in (item1, item2, item3, item4, item5, item6, item7, item9):
            item(w, tr)
    finally:
        if os.environ.get("HSIPIPE_TEST_KEEP") != "1":
            shutil.rmtree(w, ignore_errors=True)
    print(f"{len(FAILS)} failed" if FAILS else "PASS")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
