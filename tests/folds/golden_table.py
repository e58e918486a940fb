#!/usr/bin/env python3
"""The fixed synthetic sample table of tests/folds/test_folds.cpp (make_golden_table), written as the
CSV of docs/FOLDS.md section 11. Golden fingerprints in the C++ test come from running
scripts/folds_reference.py on this CSV (see print_goldens below), not from hsipipe itself."""
import os
import subprocess
import sys


def rows():
    for s, (R, C) in enumerate([(37, 41), (23, 29)]):
        for r in range(R):
            for c in range(C):
                h = (r * 7 + c * 13 + s * 5) % 23
                if h in (1, 2, 3):
                    continue  # background: not a sample
                lab = -1 if h == 0 else (r // 6 + 2 * (c // 8) + s) % 4
                if s == 1 and (r, c) in ((3, 3), (20, 25)):
                    lab = 9  # a class with fewer samples than k
                yield s, r, c, lab


def write_csv(path, patch=5):
    with open(path, "w") as f:
        f.write(f"# hsipipe-samples 1\n# patch,{patch}\n# scene,0,37,41,a\n# scene,1,23,29,b\n")
        f.write("sample,scene,row,col,label\n")
        for i, (s, r, c, lab) in enumerate(rows()):
            f.write(f"{i},{s},{r},{c},{lab}\n")


def print_goldens(csv):
    ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "folds_reference.py")
    for args in (["--k", "5", "--seed", "42", "--strategy", "stratified"],
                 ["--k", "5", "--seed", "42", "--strategy", "random"],
                 ["--k", "5", "--seed", "42", "--strategy", "spatial"],
                 ["--k", "3", "--seed", "7", "--strategy", "spatial", "--block", "6", "--buffer", "1"]):
        out = subprocess.run([sys.executable, ref, "--samples", csv] + args, check=True, capture_output=True, text=True)
        print(" ".join(args), "->", out.stdout.strip().split()[-1])


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/golden_table.csv"
    write_csv(path)
    print_goldens(path)
