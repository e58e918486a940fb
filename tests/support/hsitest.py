"""Helpers of the Python tests that run hsipipe (imported by tests/*/test_*.py; run with /usr/bin/python3):
run a command on 1..R MPI ranks and check its exit status, report a check, read a file's bytes, softmax."""
import os
import shutil
import subprocess
import sys
import tempfile

BIN = os.environ.get("HSIPIPE_BIN", "")


def run(args, ranks=1, expect=0, ulimit=None):
    """hsipipe ARGS on `ranks` ranks (mpiexec --oversubscribe when > 1), under `ulimit -n ULIMIT` if given.
    expect: 0 (success), an exit status, or None (any failure). Exits the test with the output otherwise;
    returns stdout + stderr."""
    cmd = ([] if ranks == 1 else ["mpiexec", "-n", str(ranks), "--oversubscribe"]) + [BIN] + args
    if ulimit:
        cmd = ["bash", "-c", f"ulimit -n {ulimit} && exec \"$@\"", "bash"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True)
    if (expect == 0) != (p.returncode == 0) or (expect not in (0, None) and p.returncode != expect):
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {p.returncode}, expected {'a failure' if expect is None else expect}\n{p.stdout}\n{p.stderr}")
    return p.stdout + p.stderr


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:", what)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def softmax(z):
    import numpy as np
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def in_temp_dir(prefix, body):
    """body(w) in a new temporary directory, removed afterwards; prints PASS when body returns."""
    w = tempfile.mkdtemp(prefix=prefix)
    try:
        body(w)
    finally:
        shutil.rmtree(w, ignore_errors=True)
    print("PASS")
