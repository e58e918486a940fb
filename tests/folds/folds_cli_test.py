#!/usr/bin/python3
"""End-to-end tests of `hsipipe folds` against the independent reference scripts/folds_reference.py.

  folds_cli_test.py synthetic      CSV sample tables: hsipipe folds --samples vs the reference, CLI errors
  folds_cli_test.py salinas MPIEXEC
                                   Salinas-A decoded on 1 rank (npy, float32) and 3 ranks (h5, float16):
                                   identical folds, the reference on the cache files and on the exported
                                   CSV, --check accepting the sibling cache and refusing another scene's.
Environment (set by ctest): HSIPIPE_BIN, HSIPIPE_SOURCE_DIR, HSIPIPE_SHARED_DATA, CI.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("HSIPIPE_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "scripts"))
import folds_reference as ref  # noqa: E402

BIN = os.environ.get("HSIPIPE_BIN", "hsipipe")
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def run(args, expect=0):
    p = subprocess.run(args, capture_output=True, text=True)
    out = p.stdout + p.stderr
    if expect is not None and p.returncode != expect:
        print(f"command {' '.join(args)} exited {p.returncode}, expected {expect}:\n{out}")
    return p.returncode, out


def lcg(seed):
    x = seed & 0xFFFFFFFF
    while True:
        x = (x * 1664525 + 1013904223) & 0xFFFFFFFF
        yield x >> 8


def write_table(path, seed, scenes, patch, density, n_classes, unlabeled):
    """Random-looking table with spatially coherent classes, background pixels and unlabeled samples."""
    g = lcg(seed)
    lines = [f"# hsipipe-samples 1\n# patch,{patch}\n"]
    for s, (R, C) in enumerate(scenes):
        lines.append(f"# scene,{s},{R},{C},s{s}\n")
    lines.append("sample,scene,row,col,label\n")
    i = 0
    for s, (R, C) in enumerate(scenes):
        for r in range(R):
            for c in range(C):
                if next(g) % 1000 >= density:
                    continue
                lab = (r // 7 * 3 + c // 5 + s) % n_classes
                if next(g) % 1000 < unlabeled:
                    lab = -1
                lines.append(f"{i},{s},{r},{c},{lab}\n")
                i += 1
    with open(path, "w") as f:
        f.writelines(lines)
    return i


def compare_with_reference(tmp, csv, args, tag):
    out = os.path.join(tmp, f"{tag}.json")
    rc, text = run([BIN, "folds", "--samples", csv, "--out", out] + args)
    check(rc == 0, f"{tag}: hsipipe folds {' '.join(args)}")
    if rc != 0:
        return None
    opts = dict(zip(args[0::2], args[1::2]))
    t = ref.read_csv(csv)
    r = ref.make_folds(t, int(opts["--k"]), int(opts["--seed"]), opts["--strategy"],
                       int(opts.get("--block", 0)), int(opts.get("--buffer", -1)))
    diffs = ref.compare(r, out)
    check(not diffs, f"{tag}: identical to the reference (fingerprint {r['fingerprint'][:16]}) {diffs[:3]}")
    check(("fingerprint: " + r["fingerprint"]) in text, f"{tag}: the command prints the fingerprint")
    return r


def synthetic():
    tmp = tempfile.mkdtemp(prefix="hsipipe-folds-")
    try:
        tables = [
            ("one", 1, [(40, 45)], 5, 700, 5, 20),
            ("two", 2, [(31, 17), (25, 52)], 9, 500, 7, 50),
            ("pixel", 3, [(60, 60)], 1, 300, 4, 0),
            ("sparse", 4, [(80, 70)], 7, 120, 9, 10),
        ]
        for name, seed, scenes, patch, density, ncls, unl in tables:
            csv = os.path.join(tmp, name + ".csv")
            n = write_table(csv, seed, scenes, patch, density, ncls, unl)
            print(f"table {name}: {n} samples, patch {patch}")
            for k, s in ((5, 42), (3, 18446744073709551557)):
                for strategy in ("stratified", "random", "spatial"):
                    compare_with_reference(tmp, csv, ["--k", str(k), "--seed", str(s), "--strategy", strategy],
                                           f"{name}-{strategy}-k{k}")
            compare_with_reference(tmp, csv, ["--k", "4", "--seed", "9", "--strategy", "spatial", "--block", "11",
                                              "--buffer", "2"], f"{name}-spatial-block11-buffer2")

        csv = os.path.join(tmp, "one.csv")
        # bad input: exit codes and nothing written
        out = os.path.join(tmp, "bad.json")
        for args, code, needle in (
            (["--k", "1"], 2, "--k"),
            (["--strategy", "blocks"], 2, "--strategy"),
            (["--seed", "-3"], 2, "--seed"),
            (["--strategy", "stratified", "--block", "8"], 2, "--block"),
            (["--strategy", "spatial", "--block", "1000"], 2, "non-empty blocks"),
            (["--k", "100000"], 2, "labeled samples"),
            (["--strategy", "spatial", "--buffer", "1000"], 2, "keeps no training sample"),
        ):
            rc, text = run([BIN, "folds", "--samples", csv, "--out", out] + args, expect=None)
            check(rc == code and needle in text and not os.path.exists(out),
                  f"bad input {' '.join(args)}: exit {rc} (want {code}), message names {needle!r}, nothing written")
        rc, text = run([BIN, "folds", "--samples", os.path.join(tmp, "missing.csv"), "--out", out], expect=None)
        check(rc != 0 and "missing.csv" in text, "a missing sample table is named")

        # --check: accepts its table, refuses another one with the reason
        good = os.path.join(tmp, "good.json")
        run([BIN, "folds", "--samples", csv, "--k", "5", "--strategy", "spatial", "--out", good])
        rc, text = run([BIN, "folds", "--check", good, "--samples", csv])
        check(rc == 0 and "OK" in text and "identical" in text, "--check accepts the folds of the same table")
        rc, text = run([BIN, "folds", "--check", good, "--samples", os.path.join(tmp, "two.csv")], expect=5)
        check(rc == 5 and "REFUSED" in text and "samples" in text, "--check refuses another table, saying why")
        strat = os.path.join(tmp, "strat.json")
        run([BIN, "folds", "--samples", csv, "--k", "5", "--strategy", "stratified", "--out", strat])
        with open(strat) as f:
            j = json.load(f)
        a = j["fold"].index(0)
        b = j["fold"].index(1)
        j["fold"][a], j["fold"][b] = 1, 0  # two samples change places: counts stay, the fingerprint does not
        edited = os.path.join(tmp, "edited.json")
        with open(edited, "w") as f:
            json.dump(j, f)
        rc, text = run([BIN, "folds", "--check", edited, "--samples", csv], expect=None)
        check(rc == 5 and "fingerprint" in text, "--check refuses an edited fold array (fingerprint)")
        j["format_version"] = 7
        with open(edited, "w") as f:
            json.dump(j, f)
        rc, text = run([BIN, "folds", "--check", edited, "--samples", csv], expect=None)
        check(rc == 3 and "format_version" in text and "edited.json" in text,
              "--check refuses an unknown format version naming file and field")

        # The reference's own folds file is accepted by --check; so is one with only the fields readers may
        # rely on (FOLDS.md section 10), whose counts hsipipe then computes itself.
        t = ref.read_csv(csv)
        r = ref.make_folds(t, 5, 42, "spatial")
        reffile = os.path.join(tmp, "ref.json")
        with open(reffile, "w") as f:
            json.dump(r, f)
        rc, text = run([BIN, "folds", "--check", reffile, "--samples", csv], expect=None)
        check(rc == 0 and "OK" in text and "identical" in text, "--check accepts the reference's folds file")
        _, good_text = run([BIN, "folds", "--check", good, "--samples", csv])
        minimal = {key: r[key] for key in ("format", "format_version", "algorithm_version", "k", "seed", "strategy",
                                          "parameters", "n_samples", "samples_checksum", "fingerprint", "excluded",
                                          "fold")}
        with open(reffile, "w") as f:
            json.dump(minimal, f)
        rc, text = run([BIN, "folds", "--check", reffile, "--samples", csv], expect=None)
        table = lambda s: [line for line in s.splitlines() if line.lstrip().startswith(("0 ", "all ", "leakage:"))]
        check(rc == 0 and table(text) == table(good_text) and table(text),
              "--check accepts a file without the informational fields, and prints the same counts and leakage")
        del minimal["fingerprint"]
        with open(reffile, "w") as f:
            json.dump(minimal, f)
        rc, text = run([BIN, "folds", "--check", reffile, "--samples", csv], expect=None)
        check(rc == 3 and "fingerprint" in text, "--check refuses a file without its fingerprint, naming the field")

        # The reference refuses what hsipipe refuses (FOLDS.md section 0).
        for what, edit_table in (
            ("fewer labeled samples than k", lambda t: ref.Table(t.scene[:3], t.row[:3], t.col[:3], t.label[:3], t.patch, t.scenes)),
            ("two samples on one pixel", lambda t: ref.Table(t.scene + [t.scene[0]], t.row + [t.row[0]], t.col + [t.col[0]],
                                                             t.label + [t.label[0]], t.patch, t.scenes)),
            ("a sample outside its scene", lambda t: ref.Table(t.scene + [0], t.row + [t.scenes[0][1]], t.col + [0],
                                                               t.label + [t.label[0]], t.patch, t.scenes)),
        ):
            bad = edit_table(t)
            try:
                ref.make_folds(bad, 5, 42, "stratified")
                refused = False
            except SystemExit:
                refused = True
            badcsv = os.path.join(tmp, "bad.csv")
            with open(badcsv, "w") as f:
                f.write(f"# hsipipe-samples 1\n# patch,{bad.patch}\n")
                for i, (name, rows, cols) in enumerate(bad.scenes):
                    f.write(f"# scene,{i},{rows},{cols},{name}\n")
                f.write("sample,scene,row,col,label\n")
                for i in range(len(bad)):
                    f.write(f"{i},{bad.scene[i]},{bad.row[i]},{bad.col[i]},{bad.label[i]}\n")
            rc, _ = run([BIN, "folds", "--samples", badcsv, "--k", "5", "--strategy", "stratified", "--out", out], expect=None)
            check(refused and rc in (2, 3) and not os.path.exists(out), f"{what}: refused by the reference and by hsipipe (exit {rc})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def decode(mpiexec, nranks, out, extra, scene, labels):
    args = [mpiexec, "-n", str(nranks), "--oversubscribe", BIN, "decode", "--scene", scene, "--labels", labels,
            "--out", out, "--no-progress"] + extra
    rc, text = run(args)
    check(rc == 0, f"decode on {nranks} rank(s) {' '.join(extra)}")
    return rc == 0


def salinas(mpiexec):
    data = os.environ.get("HSIPIPE_SHARED_DATA", os.path.join(SRC, "..", "shared", "data"))
    scene, gt = os.path.join(data, "SalinasA.mat"), os.path.join(data, "SalinasA_gt.mat")
    if not (os.path.exists(scene) and os.path.exists(gt)):
        msg = f"SKIP: {scene} missing"
        if os.environ.get("CI") == "true":
            check(False, msg + " (CI=true: data required)")
        else:
            print(msg)
        return
    tmp = tempfile.mkdtemp(prefix="hsipipe-folds-salinas-")
    try:
        c1, c3, ch = os.path.join(tmp, "c1"), os.path.join(tmp, "c3"), os.path.join(tmp, "ch5")
        common = ["--layout", "cube", "--patch", "9"]
        if not decode(mpiexec, 1, c1, common + ["--backend", "npy", "--dtype", "float32"], scene, gt):
            return
        others = []  # (tag, dir): 3 ranks npy float16, 3 ranks h5 float16
        if decode(mpiexec, 3, c3, common + ["--backend", "npy", "--dtype", "float16"], scene, gt):
            others.append(("3 ranks npy float16", c3))
        if decode(mpiexec, 3, ch, common + ["--backend", "h5", "--dtype", "float16"], scene, gt):
            others.append(("3 ranks h5 float16", ch))
        t_npy = ref.read_cache(c1)
        for strategy in ("stratified", "spatial", "random"):
            f1 = os.path.join(tmp, f"{strategy}1.json")
            args = ["--k", "5", "--seed", "42", "--strategy", strategy]
            rc1, text = run([BIN, "folds", "--cache", c1, "--out", f1] + args)
            if rc1:
                check(False, f"salinas {strategy}: hsipipe folds")
                continue
            print(text)
            with open(f1) as a:
                j1 = json.load(a)
            r = ref.make_folds(t_npy, 5, 42, strategy)
            diffs = ref.compare(r, f1)
            check(not diffs, f"salinas {strategy}: reference on labels.npy/coords.npy agrees {diffs[:3]}")
            if strategy == "spatial":
                check(j1["leakage"]["fraction"] == 0.0, "salinas spatial: leakage 0 with the buffer")
            else:
                check(j1["leakage"]["fraction"] > 0.5, f"salinas {strategy}: leakage reported high ({j1['leakage']['fraction']:.3f})")
            for tag, d in others:
                f3 = os.path.join(tmp, f"{strategy}-{os.path.basename(d)}.json")
                csv = os.path.join(tmp, os.path.basename(d) + ".csv")
                rc3, _ = run([BIN, "folds", "--cache", d, "--out", f3, "--export-samples", csv] + args)
                if rc3:
                    check(False, f"salinas {strategy} {tag}: hsipipe folds")
                    continue
                with open(f3) as b:
                    j3 = json.load(b)
                check(j1["fold"] == j3["fold"] and j1["fingerprint"] == j3["fingerprint"] and j1["excluded"] == j3["excluded"],
                      f"salinas {strategy}: 1 rank npy float32 and {tag} give identical folds")
                check(j1["data_checksum"] != j3["data_checksum"], f"salinas {strategy} {tag}: the data checksums differ (as they should)")
                diffs = ref.compare(ref.make_folds(ref.read_csv(csv), 5, 42, strategy), f3)
                check(not diffs, f"salinas {strategy} {tag}: reference on the exported CSV agrees {diffs[:3]}")
        rc, text = run([BIN, "folds", "--check", os.path.join(tmp, "spatial1.json"), "--cache", c3], expect=None)
        check(rc == 0 and "data_checksum differs" in text, "--check: the float32 cache's folds apply to the float16 cache (note)")

        # another scene: a synthetic one, decoded the same way, must be refused
        synth = os.path.join(tmp, "synth")
        rc, _ = run([BIN, "synth", "--out", synth, "--rows", "40", "--cols", "30", "--bands", "20", "--classes", "4"])
        if rc == 0:
            other = os.path.join(tmp, "other")
            if decode(mpiexec, 1, other, ["--backend", "npy"], os.path.join(synth, "scene.hdr"),
                      os.path.join(synth, "labels.hdr")):
                rc, text = run([BIN, "folds", "--check", os.path.join(tmp, "stratified1.json"), "--cache", other], expect=5)
                check(rc == 5 and "REFUSED" in text and "samples" in text,
                      "--check refuses the folds of Salinas-A for another scene's cache, with the reason")
        else:
            check(False, "hsipipe synth for the other-cache check")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "synthetic"
    if what == "synthetic":
        synthetic()
    elif what == "salinas":
        salinas(sys.argv[2] if len(sys.argv) > 2 else "mpiexec")
    else:
        raise SystemExit(f"unknown part {what!r}")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed:")
        for f in FAILURES:
            print("  " + f)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
