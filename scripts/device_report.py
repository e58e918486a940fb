#!/usr/bin/env python3
"""Collects scripts/device_check.sh's runs into one JSON file and a Markdown table.

usage: device_report.py WORK_DIR RESULT_JSON TABLE_MD

For every run-MODEL-PRECISION/ in WORK_DIR: hsipipe's epochs (fold-0/epochs.jsonl: samples/s, the time
split, eta, validation OA per epoch, peak device memory), its final metrics (fold-0/metrics.json), the
planner's estimate (run-....plan.json) and the PyTorch script's line (run-....baseline.json). The
speed figure of both is the best epoch after the first (the first includes start-up and autotuning).
"""
import glob
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def best_after_first(rates):
    return max(rates[1:] if len(rates) > 1 else rates) if rates else None


def one_run(run):
    name = os.path.basename(run)[4:]
    model, prec = name.rsplit("-", 1)
    rec = {"model": model, "precision": prec}
    ep_path = os.path.join(run, "fold-0", "epochs.jsonl")
    epochs = [json.loads(l) for l in open(ep_path) if l.strip()] if os.path.exists(ep_path) else []
    if epochs:
        last = epochs[-1]
        t = last["time_s"]
        rec["hsipipe"] = {
            "epoch_rates": [round(e["samples_per_s"]) for e in epochs],
            "best_rate_after_first": round(best_after_first([e["samples_per_s"] for e in epochs])),
            "val_oa_per_epoch": [round(e["val"]["oa"], 4) for e in epochs],
            "eta": round(last["eta"], 3),
            "time_split_last_epoch": t,
            "split_coverage": round((t["data_wait"] + t["compute"] + t["communication"] + t["evaluation"]) / t["total"], 3)
            if t["total"] else None,
            "peak_device_bytes": max((e.get("peak_device_bytes") or 0) for e in epochs),
            "batches": last.get("batches"), "clock": last.get("clock"),
        }
    m = load(os.path.join(run, "fold-0", "metrics.json"))
    if m:
        rec.setdefault("hsipipe", {})["metrics"] = {k: m["metrics"][k] for k in ("oa", "aa", "kappa") if k in m["metrics"]}
    plan = load(run + ".plan.json")
    if plan:
        rec["plan_total_bytes"] = plan["bytes"]["total"]
        peak = rec.get("hsipipe", {}).get("peak_device_bytes")
        if peak:
            rec["plan_over_measured"] = round(plan["bytes"]["total"] / peak - 1, 3)
    base = load(run + ".baseline.json")
    if base:
        rec["pytorch"] = base
        hs = rec.get("hsipipe", {}).get("best_rate_after_first")
        if hs:
            rec["ratio_vs_compute_only"] = round(hs / base["compute_only_rate"], 3)
            rec["ratio_vs_dataloader"] = round(hs / base["best_rate_after_first"], 3)
    return rec


def table(runs):
    head = ["| model, precision | hsipipe samples/s | PyTorch DataLoader | PyTorch compute alone | hsipipe / compute alone "
            "| eta (GPU busy) | split covers | val OA hsipipe | val OA PyTorch | peak GPU MiB | plan MiB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = []
    for r in runs:
        h, p = r.get("hsipipe", {}), r.get("pytorch", {})
        mib = lambda b: f"{b / 2**20:,.0f}" if b else "-"
        rows.append("| {} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["model"], r["precision"], f"{h.get('best_rate_after_first', 0):,}" if h else "-",
            f"{p['best_rate_after_first']:,}" if p else "-", f"{p['compute_only_rate']:,}" if p else "-",
            r.get("ratio_vs_compute_only", "-"), h.get("eta", "-"), h.get("split_coverage", "-"),
            h.get("metrics", {}).get("oa", "-") if h else "-", round(p["val_oa"], 4) if p else "-",
            mib(h.get("peak_device_bytes")), mib(r.get("plan_total_bytes"))))
    return "\n".join(head + rows) + "\n"


def main():
    work, dest, md = sys.argv[1:4]
    runs = [one_run(r) for r in sorted(glob.glob(os.path.join(work, "run-*"))) if os.path.isdir(r)]
    with open(dest, "w") as f:
        json.dump({"runs": runs}, f, indent=2)
    with open(md, "w") as f:
        f.write(table(runs))
    print(table(runs))


if __name__ == "__main__":
    main()
