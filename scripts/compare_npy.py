#!/usr/bin/env python3
"""Compares two .npy files: prints 'PASS: max abs error E' or 'FAIL: ...' and exits
non-zero on failure. Used by the lit runtime tests.

Usage: compare_npy.py ACTUAL.npy EXPECTED.npy [--atol 1e-4 | --rtol 2e-2] [--top1 0.99]

--rtol R: the reduced-precision tolerance: max |actual - expected| must be at
most R * max |expected| (relative to the tensor's scale; an elementwise relative
error is meaningless for logits near zero).
--top1 F: the argmax over the last axis must agree on at least a fraction F of
the positions.
"""
import argparse
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("actual")
    ap.add_argument("expected")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=None)
    ap.add_argument("--top1", type=float, default=None)
    a = ap.parse_args()
    x, y = np.load(a.actual), np.load(a.expected)
    if x.shape != y.shape:
        print(f"FAIL: shape {list(x.shape)} != expected {list(y.shape)}")
        return 1
    err = float(np.max(np.abs(x.astype(np.float64) - y))) if x.size else 0.0
    ok = bool(np.isfinite(x).all())
    if a.rtol is not None:
        scale = float(np.max(np.abs(y))) if y.size else 0.0
        rel = err / scale if scale > 0 else err
        ok = ok and rel <= a.rtol
        msg = f"max abs error {err:.3e}, relative {rel:.3e} (rtol {a.rtol:g} of max |expected| {scale:.3g})"
    else:
        ok = ok and err <= a.atol
        msg = f"max abs error {err:.3e} (atol {a.atol:g})"
    if a.top1 is not None and x.size:
        agree = float(np.mean(np.argmax(x, -1) == np.argmax(y, -1)))
        ok = ok and agree >= a.top1
        msg += f", top-1 agreement {agree:.4f} (min {a.top1:g})"
    print(f"{'PASS' if ok else 'FAIL'}: {msg}, shape {list(x.shape)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
