#!/usr/bin/python3
"""End-to-end remote decoding against real loopback servers (tests/remote/fixture.py):

  1. `hsipipe cog` errors: a missing object (404), a 403, and S3 with a wrong secret give a clear
     error naming the URL, a non-zero exit, no secret in the output, and nothing written.
  2. `hsipipe decode` of the COG over HTTP (nginx) on 1 and 3 ranks equals decoding the local COG
     byte for byte (samples.npy, labels.npy, coords.npy and the manifest's data_checksum); the bytes
     nginx sent (its access log) stay well under file size x ranks.
  3. The same over the 503 and the connection-reset proxies (retries counted by the proxy), and from
     s3rver with s3:// paths.
  4. A missing remote scene makes decode fail without creating the cache.
  5. `hsipipe predict` of the http:// scene writes every output and the local file's map (issue 43 item 8).
"""
import glob
import json
import os
import re
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture  # noqa: E402
import servers  # noqa: E402

FAILS = []


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        FAILS.append(msg)


def mpiexec():
    return os.environ.get("MPIEXEC") or "mpiexec"


def decode(scene, labels, out, ranks, env):
    cmd = [mpiexec(), "-n", str(ranks), "--oversubscribe", fixture.hsipipe(), "decode",
           "--scene", scene, "--labels", labels, "--layout", "patch", "--patch", "5",
           "--ignore-label", "0", "--backend", "npy", "--out", out]
    return fixture.run(cmd, env=env, check=False, timeout=300)


def cache_arrays(d):
    out = {}
    for name in ("samples.npy", "labels.npy", "coords.npy"):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    with open(os.path.join(d, "manifest.json")) as f:
        out["manifest"] = json.load(f)
    return out


def nginx_bytes(log_lines):
    total = 0
    for line in log_lines:
        parts = line.split()
        if len(parts) >= 4 and parts[0] in ("GET", "HEAD"):
            total += int(parts[3])
    return total


def cog_errors(w, env):
    for url, expect in ((w.http_missing, "404"), (w.http_forbidden, "403")):
        out = os.path.join(w.dir, "err.tif")
        r = fixture.run([fixture.hsipipe(), "cog", url, out], env=env, check=False)
        check(r.returncode != 0, f"cog {url}: non-zero exit ({r.returncode})")
        check(url in r.stdout and expect in r.stdout, f"cog {url}: message names the URL and {expect}: {r.stdout.strip()[:300]}")
        check(not glob.glob(out + "*"), f"cog {url}: nothing written")
    if w.s3:
        bad = dict(env)
        bad["AWS_ACCESS_KEY_ID"] = "WRONGKEYID"  # s3rver knows only its own key id: 403
        bad["AWS_SECRET_ACCESS_KEY"] = "WRONG-SECRET-VALUE-42"
        out = os.path.join(w.dir, "err_s3.tif")
        r = fixture.run([fixture.hsipipe(), "cog", w.s3, out], env=bad, check=False)
        check(r.returncode != 0, f"cog {w.s3} with a wrong secret: non-zero exit ({r.returncode})")
        check(w.s3 in r.stdout and "403" in r.stdout, f"cog s3 wrong secret: names the URL and 403: {r.stdout.strip()[:300]}")
        check("WRONG-SECRET-VALUE-42" not in r.stdout, "cog s3 wrong secret: the secret is not printed")
        check(not glob.glob(out + "*"), "cog s3 wrong secret: nothing written")
        out = os.path.join(w.dir, "err_s3_missing.tif")
        r = fixture.run([fixture.hsipipe(), "cog", w.s3_missing, out], env=env, check=False)
        check(r.returncode != 0 and w.s3_missing in r.stdout, f"cog missing s3 object: clear error: {r.stdout.strip()[:300]}")
        check(not glob.glob(out + "*"), "cog missing s3 object: nothing written")


def predict_remote(d, w, env):
    """Issue 43 item 8: `hsipipe predict` of an http:// scene maps like the local file (its ENVI output once
    failed, 'create (ENVI)', under the remote reads' GDAL_DISABLE_READDIR_ON_OPEN, leaving a lone GeoTIFF)."""
    h = fixture.hsipipe()
    cache = os.path.join(d, "local_np1")
    run = os.path.join(d, "run_remote")
    steps = [[h, "folds", "--cache", cache, "--k", "2", "--seed", "3", "--out", os.path.join(d, "rfolds.json")],
             [h, "train", "--cache", cache, "--folds", os.path.join(d, "rfolds.json"), "--fold", "0", "--model", "mlp",
              "--epochs", "1", "--batch", "64", "--deterministic", "--out", run]]
    for cmd in steps:
        r = fixture.run(cmd, env=env, check=False, timeout=300)
        check(r.returncode == 0, f"{cmd[1]} for the remote predict: exit {r.returncode}\n{r.stdout[-2000:]}")
        if r.returncode != 0:
            return
    maps = {}
    for name, scene in (("local", w.cog), ("http", w.http)):
        out = os.path.join(d, "maps_" + name)
        r = fixture.run([h, "predict", "--run", run, "--fold", "0", "--scene", scene, "--name", "s", "--out", out],
                        env=env, check=False, timeout=300)
        check(r.returncode == 0, f"predict of the {name} scene: exit {r.returncode}\n{r.stdout[-2000:]}")
        files = sorted(os.listdir(out)) if os.path.isdir(out) else []
        check(files == ["s_class.hdr", "s_class.img", "s_class.tif", "s_predict.json", "s_preview.png"],
              f"predict of the {name} scene: every output, none left half-written ({files})")
        if os.path.exists(os.path.join(out, "s_class.img")):
            with open(os.path.join(out, "s_class.img"), "rb") as f:
                maps[name] = f.read()
    check(len(maps) == 2 and maps["local"] == maps["http"], "the http scene's map equals the local file's, byte for byte")


def main():
    try:
        servers.find_nginx()
        servers.ensure_s3rver()
    except servers.Unavailable as e:
        servers.skip_or_fail(str(e))
    with tempfile.TemporaryDirectory(prefix="hsipipe-remote-decode-") as d:
        with fixture.remote_world(d) as w:
            env = dict(w.env)
            cog_errors(w, env)

            probe = fixture.run([fixture.hsipipe(), "decode", "--help"], check=False)
            if probe.returncode != 0:
                if FAILS:
                    return 1
                servers.skip_or_fail("`hsipipe decode` is not built yet: decode cases not run")

            size = os.path.getsize(w.cog) + os.path.getsize(w.labels_cog)
            ref = {}
            for ranks in (1, 3):
                out = os.path.join(d, f"local_np{ranks}")
                r = decode(w.cog, w.labels_cog, out, ranks, env)
                check(r.returncode == 0, f"local decode np{ranks}: exit {r.returncode}\n{r.stdout[-3000:]}")
                if r.returncode != 0:
                    return 1
                ref[ranks] = cache_arrays(out)
            check(ref[1]["manifest"]["data_checksum"] == ref[3]["manifest"]["data_checksum"],
                  "local decode: np1 and np3 give one data_checksum")

            cases = [("http", w.http, w.http_labels, None), ("http-503", w.fault503, w.http_labels, w.proxy503),
                     ("http-reset", w.faultreset, w.http_labels, w.proxyreset),
                     ("s3", w.s3, f"s3://{fixture.BUCKET}/labels.tif", None)]
            w.s3_server.put(w.labels_cog, "labels.tif")
            for name, scene, labels, proxy in cases:
                for ranks in (1, 3):
                    if name != "http" and ranks == 1:
                        continue  # one rank count per variant keeps the test short; http does both
                    out = os.path.join(d, f"{name}_np{ranks}")
                    before_log = len(w.nginx.access_log())
                    faults_before = proxy.faults if proxy else 0
                    r = decode(scene, labels, out, ranks, env)
                    check(r.returncode == 0, f"{name} decode np{ranks}: exit {r.returncode}\n{r.stdout[-3000:]}")
                    if r.returncode != 0:
                        continue
                    got = cache_arrays(out)
                    for k in ("samples.npy", "labels.npy", "coords.npy"):
                        check(got[k] == ref[ranks][k], f"{name} decode np{ranks}: {k} equals the local decode byte for byte")
                    check(got["manifest"]["data_checksum"] == ref[ranks]["manifest"]["data_checksum"],
                          f"{name} decode np{ranks}: data_checksum equals the local one")
                    text = json.dumps(got["manifest"]["sources"])
                    check(scene in text, f"{name} decode np{ranks}: the manifest records the URL")
                    if name == "http":
                        # One rank needs every row here (labels everywhere): about the files once, no
                        # tile fetched twice. Three ranks: each its rows plus halo, well under 3 files.
                        sent = nginx_bytes(w.nginx.access_log()[before_log:])
                        bound = 1.25 * size if ranks == 1 else 0.75 * size * ranks
                        check(0 < sent < bound, f"http decode np{ranks}: nginx sent {sent} bytes for scene + labels "
                                                f"({size} bytes) < {bound:.0f}")
                        m = re.search(r"remote: (\d+) requests, fetched", r.stdout)
                        check(m is not None and int(m.group(1)) > 0,
                              f"http decode np{ranks}: the summary reports remote statistics")
                        v = fixture.run([fixture.hsipipe(), "verify", out], env=env, check=False)
                        check(v.returncode == 0 and v.stdout.strip().endswith("OK"),
                              f"http decode np{ranks}: verify re-checks the remote sources and accepts them: {v.stdout.strip()[-300:]}")
                        per_rank = [float(x) for x in re.findall(r"remote rank \d+: fetched (\d+) B", r.stdout)]
                        check(len(per_rank) == ranks and all(0 < b < os.path.getsize(w.cog) * (1.1 if ranks == 1 else 0.75)
                                                             for b in per_rank),
                              f"http decode np{ranks}: each rank fetched only part of the COG: {per_rank}")
                    if proxy:
                        check(proxy.faults > faults_before,
                              f"{name} decode np{ranks}: the proxy injected {proxy.faults - faults_before} faults")
                        m = re.search(r"retries[ =:]+(\d+)", r.stdout)
                        check(m is not None and int(m.group(1)) > 0,
                              f"{name} decode np{ranks}: retries counted in the summary ({m.group(0) if m else 'none'})")

            predict_remote(d, w, env)

            out = os.path.join(d, "missing_cache")
            r = decode(w.http_missing, w.http_labels, out, 1, env)
            check(r.returncode != 0, f"decode of a missing URL fails (exit {r.returncode})")
            check(w.http_missing in r.stdout, "decode of a missing URL names it")
            check(not os.path.exists(out) and not glob.glob(out + "*"), "decode of a missing URL writes nothing")
    print(f"{'FAILED' if FAILS else 'passed'}: {len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
