#!/usr/bin/python3
"""Compares two generation results (directories with ids.npy, lengths.npy and
scores.npy, as `tfrun --generate --output-dir` and scripts/generate_ref.py write
them): token ids and lengths must be identical, scores within --atol.

Prints one line, "PASS: ..." or "FAIL: ...", and exits 0 or 1.
"""
import argparse
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("got")
    ap.add_argument("want")
    ap.add_argument("--atol", type=float, default=1e-4)
    a = ap.parse_args()
    load = lambda d, n: np.load(os.path.join(d, n + ".npy"))
    gl, wl = load(a.got, "lengths"), load(a.want, "lengths")
    gi, wi = load(a.got, "ids"), load(a.want, "ids")
    gs, ws = load(a.got, "scores"), load(a.want, "scores")
    if gl.shape != wl.shape:
        print(f"FAIL: batch {gl.shape} vs {wl.shape}")
        return 1
    for b in range(len(wl)):
        g, w = gi[b, : gl[b]].tolist(), wi[b, : wl[b]].tolist()
        if g != w:
            print(f"FAIL: sequence {b}: got {g}, want {w}")
            return 1
    err = float(np.max(np.abs(gs - ws))) if len(ws) else 0.0
    if not err <= a.atol:
        print(f"FAIL: scores differ by {err:.3g} > {a.atol}: got {gs.tolist()}, want {ws.tolist()}")
        return 1
    print(f"PASS: {len(wl)} sequences identical (lengths {wl.tolist()}), "
          f"max score error {err:.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
