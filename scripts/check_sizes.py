#!/usr/bin/env python3
"""Counts what makes code slow to read: functions over --max-function lines and files over --max-file lines.

    scripts/check_sizes.py [--max-function 80] [--max-file 600] [--list N] [ROOT...]

ROOT defaults to src/. A function is a brace block opened at namespace or class scope whose header holds a
parameter list (free functions, member functions, constructors, operator overloads); lambdas and nested
blocks count as part of the function that holds them. Its length runs from the first line of its header to
its closing brace. Comments, string and character literals and
preprocessor lines are ignored when braces are matched.

Prints each offender as `path:line: name N lines` and exits 1 when there is one (ctest `check_sizes`);
--list N prints the N longest functions as well, offenders or not.
"""
import argparse
import pathlib
import re
import sys

SCOPE_WORDS = re.compile(r"\b(namespace|struct|class|union|enum)\b")
NOT_FUNCTION = re.compile(r"(=\s*$|\breturn\b|^\s*(if|for|while|switch|catch|do|else)\b)")


def strip_code(text):
    """The text with comments and literals blanked (newlines kept), so braces can be matched."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            # a digit separator (1'000) is not a literal
            if c == "'" and i > 0 and text[i - 1].isalnum() and j - i > 3:
                out.append(c)
                i += 1
                continue
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, length in lines) of each function defined at namespace or class scope."""
    code = strip_code(path.read_text(errors="replace"))
    # preprocessor lines (#if __has_include(...), #define F(x) {...}) are not code to match
    code = re.sub(r"(?m)^[ \t]*#.*$", lambda m: " " * len(m.group(0)), code)
    found, stack = [], []  # stack: one entry per open brace: ("scope"|"function"|"block", start line, name)
    header_start, i, line = 0, 0, 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            header = code[header_start:i]
            in_function = any(kind == "function" for kind, _, _ in stack)
            if in_function:
                stack.append(("block", line, ""))
            elif SCOPE_WORDS.search(header.split("(")[0]) or "(" not in header or NOT_FUNCTION.search(header.strip()):
                stack.append(("scope", line, ""))
            else:
                stripped = header.strip()
                first = line - header[len(header.rstrip()):].count("\n") - stripped.count("\n")
                m = re.search(r"([~\w:<>=!+\-*/\[\]]+)\s*\(", stripped)
                stack.append(("function", first, m.group(1) if m else "?"))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    found.append((name, start, line - start + 1))
            header_start = i + 1
        elif c == ";" and not any(kind == "function" for kind, _, _ in stack):
            header_start = i + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="*", default=["src"])
    ap.add_argument("--max-function", type=int, default=80)
    ap.add_argument("--max-file", type=int, default=600)
    ap.add_argument("--list", type=int, default=0, help="also print the N longest functions")
    a = ap.parse_args()
    files = []
    for root in a.roots:
        p = pathlib.Path(root)
        files += [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.suffix in (".cpp", ".hpp", ".h", ".cu"))
    bad, every = [], []
    for f in files:
        n_lines = f.read_text(errors="replace").count("\n")
        if n_lines > a.max_file:
            bad.append(f"{f}: file has {n_lines} lines (at most {a.max_file})")
        for name, start, length in functions(f):
            every.append((length, f"{f}:{start}: {name} {length} lines"))
            if length > a.max_function:
                bad.append(f"{f}:{start}: {name} {length} lines (at most {a.max_function})")
    for _, text in sorted(every, reverse=True)[: a.list]:
        print(text)
    for text in bad:
        print(text)
    print(f"check_sizes: {len(files)} files, {len(every)} functions, {len(bad)} over the limits")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
