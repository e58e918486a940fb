#!/usr/bin/env python3
"""hsipipe compare (issue 45) on real runs, its statistics against scipy:

- run A: hu1d, all 3 folds in one `train --fold all`; run B: mlp, trained as separate `--fold I` tasks into two
  directories (folds 0 and 1 into one, fold 2 into another: a Slurm array's layout), joined as DIR1,DIR2;
- OA/AA/kappa mean and sample std equal numpy's over the folds' metrics.json; per-fold differences against A;
- McNemar's b / c counted from the predictions.csv files, p = scipy.stats.chi2.sf (continuity corrected) and
  the exact two-sided binomial (scipy.stats.binom); Wilcoxon and the paired t over the per-fold OA differences
  equal scipy.stats.wilcoxon and scipy.stats.ttest_rel; pooled per-class accuracy from predictions.csv;
- OUT.png is a picture with one distinct colour per run;
- refused, nothing written: a run on another folds file (exit 5, naming both fingerprints), runs holding
  different folds (exit 2), an existing output without --force (exit 2).
Run by ctest (HSIPIPE_BIN set).
"""
import glob
import json
import os
import sys

import matplotlib.image as mpimg
import numpy as np
from scipy import stats

BIN = os.environ["HSIPIPE_BIN"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from hsitest import run, check, in_temp_dir  # noqa: E402


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(b))


def train(w, model, fold, out, folds="folds.json"):
    run(["train", "--cache", f"{w}/cache", "--folds", f"{w}/{folds}", "--model", model, "--fold", fold, "--epochs", "1",
         "--batch", "64", "--lr", "0.003", "--deterministic", "--device", "cpu", "--quiet", "--out", out], ranks=2)


def fold_metrics(dirs):
    out = {}
    for d in dirs:
        for f in glob.glob(f"{d}/fold-*/metrics.json"):
            j = json.load(open(f))
            out[j["fold"]] = (j["metrics"], os.path.dirname(f))
    return dict(sorted(out.items()))


def predictions(fdir):
    p = np.genfromtxt(f"{fdir}/predictions.csv", delimiter=",", names=True, dtype=np.int64)
    return p[np.argsort(p["sample_id"])]


def check_table(w, t, a_dirs, b_dirs):
    A, B = fold_metrics(a_dirs), fold_metrics(b_dirs)
    check(t["folds"] == [0, 1, 2], "the table covers folds 0, 1, 2")
    for r, M in zip(t["runs"], (A, B)):
        for key in ("oa", "aa", "kappa"):
            v = np.array([m[key] for m, _ in M.values()])
            check(close(r[key]["mean"], v.mean()) and close(r[key]["std"], v.std(ddof=1)), f"{r['model']}: {key} mean and sample std = numpy's")
        pa = np.concatenate([predictions(d) for _, d in M.values()])
        for c in r["per_class_pooled"]:
            sel = pa["true"] == c["label"]
            check(close(c["accuracy"], float((pa["predicted"][sel] == c["label"]).mean())), f"{r['model']}: pooled accuracy of class {c['label']}")
    p = t["paired"][0]
    d = np.array([B[k][0]["oa"] - A[k][0]["oa"] for k in A])
    check(all(close(f["d_oa"], x) for f, x in zip(p["per_fold"], d)), f"per-fold OA differences {np.round(d, 4).tolist()}")
    b = c = 0
    for k in A:
        pa, pb = predictions(A[k][1]), predictions(B[k][1])
        ra, rb = pa["true"] == pa["predicted"], pb["true"] == pb["predicted"]
        b += int((ra & ~rb).sum())
        c += int((~ra & rb).sum())
    m = p["mcnemar"]
    check(m["b_reference_right_other_wrong"] == b and m["c_reference_wrong_other_right"] == c, f"McNemar b = {b}, c = {c} from predictions.csv")
    chi2 = (abs(b - c) - 1) ** 2 / (b + c)
    check(close(m["p_chi2"], stats.chi2.sf(chi2, 1), 1e-7), f"McNemar chi2 p {m['p_chi2']:.4g} = scipy.stats.chi2.sf")
    check(close(m["p_exact"], min(1.0, 2 * stats.binom.cdf(min(b, c), b + c, 0.5)), 1e-7), f"McNemar exact p {m['p_exact']:.4g} = scipy.stats.binom")
    wx = stats.wilcoxon(d)
    check(close(p["wilcoxon_oa"]["statistic"], wx.statistic) and close(p["wilcoxon_oa"]["p"], wx.pvalue, 1e-7),
          f"Wilcoxon W {wx.statistic}, p {wx.pvalue:.4g} = scipy.stats.wilcoxon")
    tt = stats.ttest_rel([B[k][0]["oa"] for k in A], [A[k][0]["oa"] for k in A])
    check(close(p["paired_t_oa"]["t"], tt.statistic, 1e-7) and close(p["paired_t_oa"]["p"], tt.pvalue, 1e-7),
          f"paired t {tt.statistic:.4g}, p {tt.pvalue:.4g} = scipy.stats.ttest_rel")


def check_png(path):
    img = (mpimg.imread(path)[..., :3] * 255).round().astype(int)
    colours = {tuple(c) for c in img.reshape(-1, 3)}
    check(len(colours) >= 4 and img.shape[0] > 200, f"OUT.png is a {img.shape[1]} x {img.shape[0]} chart with {len(colours)} colours")


def refusals(w, a):
    run(["folds", "--cache", f"{w}/cache", "--k", "3", "--seed", "8", "--out", f"{w}/folds8.json"])
    train(w, "mlp", "all", f"{w}/runC", "folds8.json")
    fp8 = json.load(open(f"{w}/runC/fold-0/metrics.json"))["run"]["folds_fingerprint"]
    fp7 = json.load(open(f"{a}/fold-0/metrics.json"))["run"]["folds_fingerprint"]
    msg = run(["compare", a, f"{w}/runC", "--out", f"{w}/bad"], expect=5)
    check(fp7 in msg and fp8 in msg and not glob.glob(f"{w}/bad.*"), "runs on different folds files are refused (exit 5) naming both fingerprints, nothing written")
    msg = run(["compare", a, f"{w}/runB1", "--out", f"{w}/bad"], expect=2)
    check("folds 0,1" in msg and not glob.glob(f"{w}/bad.*"), "runs holding different folds are refused (exit 2)")
    msg = run(["compare", a, f"{w}/runB1,{w}/runB2", "--out", f"{w}/cmp"], expect=2)
    check("--force" in msg, "an existing output is not replaced without --force (exit 2)")
    run(["compare", a, f"{w}/runB1,{w}/runB2", "--out", f"{w}/cmp", "--force", "--quiet"])


def body(w):
    run(["synth", "--out", f"{w}/s", "--rows", "40", "--cols", "40", "--bands", "24", "--classes", "4", "--seed", "3"])
    run(["decode", "--scene", f"{w}/s/scene.hdr", "--labels", f"{w}/s/labels.hdr", "--ignore-label", "0", "--layout", "pixel",
         "--backend", "npy", "--out", f"{w}/cache", "--no-progress"])
    run(["folds", "--cache", f"{w}/cache", "--k", "3", "--seed", "7", "--out", f"{w}/folds.json"])
    train(w, "hu1d", "all", f"{w}/runA")
    train(w, "mlp", "0", f"{w}/runB1")
    train(w, "mlp", "1", f"{w}/runB1")
    train(w, "mlp", "2", f"{w}/runB2")
    out = run(["compare", f"{w}/runA", f"{w}/runB1,{w}/runB2", "--out", f"{w}/cmp"])
    print(out)
    t = json.load(open(f"{w}/cmp.json"))
    check([r["model"] for r in t["runs"]] == ["hu1d", "mlp"], "the table names the models")
    check_table(w, t, [f"{w}/runA"], [f"{w}/runB1", f"{w}/runB2"])
    check("| `" in open(f"{w}/cmp.md").read() and "McNemar" in open(f"{w}/cmp.md").read(), "cmp.md holds the tables")
    check_png(f"{w}/cmp.png")
    refusals(w, f"{w}/runA")


def main():
    in_temp_dir("hsipipe-compare-", body)


if __name__ == "__main__":
    main()
