#!/usr/bin/env python3
"""Deduplicates a fuzzer's crashing inputs by stack and records them.

Runs FUZZER on every input given (files or folders), reads the sanitizer's
report, and keys each on the kind of error plus the top three frames inside the
tree (file:line). One input per key is copied to OUT/<key-hash>.bin, and
OUT/SUMMARY.md lists each key with its frames and how many inputs hit it.

Usage: tests/fuzz/triage.py FUZZER OUT INPUT...
e.g.   tests/fuzz/triage.py build-fuzz/bin/fuzz_model_run \\
           tests/fuzz/findings/fuzz_model_run build-fuzz/findings/fuzz_model_run
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys

FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (.+?) (/\S+?):(\d+)(?::\d+)?$")
KIND = re.compile(r"(ERROR: (?:AddressSanitizer|LeakSanitizer): .*|runtime error: .*|"
                  r"ERROR: libFuzzer: .*)")


def report(fuzzer, path):
    # The settings of scripts/fuzz.sh, so that what counts as a finding agrees.
    env = dict(os.environ, OMP_NUM_THREADS="1",
               ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:allocator_may_return_null=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    try:
        p = subprocess.run([fuzzer, "-runs=1", "-rss_limit_mb=2048", path], capture_output=True, text=True,
                           errors="replace", timeout=60, env=env)
        text = p.stderr + p.stdout
    except subprocess.TimeoutExpired:
        return "timeout", []
    m = KIND.search(text)
    if not m:
        return None, []
    # The kind without its numbers and addresses, so that one bug is one key.
    kind = re.sub(r"0x[0-9a-f]+|-?\d+(\.\d+)?(e[-+]?\d+)?", "N", m.group(1))
    kind = re.sub(r" (on|at) address.*| \(pc .*|allocation-size-too-big.*", "", kind)[:90].strip()
    frames = []
    for line in text.splitlines():
        f = FRAME.match(line)
        if f and "/tests/fuzz/" not in f.group(2) and "compiler-rt" not in f.group(2) \
                and "/usr/" not in f.group(2):
            src = re.sub(r"^.*?/(backends|runtime|format|frontend|tools)/", r"\1/", f.group(2))
            func = re.sub(r"\(.*", "", f.group(1))
            frames.append(f"{src}:{f.group(3)} {func}")
    # The location UBSan names ("kernels_cpu.cc:114:22: runtime error") leads.
    u = re.search(r"(\S+\.(?:cc|cpp|h)):(\d+):\d+: runtime error", text)
    if u:
        src = re.sub(r"^.*?/(backends|runtime|format|frontend|tools)/", r"\1/", u.group(1))
        frames.insert(0, f"{src}:{u.group(2)}")
    return kind, frames[:3]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    fuzzer, out, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
    files = []
    for i in inputs:
        if os.path.isdir(i):
            files += [os.path.join(i, f) for f in sorted(os.listdir(i))]
        else:
            files.append(i)
    os.makedirs(out, exist_ok=True)
    seen = {}
    for f in files:
        kind, frames = report(fuzzer, f)
        if kind is None:
            continue
        key = kind + " | " + " <- ".join(frames)
        if key not in seen:
            h = hashlib.sha1(key.encode()).hexdigest()[:12]
            seen[key] = [h, 0, kind, frames]
            shutil.copy(f, os.path.join(out, h + ".bin"))
        seen[key][1] += 1
    target = os.path.basename(fuzzer)
    with open(os.path.join(out, "SUMMARY.md"), "w") as s:
        s.write(f"# {target}: {len(seen)} distinct findings ({sum(v[1] for v in seen.values())} "
                f"inputs), deduplicated by error kind and top 3 frames in the tree\n\n")
        s.write(f"Reproduce one: `{fuzzer} -runs=1 {out}/<file>.bin`\n\n")
        s.write("| file | inputs | finding | top frames |\n|---|---|---|---|\n")
        for key, (h, n, kind, frames) in sorted(seen.items(), key=lambda kv: -kv[1][1]):
            s.write(f"| {h}.bin | {n} | {kind} | {'<br>'.join(frames)} |\n")
    print(f"triage: {len(seen)} distinct findings from {len(files)} inputs -> {out}/SUMMARY.md")


if __name__ == "__main__":
    main()
