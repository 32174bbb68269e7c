#!/usr/bin/env python3
"""Count TOML table-header lines inside Rust string literals in the workspace's tests.

What it counts: a line of a Rust string literal's *source text* (a real newline or a `\\n`
escape ends a line) that matches `^\\s*\\[\\[?[A-Za-z_][A-Za-z0-9_.]*\\]\\]?\\s*$`, i.e. a TOML
table header such as `[simulation]`, `[[body]]`, `[body.material]`.

Where it looks (every member's tests):
  - every `.rs` file under `tests/` and `crates/*/tests/` (all of it is test code);
  - `.rs` files under `src/`, `cli/src/`, `crates/*/src/`, `python/src/`: only the text after
    the first `#[cfg(test)]` line of the file (the project's unit-test modules sit at the end
    of their file; a `#[cfg(test)]` item in the middle would count the rest of the file too).
`python/tests` (Python) is not counted. Literals are found by a small lexer that knows line
and block comments, char literals, byte/raw strings (`r#"..."#`); it does not expand macros,
so a header built at run time (`format!("[{}]", name)`) is not counted.

The second line of the output counts only `[simulation]` and `[[body]]` (about one per
inline scene). Usage: scripts/count_test_toml.sh [-v]   (-v: per-file counts: all, core)
"""
import os
import re
import sys

CORE = ("[simulation]", "[[body]]")
HEADER = re.compile(r"^\s*\[\[?[A-Za-z_][A-Za-z0-9_.]*\]\]?\s*$")


def string_literals(src):
    """Yield the raw source text of every string literal in Rust source `src`."""
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j + 1
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" or (c == "b" and i + 1 < n and src[i + 1] == "r"):
            m = re.compile(r'b?r(#*)"').match(src, i)
            prev = src[i - 1] if i else " "
            if m and not (prev.isalnum() or prev == "_"):
                close = '"' + m.group(1)
                j = src.find(close, m.end())
                j = n if j < 0 else j
                yield src[m.end():j]
                i = j + len(close)
            else:
                i += 1
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            yield src[i + 1:j]
            i = j + 1
        elif c == "'":
            # char literal ('a', '\n', '\'', '\u{..}') or a lifetime ('a)
            m = re.compile(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'").match(src, i)
            i = m.end() if m else i + 1
        else:
            i += 1


def count_file(path, test_only_after_cfg):
    with open(path, encoding="utf-8", errors="replace") as f:
        src = f.read()
    if test_only_after_cfg:
        k = src.find("#[cfg(test)]")
        if k < 0:
            return 0, 0
        src = src[k:]
    total = core = 0
    for lit in string_literals(src):
        for line in re.split(r"\n|\\n", lit):
            if HEADER.match(line):
                total += 1
                core += line.strip() in CORE
    return total, core


def rs_files(root):
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(d, f)


def main():
    verbose = "-v" in sys.argv[1:]
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    roots = [("tests", False)]
    src_roots = [("src", True), ("cli/src", True), ("python/src", True)]
    if os.path.isdir("crates"):
        for c in sorted(os.listdir("crates")):
            roots.append((f"crates/{c}/tests", False))
            src_roots.append((f"crates/{c}/src", True))
    per_file = {}
    for root, cfg in roots + src_roots:
        if not os.path.isdir(root):
            continue
        for p in rs_files(root):
            k, c = count_file(p, cfg)
            if k:
                per_file[p] = (k, c)
    if verbose:
        for p, (k, c) in sorted(per_file.items(), key=lambda x: (-x[1][0], x[0])):
            print(f"{k:5d} {c:4d} {p}")
    total = sum(k for k, _ in per_file.values())
    core = sum(c for _, c in per_file.values())
    print(f"toml_headers_in_test_strings {total} files {len(per_file)}")
    print(f"of_which_simulation_or_body {core}")


if __name__ == "__main__":
    main()
