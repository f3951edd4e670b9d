#!/usr/bin/env python3
"""Checks the tree's structural rules (docs/architecture.md, issue 22):
  - no non-test source file is over 700 lines;
  - no function in backends/, runtime/, passes/ or format/ is over 200 lines;
  - no positional attribute read (ints[N], floats[N]) in backends/ or runtime/:
    kernels read their attributes by name, from tfc/kernel_schema.h.
Prints each violation and exits 1, or prints 'tree: ok' and exits 0.

A function is a brace block at namespace level (namespace, extern "C", class
and struct bodies are walked into); comments, strings and character literals
are blanked first. Usage: scripts/check_tree.py [REPO_ROOT]"""
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 200
FUNCTION_DIRS = ("backends/", "runtime/", "passes/", "format/")
SOURCE = re.compile(r"\.(cc|cpp|cu|cuh|h|def|td)$")
SKIP = ("tests/", "bench/", "scripts/")
POSITIONAL = re.compile(r"\b(ints|floats)\s*\[")
SCOPE = re.compile(r'^\s*(namespace\b|extern_C__|(template\s*<[^>]*>\s*)?(class|struct|union|enum)\b)')


def blank(text):
    """Comments, strings and char literals as spaces (newlines kept)."""
    text = text.replace('extern "C"', "extern_C__")
    pat = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pat.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def long_functions(path, lines):
    stack, found = [], []
    for i, line in enumerate(lines):
        for ch in line:
            if ch == "{":
                # A scope block (namespace, class, ...) is walked into; a
                # function body's braces nest inside the function.
                head = line if line.strip() != "{" else (lines[i - 1] if i else "")
                scope = bool(SCOPE.match(head)) and not re.search(r"\)\s*(const\s*)?(override\s*)?\{", head)
                stack.append((scope, i))
            elif ch == "}" and stack:
                scope, start = stack.pop()
                if not scope and all(s for s, _ in stack):
                    n = i - start + 1
                    if n > MAX_FUNCTION_LINES:
                        found.append((path, start + 1, n))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    files = subprocess.check_output(["git", "ls-files"], cwd=root, text=True).split()
    bad = []
    for f in files:
        if not SOURCE.search(f) or f.startswith(SKIP):
            continue
        text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        n = text.count("\n")
        if n > MAX_FILE_LINES:
            bad.append(f"{f}: {n} lines (at most {MAX_FILE_LINES})")
        if f.startswith(("backends/", "runtime/")):
            for i, line in enumerate(blank(text).split("\n")):
                if POSITIONAL.search(line):
                    bad.append(f"{f}:{i + 1}: a positional attribute read: {line.strip()}")
        if f.startswith(FUNCTION_DIRS) and not f.endswith((".def", ".td")):
            for path, line, length in long_functions(f, blank(text).split("\n")):
                bad.append(f"{path}:{line}: a function of {length} lines (at most {MAX_FUNCTION_LINES})")
    for b in bad:
        print(b)
    print("tree: ok" if not bad else f"tree: {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
