#!/usr/bin/env python3
"""tfc vs PyTorch on tutorial-floydhub at base size (issue 4's benchmark).

One command, same weights and inputs for both, in the same run:
  /usr/bin/python3 bench/bench_floydhub.py [--runs 10] [--threads 1 2]
      [--cases enc:1x128 encdec:1x128 enc:8x128 encdec:8x128 enc:1x512 encdec:1x512]
Model: d_model 512, 8 heads, d_ff 2048, 6+6 layers, vocab 32000. PyTorch runs the
tutorial's own code (scripts/torch_models.py) eagerly under torch.inference_mode().
Prints the median latency of each and the ratio (PyTorch / tfc; > 1 means tfc is
faster), and tfc's achieved GFLOP/s of the GEMMs. Needs python3-torch
(scripts/setup.sh --with-torch) and a built tree (scripts/build.sh).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

# PyTorch's OpenMP workers would otherwise spin between its runs and steal the
# cores from the tfrun subprocess measured in between: make them sleep when idle.
_TFRUN_ENV = dict(os.environ)
if __name__ == "__main__":  # only as a script: importing this file changes no environment
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import torch_models as tm  # noqa: E402

BIN = os.path.join(ROOT, "build", "bin")
P = dict(d_model=512, heads=8, d_ff=2048, layers=6, src_vocab=32000, tgt_vocab=32000)


def gemm_flops(kind, b, s):
    d, f, v, n = P["d_model"], P["d_ff"], P["tgt_vocab"], P["layers"]
    rows = b * s
    enc = n * rows * (4 * d * d + 2 * d * f) * 2
    if kind == "enc":
        return enc
    dec = n * rows * (4 * d * d + 4 * d * d + 2 * d * f) * 2
    return enc + dec + rows * d * v * 2


def median_ms(fn, runs):
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--cases", nargs="+",
                    default=["enc:1x128", "encdec:1x128", "enc:8x128", "encdec:8x128",
                             "enc:1x512", "encdec:1x512"])
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tfc-bench-")
    torch.manual_seed(0)
    params = tm.resolve_params("tutorial-floydhub", [f"{k}={v}" for k, v in P.items()] + ["max_len=512"])
    model = tm.build("tutorial-floydhub", params)
    tm.init_weights(model, 0)
    weights = os.path.join(tmp, "w.safetensors")
    tm.save_safetensors(weights, {k: v for k, v in tm.exported_state_dict(model).items()})
    print(f"{'case':<16}{'threads':>8}{'tfc ms':>10}{'torch ms':>10}{'ratio':>8}{'tfc GFLOP/s':>13}")
    for case in a.cases:
        kind, shape = case.split(":")
        b, s = map(int, shape.split("x"))
        yaml = os.path.join(ROOT, "bench", "tutorial-floydhub-encoder.yaml") if kind == "enc" \
            else os.path.join(ROOT, "models", "tutorial-floydhub.yaml")
        mbin = os.path.join(tmp, f"{kind}-{b}x{s}.bin")
        subprocess.run([os.path.join(BIN, "tfc"), "compile", yaml, "--weights", weights,
                        "-o", mbin, "--set", f"max_len={s}", "--set", f"max_batch={b}"] +
                       sum([["--set", f"{k}={v}"] for k, v in P.items()
                            if not (kind == "enc" and k == "tgt_vocab")], []),
                       check=True, stderr=subprocess.DEVNULL)
        rng = np.random.default_rng(0)
        src = rng.integers(1, 32000, size=(b, s)).astype(np.int64)
        np.save(os.path.join(tmp, "src.npy"), src)
        np.save(os.path.join(tmp, "tgt.npy"), src)
        for th in a.threads:
            ins = ["--input", f"src={tmp}/src.npy"] + ([] if kind == "enc" else ["--input", f"tgt={tmp}/tgt.npy"])
            out = subprocess.run([os.path.join(BIN, "tfrun"), mbin, "--threads", str(th),
                                  "--bench", str(a.runs)] + ins, check=True,
                                 capture_output=True, text=True, env=_TFRUN_ENV).stdout
            tfc_ms = float(out.split("median ")[1].split(" ms")[0])
            torch.set_num_threads(th)
            st = torch.from_numpy(src)
            with torch.inference_mode():
                if kind == "enc":
                    src_mask = (st != 0).unsqueeze(-2)
                    fn = lambda: model.encoder(st, src_mask)  # noqa: E731
                else:
                    fn = lambda: model(st, st)  # noqa: E731
                torch_ms = median_ms(fn, a.runs)
            gf = gemm_flops(kind, b, s) / (tfc_ms * 1e-3) / 1e9
            print(f"{case:<16}{th:>8}{tfc_ms:>10.2f}{torch_ms:>10.2f}{torch_ms / tfc_ms:>8.2f}{gf:>13.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
