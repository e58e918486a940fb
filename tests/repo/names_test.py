#!/usr/bin/env python3
"""One list per set of names (issue 47): the model and fold-strategy lists written in the docs and scripts
match the code's own lists, which the binary prints in its help (made from model_registry() and
folds::all_strategies(), never typed by hand).

    names_test.py HSIPIPE_BIN REPO_ROOT

Checked against the binary's lists:
- docs/COMMANDS.md's "Models:" line, and the model table of docs/MODELS.md and the README when they have
  one (rows whose first cell is a `name`);
- scripts/hsipipe_models.py's MODELS (the PyTorch twins export needs, one per built-in network);
- docs/COMMANDS.md's folds row, scripts/folds_reference.py's --strategy choices and docs/FOLDS.md's
  "Strategy `x`" sections.
Exits 1 naming each list that differs, with what is missing and what is extra.
"""
import ast
import pathlib
import re
import subprocess
import sys

failures = []


def help_names(binary, command, option, sep):
    """The names the binary's `command --help` gives for --option (its description is the generated list;
    Boost.Program_options wraps a long description onto indented continuation lines)."""
    out = subprocess.run([binary, command, "--help"], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*--" + option + r" arg(?: \(=[^)]*\))?[ \t]+)(\S.*)$", line)
        if not m:
            continue
        text, col = m.group(2), len(m.group(1))
        for more in lines[i + 1:]:
            if len(more) - len(more.lstrip()) < col or not more.strip():
                break
            text += " " + more.strip()
        names = [n.strip() for n in re.split(sep, text) if n.strip()]
        if names:
            return names
    sys.exit(f"names_test: `hsipipe {command} --help` has no --{option} line with names:\n{out}")


def compare(what, got, want):
    got, want = list(got), list(want)
    if got is None or sorted(got) != sorted(want):
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        failures.append(f"{what}: missing {missing}, extra {extra} (the code has {want})")
    else:
        print(f"ok: {what} lists {len(want)} names")


def table_names(path):
    """First-cell `names` of the rows of the model table (the table under a heading that says 'model')."""
    names, in_table = [], False
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            in_table = "model" in line.lower()
            continue
        if in_table:
            m = re.match(r"^\|\s*`([a-z0-9_]+)`\s*\|", line)
            if m:
                names.append(m.group(1))
    return names


def main():
    binary, root = sys.argv[1], pathlib.Path(sys.argv[2])
    models = help_names(binary, "train", "model", r"\s*\|\s*")
    # train's --model also takes a TorchScript file path: the generated list comes first, "(or ...)" after
    models = [re.sub(r"\s*\(.*$", "", n) for n in models if not n.startswith("(")]
    strategies = help_names(binary, "folds", "strategy", r"\s*\|\s*")
    strategies = [re.sub(r"\s*\(.*$", "", n) for n in strategies]
    print(f"code: models {models}; strategies {strategies}")

    commands = (root / "docs/COMMANDS.md").read_text()
    m = re.search(r"^Models: (.*)$", commands, re.M)
    compare("docs/COMMANDS.md 'Models:' line", re.findall(r"`([a-z0-9_]+)`", m.group(1)) if m else [], models)
    for page in ("docs/MODELS.md", "README.md"):
        p = root / page
        if p.exists() and table_names(p):
            compare(f"{page} model table", dict.fromkeys(table_names(p)), models)

    tree = ast.parse((root / "scripts/hsipipe_models.py").read_text())
    twins = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MODELS" for t in node.targets):
            twins = [k.value for k in node.value.keys]
    compare("scripts/hsipipe_models.py MODELS", twins or [], models)

    m = re.search(r"--strategy ([a-z|\\]+)", commands)
    compare("docs/COMMANDS.md folds row", m.group(1).replace("\\", "").split("|") if m else [], strategies)
    ref = (root / "scripts/folds_reference.py").read_text()
    m = re.search(r'"--strategy".*?choices=\[([^\]]*)\]', ref)
    compare("scripts/folds_reference.py --strategy choices", re.findall(r'"([a-z]+)"', m.group(1)) if m else [], strategies)
    folds_md = (root / "docs/FOLDS.md").read_text()
    compare("docs/FOLDS.md 'Strategy `x`' sections", re.findall(r"^## \d+\. Strategy `([a-z]+)`", folds_md, re.M), strategies)

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
