#!/usr/bin/env python3
"""Compares two .npy files: prints 'PASS: max abs error E' or 'FAIL: ...' and exits
non-zero on failure. Used by the lit runtime tests.

Usage: compare_npy.py ACTUAL.npy EXPECTED.npy [--atol 1e-4]
"""
import argparse
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("actual")
    ap.add_argument("expected")
    ap.add_argument("--atol", type=float, default=1e-4)
    a = ap.parse_args()
    x, y = np.load(a.actual), np.load(a.expected)
    if x.shape != y.shape:
        print(f"FAIL: shape {list(x.shape)} != expected {list(y.shape)}")
        return 1
    err = float(np.max(np.abs(x.astype(np.float64) - y))) if x.size else 0.0
    ok = bool(np.isfinite(x).all()) and err <= a.atol
    print(f"{'PASS' if ok else 'FAIL'}: max abs error {err:.3e} (atol {a.atol:g}), shape {list(x.shape)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
