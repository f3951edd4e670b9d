#!/usr/bin/python3
"""The trained demo (models/demo-reverse.yaml): digit strings <-> token ids.

  demo_reverse.py encode 31415 9876543210 ... -o src.npy   # padded [batch, 12] ids
  demo_reverse.py random N [--seed S] -o src.npy             # N random strings, 1 to 12 digits
  demo_reverse.py check src.npy OUTDIR                       # OUTDIR from tfrun --generate --output-dir

Ids: pad 0, bos 1, eos 2, digit d = d + 3. The model reverses the digits.
`check` prints each source with the generated reversal and whether it is right,
and exits 1 if any is wrong.
"""
import argparse
import os
import sys

import numpy as np

PAD, MAX_DIGITS = 0, 12


def encode(digits, out):
    for d in digits:
        if not d.isdigit() or not 1 <= len(d) <= MAX_DIGITS:
            sys.exit(f"demo_reverse.py: '{d}' is not 1 to {MAX_DIGITS} digits")
    ids = np.full((len(digits), MAX_DIGITS), PAD, dtype=np.int64)
    for i, d in enumerate(digits):
        ids[i, : len(d)] = [int(c) + 3 for c in d]
    np.save(out, ids)


def text(ids):
    return "".join(str(int(t) - 3) if 3 <= t <= 12 else f"<{int(t)}>" for t in ids)


def check(src_path, outdir):
    src = np.load(src_path)
    ids = np.load(os.path.join(outdir, "ids.npy"))
    lens = np.load(os.path.join(outdir, "lengths.npy"))
    wrong = 0
    for b in range(len(src)):
        s = text([t for t in src[b] if t != PAD])
        g = text(ids[b, : lens[b]])
        ok = g == s[::-1]
        wrong += not ok
        print(f"{s:>12} -> {g:<12} {'ok' if ok else 'WRONG (want ' + s[::-1] + ')'}")
    return 1 if wrong else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("encode")
    e.add_argument("digits", nargs="+")
    e.add_argument("-o", required=True)
    r = sub.add_parser("random")
    r.add_argument("n", type=int)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("-o", required=True)
    c = sub.add_parser("check")
    c.add_argument("src")
    c.add_argument("outdir")
    a = ap.parse_args()
    if a.cmd == "encode":
        encode(a.digits, a.o)
        return 0
    if a.cmd == "random":
        rng = np.random.default_rng(a.seed)
        encode(["".join(str(d) for d in rng.integers(0, 10, rng.integers(1, MAX_DIGITS + 1)))
                for _ in range(a.n)], a.o)
        return 0
    return check(a.src, a.outdir)


if __name__ == "__main__":
    sys.exit(main())
