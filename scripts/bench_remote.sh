#!/usr/bin/env bash
# Remote decode benchmark (not a test): decodes one scene from a local COG and from nginx on
# 127.0.0.1 with `limit_rate` emulating 10 Gbps, 1 Gbps and 200 Mbps links, and prints per run:
# wall time, decoded throughput, bytes fetched (nginx access log) vs bytes decoded, and the
# bandwidth bound of BACKGROUND.md (seed 002; a 20 Mbps row shows a bandwidth-limited run): a link of B bit/s delivers B/8 bytes/s, so decoding
# cannot run faster than (B/8) x decoded/fetched bytes per second; it is bandwidth-limited when the
# fetch time fetched/(B/8) is most of the wall time.
#
#   scripts/bench_remote.sh [ROWS COLS BANDS]        (default 512 512 96, uint16; RANKS=2 by default)
# Environment: HSIPIPE_BIN (default build/hsipipe), RANKS, LAYOUT (pixel), PATCH (7), TILE (16),
# BENCH_DIR (default a temporary directory, removed at the end).
# Note: nginx's limit_rate is per connection; GDAL may open parallel connections (multi-range reads,
# and one per rank), so the aggregate can exceed the emulated link. The table says how many requests ran.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${1:-512} COLS=${2:-512} BANDS=${3:-96}
RANKS=${RANKS:-2} PATCH=${PATCH:-7} TILE=${TILE:-16} LAYOUT=${LAYOUT:-pixel}
BIN=${HSIPIPE_BIN:-build/hsipipe}
PY=/usr/bin/python3
[ -x "$BIN" ] || { echo "bench_remote: $BIN not found (build first: scripts/setup.sh)" >&2; exit 2; }
BIN=$(readlink -f "$BIN")
OWN_DIR=0
if [ -z "${BENCH_DIR:-}" ]; then BENCH_DIR=$(mktemp -d /tmp/hsipipe-bench-remote-XXXXXX); OWN_DIR=1; fi
cleanup() { [ "$OWN_DIR" = 1 ] && rm -rf "$BENCH_DIR"; return 0; }
trap cleanup EXIT
export HSIPIPE_BIN=$BIN

LAYOUT=$LAYOUT "$PY" - "$BENCH_DIR" "$ROWS" "$COLS" "$BANDS" "$RANKS" "$PATCH" "$TILE" <<'PYEOF'
import os, subprocess, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "remote"))
import servers  # noqa: E402
from osgeo import gdal  # noqa: E402
gdal.UseExceptions()

d, rows, cols, bands, ranks, patch, tile = sys.argv[1], *map(int, sys.argv[2:])
bin_ = os.environ["HSIPIPE_BIN"]
layout = os.environ.get("LAYOUT", "pixel")
www = os.path.join(d, "www"); os.makedirs(www, exist_ok=True)

# A smooth synthetic uint16 scene with noise (compresses like real reflectance) and sparse labels.
src = os.path.join(d, "scene.tif")
rng = np.random.default_rng(7)
yy, xx = np.mgrid[0:rows, 0:cols]
ds = gdal.GetDriverByName("GTiff").Create(src, cols, rows, bands, gdal.GDT_UInt16, ["INTERLEAVE=BAND", "TILED=YES"])
for b in range(bands):
    a = 3000 + 900 * np.sin(xx / 23.0 + b / 11.0) + 700 * np.cos(yy / 17.0 - b / 13.0) + rng.normal(0, 30, (rows, cols))
    ds.GetRasterBand(b + 1).WriteArray(np.clip(a, 1, 65535).astype(np.uint16))
ds = None
lab = np.zeros((rows, cols), np.int16)
for k in range(1, 9):
    r0, c0 = rng.integers(0, rows - rows // 4), rng.integers(0, cols - cols // 4)
    lab[r0:r0 + rows // 5, c0:c0 + cols // 5] = k
lab[rng.random((rows, cols)) < 0.5] = 0
labels = os.path.join(www, "labels.tif")
ds = gdal.GetDriverByName("GTiff").Create(labels, cols, rows, 1, gdal.GDT_Int16, ["TILED=YES"])
ds.GetRasterBand(1).WriteArray(lab); ds = None
cog = os.path.join(www, "scene.tif")
subprocess.run([bin_, "cog", src, cog, "--tile", str(tile), "--compress", "deflate", "--predictor"], check=True)
size = os.path.getsize(cog)
n_samples = int((lab != 0).sum())

def decode(scene, out):
    cmd = ["mpiexec", "-n", str(ranks), "--oversubscribe", bin_, "decode", "--scene", scene, "--labels", labels,
           "--layout", layout, "--ignore-label", "0", "--backend", "npy", "--out", out]
    if layout != "pixel":
        cmd += ["--patch", str(patch)]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"decode failed:\n{r.stdout}")
    return dt, r.stdout

# What the readers decode: each row of the scene once as float32 (the cache written is smaller for
# pixel layouts with sparse labels, larger for patch layouts).
decoded = rows * cols * bands * 4
rows_out = []
t_local, _ = decode(cog, os.path.join(d, "local"))
rows_out.append(("local file", None, t_local, 0, 0))
for name, bps in (("10 Gbps", 10e9), ("1 Gbps", 1e9), ("200 Mbps", 200e6), ("20 Mbps", 20e6)):
    with servers.Nginx(www, limit_rate=bps / 8) as ng:
        t, _ = decode(f"{ng.url}/scene.tif", os.path.join(d, name.replace(" ", "")))
        fetched, requests = 0, 0
        for line in ng.access_log():
            p = line.split()
            if len(p) >= 4 and p[1] == "/scene.tif":
                fetched += int(p[3]); requests += 1
    rows_out.append((name, bps, t, fetched, requests))

print(f"\nscene {rows} x {cols} x {bands} uint16, COG {size} bytes (tiles {tile}, deflate + predictor), "
      f"{n_samples} samples, layout {layout}, {ranks} ranks, {decoded/1e6:.1f} MB decoded (float32 rows)\n")
hdr = ("| source | wall s | decoded MB/s | fetched MB | requests | fetched / file | B/8 MB/s | "
       "fetch time at B/8 s | bound MB/s decoded | limited by |")
print(hdr)
print("|" + "---|" * 10)
for name, bps, t, fetched, req in rows_out:
    rate = decoded / t / 1e6
    if bps is None:
        print(f"| {name} | {t:.2f} | {rate:.1f} | - | - | - | - | - | - | CPU/disk |")
        continue
    b8 = bps / 8
    tf = fetched / b8
    bound = b8 * decoded / fetched / 1e6 if fetched else float("inf")
    limited = "bandwidth" if tf > 0.5 * t else "CPU/latency"
    print(f"| {name} | {t:.2f} | {rate:.1f} | {fetched/1e6:.2f} | {req} | {fetched/size:.2f} | {b8/1e6:.1f} | "
          f"{tf:.2f} | {bound:.1f} | {limited} |")
PYEOF
