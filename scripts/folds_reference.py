#!/usr/bin/env python3
"""Independent reference implementation of docs/FOLDS.md (format 1, algorithm 1).

Pure Python 3 standard library (no numpy): written from the specification, not from the C++ code,
so that agreement between the two is evidence that the text specifies the folds completely.

Input, one of:
  --cache DIR        an npy-backend cache: manifest.json, labels.npy, coords.npy (.npy parsed here)
  --samples CSV      a table written by `hsipipe folds --export-samples CSV` (any backend)

  folds_reference.py --cache C --k 5 --seed 42 --strategy spatial --out ref.json
  folds_reference.py --samples S.csv --k 5 --seed 42 --strategy stratified --compare hsipipe.json
  folds_reference.py --selftest          prints the generator reference values of docs/FOLDS.md

--compare FILE exits 1 (printing the differences) unless FILE has the same fold array, exclusions,
samples_checksum, fingerprint, counts and spatial parameters as this implementation computes.
"""
import argparse
import ast
import hashlib
import json
import os
import struct
import sys

MASK = (1 << 64) - 1
FORMAT_VERSION = 1
ALGORITHM_VERSION = 1


# --- 1-4: generator, bounded integers, shuffle, streams -------------------------------------------
class SplitMix64:
    def __init__(self, seed):
        self.s = seed & MASK

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def bounded(self, n):
        if n < 1:
            raise ValueError("bounded(n) needs n >= 1")
        m = self.next() * n
        lo = m & MASK
        if lo < n:
            t = ((1 << 64) - n) % n
            while lo < t:
                m = self.next() * n
                lo = m & MASK
        return m >> 64


def shuffle(v, g):
    for i in range(len(v) - 1, 0, -1):
        j = g.bounded(i + 1)
        v[i], v[j] = v[j], v[i]


def derive(seed, a, b=0):
    s = (seed ^ ((a * 0xD1B54A32D192ED03) & MASK) ^ ((b * 0x8CB92BA72F3D8DD7) & MASK)) & MASK
    return SplitMix64(s).next()


# --- sample tables --------------------------------------------------------------------------------
class Table:
    def __init__(self, scene, row, col, label, patch, scenes=None, data_checksum=""):
        self.scene, self.row, self.col, self.label = scene, row, col, label
        self.patch = patch
        self.scenes = scenes or []  # [(name, rows, cols)]
        self.data_checksum = data_checksum  # the cache's (informational), "" for a CSV table

    def __len__(self):
        return len(self.label)


def read_npy(path):
    """Returns (descr, shape, list of ints) for a C-order little-endian integer .npy file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise SystemExit(f"{path}: not a .npy file (magic)")
    major = data[6]
    if major == 1:
        hlen = struct.unpack_from("<H", data, 8)[0]
        start = 10
    elif major in (2, 3):
        hlen = struct.unpack_from("<I", data, 8)[0]
        start = 12
    else:
        raise SystemExit(f"{path}: unsupported .npy version {major}")
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header.get("fortran_order"):
        raise SystemExit(f"{path}: fortran_order arrays are not supported")
    descr, shape = header["descr"], tuple(header["shape"])
    fmt = {"<i4": "i", "<i8": "q", "<u4": "I", "|u1": "B", "<i2": "h"}.get(descr)
    if fmt is None:
        raise SystemExit(f"{path}: unsupported descr {descr!r}")
    count = 1
    for d in shape:
        count *= d
    off = start + hlen
    size = struct.calcsize("<" + fmt)
    if len(data) < off + count * size:
        raise SystemExit(f"{path}: shorter than its header says")
    values = list(struct.unpack_from("<%d%s" % (count, fmt), data, off))
    return descr, shape, values


def read_cache(d, patch_override=None):
    with open(os.path.join(d, "manifest.json")) as f:
        man = json.load(f)
    if man.get("backend") != "npy":
        raise SystemExit(f"{d}: backend {man.get('backend')!r}: the reference reads npy caches; "
                         "export the table with `hsipipe folds --cache DIR --export-samples CSV`")
    _, _, labels = read_npy(os.path.join(d, "labels.npy"))
    _, cshape, coords = read_npy(os.path.join(d, "coords.npy"))
    n = len(labels)
    if cshape != (n, 3):
        raise SystemExit(f"{d}/coords.npy: shape {cshape}, expected ({n}, 3)")
    patch = max(1, int(man.get("patch", 1)))
    if patch_override:
        patch = patch_override
    scenes = [(s["name"], s["rows"], s["cols"]) for s in man.get("scenes", [])]
    return Table(coords[0::3], coords[1::3], coords[2::3], labels, patch, scenes, str(man.get("data_checksum", "")))


def read_csv(path, patch_override=None):
    scene, row, col, label = [], [], [], []
    patch, scenes, header_seen = 1, [], False
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                parts = line[1:].strip().split(",")
                if parts[0] == "patch":
                    patch = int(parts[1])
                elif parts[0] == "scene":
                    scenes.append((",".join(parts[4:]), int(parts[2]), int(parts[3])))
                continue
            if not header_seen:
                if line.split(",") != ["sample", "scene", "row", "col", "label"]:
                    raise SystemExit(f"{path}:{lineno}: expected header sample,scene,row,col,label")
                header_seen = True
                continue
            i, s, r, c, lab = (int(x) for x in line.split(","))
            if i != len(label):
                raise SystemExit(f"{path}:{lineno}: sample {i} out of order")
            scene.append(s)
            row.append(r)
            col.append(c)
            label.append(lab)
    if patch_override:
        patch = patch_override
    return Table(scene, row, col, label, patch, scenes)


# --- 5-7: strategies ------------------------------------------------------------------------------
def classes_of(t):
    return sorted({lab for lab in t.label if lab >= 0})


def stratified(t, k, seed):
    fold = [-1] * len(t)
    cursor = 0
    for cls in classes_of(t):
        ids = [i for i in range(len(t)) if t.label[i] == cls]
        shuffle(ids, SplitMix64(derive(seed, 1, cls)))
        for i in ids:
            fold[i] = cursor
            cursor = (cursor + 1) % k
    return fold


def random_split(t, k, seed):
    fold = [-1] * len(t)
    ids = [i for i in range(len(t)) if t.label[i] >= 0]
    shuffle(ids, SplitMix64(derive(seed, 2, 0)))
    for j, i in enumerate(ids):
        fold[i] = j % k
    return fold


def spatial(t, k, seed, block, buffer):
    """Returns (fold, params dict)."""
    part = [i for i in range(len(t)) if t.label[i] >= 0]
    p = t.patch
    block_default = block == 0
    if block_default:
        b = max(8, 4 * p)

        def blocks0(b):
            return len({(t.scene[i], t.row[i] // b, t.col[i] // b) for i in part})

        while b > 1 and blocks0(b) < 4 * k:
            b -= 1
    else:
        b = block
    g = SplitMix64(derive(seed, 3, 0))
    oy = g.bounded(b)
    ox = g.bounded(b)
    classes = classes_of(t)
    cidx = {c: j for j, c in enumerate(classes)}
    blocks = {}
    for i in part:
        key = (t.scene[i], (t.row[i] + oy) // b, (t.col[i] + ox) // b)
        blocks.setdefault(key, []).append(i)
    blist = []
    for key in sorted(blocks):
        members = blocks[key]
        cnt = [0] * len(classes)
        for i in members:
            cnt[cidx[t.label[i]]] += 1
        blist.append((len(members), cnt, members))
    if len(blist) < k:
        raise SystemExit(f"spatial: only {len(blist)} non-empty blocks for k = {k}")
    shuffle(blist, g)
    blist.sort(key=lambda bl: -bl[0])  # Python's sort is stable
    C = [[0] * len(classes) for _ in range(k)]
    S = [0] * k
    fold = [-1] * len(t)
    for total, cnt, members in blist:
        best = min(range(k), key=lambda f: (sum(cnt[c] * C[f][c] for c in range(len(classes))), S[f], f))
        for c in range(len(classes)):
            C[best][c] += cnt[c]
        S[best] += total
        for i in members:
            fold[i] = best
    rb = buffer if buffer >= 0 else p // 2
    return fold, {"patch": p, "block": b, "block_default": block_default, "buffer": rb, "grid_offset": [oy, ox]}


def neighbours(t):
    """Map (scene, row, col) -> sample id."""
    where = {}
    for i in range(len(t)):
        key = (t.scene[i], t.row[i], t.col[i])
        if key in where:
            raise SystemExit(f"samples {where[key]} and {i} share pixel {key}")
        where[key] = i
    return where


def window(t, where, i, r):
    s, r0, c0 = t.scene[i], t.row[i], t.col[i]
    for y in range(r0 - r, r0 + r + 1):
        for x in range(c0 - r, c0 + r + 1):
            j = where.get((s, y, x))
            if j is not None and j != i:
                yield j


def exclusions(t, fold, k, rb, where):
    ex = [set() for _ in range(k)]
    for i in range(len(t)):
        if fold[i] < 0:
            continue
        for j in window(t, where, i, rb):
            if fold[j] >= 0 and fold[j] != fold[i]:
                ex[fold[j]].add(i)
    return [sorted(e) for e in ex]


def leakage(t, fold, k, excluded, where):
    r = t.patch // 2
    exs = [set(e) for e in excluded]
    leaky = [0] * k
    nval = 0
    for i in range(len(t)):
        f = fold[i]
        if f < 0:
            continue
        nval += 1
        for j in window(t, where, i, r):
            if fold[j] >= 0 and fold[j] != f and j not in exs[f]:
                leaky[f] += 1
                break
    return r, leaky, (sum(leaky) / nval if nval else 0.0)


# --- 9: checksums ---------------------------------------------------------------------------------
def samples_checksum(t):
    h = hashlib.sha256()
    h.update(b"HSISAMP1" + struct.pack("<Q", len(t)))
    for i in range(len(t)):
        h.update(struct.pack("<iiii", t.scene[i], t.row[i], t.col[i], t.label[i]))
    return h.hexdigest()


def fingerprint(t, fold, excluded):
    h = hashlib.sha256()
    h.update(b"HSIFOLD1" + struct.pack("<QI", len(t), len(excluded)))
    for i in range(len(t)):
        h.update(struct.pack("<iiiii", t.scene[i], t.row[i], t.col[i], t.label[i], fold[i]))
    for e in excluded:
        h.update(struct.pack("<Q", len(e)))
        for i in e:
            h.update(struct.pack("<Q", i))
    return h.hexdigest()


def validate(t, k):
    """The table and k as FOLDS.md section 0 requires them (the same refusals as hsipipe's)."""
    if k < 2:
        raise SystemExit("k must be >= 2")
    if t.patch < 1:
        raise SystemExit(f"patch side must be >= 1, got {t.patch}")
    for i in range(len(t)):
        if t.scene[i] < 0 or t.row[i] < 0 or t.col[i] < 0:
            raise SystemExit(f"sample {i} has a negative scene/row/col")
        if t.scenes:
            if t.scene[i] >= len(t.scenes):
                raise SystemExit(f"sample {i} names scene {t.scene[i]} of {len(t.scenes)}")
            _, rows, cols = t.scenes[t.scene[i]]
            if t.row[i] >= rows or t.col[i] >= cols:
                raise SystemExit(f"sample {i} at ({t.row[i]}, {t.col[i]}) lies outside scene {t.scene[i]} ({rows} x {cols})")
    participants = sum(1 for lab in t.label if lab >= 0)
    if participants < k:
        raise SystemExit(f"{k} folds need at least as many labeled samples; the table has {participants}")


def make_folds(t, k, seed, strategy, block=0, buffer=-1):
    validate(t, k)
    where = neighbours(t)
    params = {"patch": t.patch}
    if strategy == "stratified":
        fold = stratified(t, k, seed)
        excluded = [[] for _ in range(k)]
    elif strategy == "random":
        fold = random_split(t, k, seed)
        excluded = [[] for _ in range(k)]
    elif strategy == "spatial":
        fold, params = spatial(t, k, seed, block, buffer)
        excluded = exclusions(t, fold, k, params["buffer"], where)
        for f in range(k):  # a fold whose training set the buffer empties is refused (FOLDS.md section 0)
            n_train = sum(1 for g in fold if g >= 0 and g != f) - len(excluded[f])
            if n_train == 0:
                raise SystemExit(f"buffer {params['buffer']}: fold {f} keeps no training sample")
    else:
        raise SystemExit(f"unknown strategy {strategy!r}")
    classes = classes_of(t)
    counts = [[0] * len(classes) for _ in range(k)]
    cidx = {c: j for j, c in enumerate(classes)}
    for i in range(len(t)):
        if fold[i] >= 0:
            counts[fold[i]][cidx[t.label[i]]] += 1
    radius, leaky, frac = leakage(t, fold, k, excluded, where)
    return {
        "format": "hsipipe-folds", "format_version": FORMAT_VERSION, "algorithm_version": ALGORITHM_VERSION,
        "k": k, "seed": seed, "strategy": strategy, "parameters": params, "n_samples": len(t),
        "data_checksum": t.data_checksum,
        "samples_checksum": samples_checksum(t), "fingerprint": fingerprint(t, fold, excluded),
        "classes": classes, "counts": counts, "excluded_counts": [len(e) for e in excluded],
        "leakage": {"radius": radius, "fraction": frac, "leaky_per_fold": leaky},
        "excluded": excluded, "fold": fold,
    }


def compare(ref, path):
    with open(path) as f:
        other = json.load(f)
    diffs = []
    for key in ("k", "seed", "strategy", "n_samples", "samples_checksum", "fingerprint", "classes", "counts",
                "excluded_counts", "excluded", "parameters"):
        if other.get(key) != ref[key]:
            diffs.append(f"{key}: file {str(other.get(key))[:120]} != reference {str(ref[key])[:120]}")
    if other.get("fold") != ref["fold"]:
        n = sum(1 for a, b in zip(other.get("fold", []), ref["fold"]) if a != b)
        diffs.append(f"fold: {n} of {len(ref['fold'])} entries differ")
    lk = other.get("leakage", {})
    if lk.get("leaky_per_fold") != ref["leakage"]["leaky_per_fold"] or lk.get("radius") != ref["leakage"]["radius"]:
        diffs.append(f"leakage: file {lk} != reference {ref['leakage']}")
    return diffs


def selftest():
    for seed in (1234567, 0):
        g = SplitMix64(seed)
        print(f"splitmix64 seed {seed}:", [g.next() for _ in range(5)])
    g = SplitMix64(42)
    print("bounded seed 42, n = 1..10:", [g.bounded(n) for n in range(1, 11)])
    g = SplitMix64(7)
    print("bounded seed 7, n = 2^63+1, x5:", [g.bounded((1 << 63) + 1) for _ in range(5)])
    v = list(range(10))
    shuffle(v, SplitMix64(42))
    print("shuffle(0..9) seed 42:", v)
    print("derive(42, 1, 3):", derive(42, 1, 3))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--cache")
    src.add_argument("--samples")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--strategy", default="stratified", choices=["stratified", "spatial", "random"])
    ap.add_argument("--block", type=int, default=0)
    ap.add_argument("--buffer", type=int, default=-1)
    ap.add_argument("--patch", type=int, default=0, help="override the table's patch side")
    ap.add_argument("--out")
    ap.add_argument("--compare")
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args(argv)
    if a.selftest:
        selftest()
        return 0
    if not (a.cache or a.samples):
        ap.error("give --cache DIR or --samples CSV")
    if not 0 <= a.seed <= MASK:
        ap.error("--seed must be an unsigned 64-bit integer")
    t = read_cache(a.cache, a.patch) if a.cache else read_csv(a.samples, a.patch)
    ref = make_folds(t, a.k, a.seed, a.strategy, a.block, a.buffer)
    print(f"reference: {a.strategy} k={a.k} seed={a.seed} n={len(t)} fingerprint {ref['fingerprint']}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(ref, f)
            f.write("\n")
    if a.compare:
        diffs = compare(ref, a.compare)
        if diffs:
            print(f"{a.compare}: DIFFERS from the reference:")
            for d in diffs:
                print("  " + d)
            return 1
        print(f"{a.compare}: identical to the reference (fold array, exclusions, counts, fingerprint)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
