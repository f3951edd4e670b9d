#!/usr/bin/env python3
"""Reduced precision on the CPU (issue 7): tfc f32 / bf16 / int8 against PyTorch
bf16 autocast, in one run, on the same weights and inputs.

  /usr/bin/python3 bench/bench_precision.py [--runs 10] [--torch-runs 3]
      [--threads 1 2] [--cases enc:1x128 encdec:1x128 enc:8x128 encdec:8x128 enc:1x512 encdec:1x512]

Model: tutorial-floydhub at base size (d_model 512, 8 heads, d_ff 2048, 6+6
layers, vocab 32000), as in bench/bench_floydhub.py. tfc compiles three
model.bin files (tfc compile --precision f32 | bf16 | int8). PyTorch runs the
tutorial's own modules (scripts/torch_models.py) with the weights pre-cast to
bf16 under torch.autocast("cpu", dtype=torch.bfloat16) and inference_mode.
Prints median latencies, the speedups (torch bf16 / tfc bf16, tfc f32 / tfc
bf16, tfc bf16 / tfc int8), each file's size against f32, and the GEMM rate of
each tfc run. Needs python3-torch (scripts/setup.sh --with-torch) and a built
tree (scripts/build.sh).
"""
import argparse
import os
import subprocess
import sys
import tempfile

# PyTorch's OpenMP workers would otherwise spin between its runs and steal the
# cores from the tfrun subprocess measured in between: make them sleep when idle.
_TFRUN_ENV = dict(os.environ)
if __name__ == "__main__":  # only as a script: importing this file changes no environment
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import torch_models as tm  # noqa: E402
from bench_floydhub import P, gemm_flops, median_ms  # noqa: E402

BIN = os.path.join(ROOT, "build", "bin")
PRECISIONS = ["f32", "bf16", "int8"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--torch-runs", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--cases", nargs="+",
                    default=["enc:1x128", "encdec:1x128", "enc:8x128", "encdec:8x128",
                             "enc:1x512", "encdec:1x512"])
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tfc-bench-precision-")
    torch.manual_seed(0)
    params = tm.resolve_params("tutorial-floydhub",
                               [f"{k}={v}" for k, v in P.items()] + ["max_len=512"])
    model = tm.build("tutorial-floydhub", params)
    tm.init_weights(model, 0)
    weights = os.path.join(tmp, "w.safetensors")
    tm.save_safetensors(weights, {k: v for k, v in tm.exported_state_dict(model).items()})
    model_bf16 = model.to(torch.bfloat16).eval()

    print(f"{'case':<14}{'thr':>4}{'f32 ms':>9}{'bf16 ms':>9}{'int8 ms':>9}{'torch bf16':>11}"
          f"{'bf16 vs torch':>14}{'bf16 vs f32':>12}{'int8 vs bf16':>13}"
          f"{'GFLOP/s f32/bf16/int8':>23}")
    sizes = {}
    for case in a.cases:
        kind, shape = case.split(":")
        b, s = map(int, shape.split("x"))
        yaml = os.path.join(ROOT, "bench", "tutorial-floydhub-encoder.yaml") if kind == "enc" \
            else os.path.join(ROOT, "models", "tutorial-floydhub.yaml")
        bins = {}
        for pr in PRECISIONS:
            bins[pr] = os.path.join(tmp, f"{kind}-{b}x{s}-{pr}.bin")
            subprocess.run([os.path.join(BIN, "tfc"), "compile", yaml, "--weights", weights,
                            "-o", bins[pr], "--precision", pr, "--set", f"max_len={s}",
                            "--set", f"max_batch={b}"] +
                           sum([["--set", f"{k}={v}"] for k, v in P.items()
                                if not (kind == "enc" and k == "tgt_vocab")], []),
                           check=True, stderr=subprocess.DEVNULL)
            sizes[(kind, pr)] = os.path.getsize(bins[pr])
        rng = np.random.default_rng(0)
        src = rng.integers(1, 32000, size=(b, s)).astype(np.int64)
        np.save(os.path.join(tmp, "src.npy"), src)
        np.save(os.path.join(tmp, "tgt.npy"), src)
        for th in a.threads:
            ins = ["--input", f"src={tmp}/src.npy"] + \
                ([] if kind == "enc" else ["--input", f"tgt={tmp}/tgt.npy"])
            ms = {}
            for pr in PRECISIONS:
                out = subprocess.run([os.path.join(BIN, "tfrun"), bins[pr], "--threads", str(th),
                                      "--bench", str(a.runs)] + ins, check=True,
                                     capture_output=True, text=True, env=_TFRUN_ENV).stdout
                ms[pr] = float(out.split("median ")[1].split(" ms")[0])
            torch.set_num_threads(th)
            st = torch.from_numpy(src)
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
                if kind == "enc":
                    src_mask = (st != 0).unsqueeze(-2)
                    fn = lambda: model_bf16.encoder(st, src_mask)  # noqa: E731
                else:
                    fn = lambda: model_bf16(st, st)  # noqa: E731
                torch_ms = median_ms(fn, a.torch_runs)
            gf = "/".join(f"{gemm_flops(kind, b, s) / (ms[pr] * 1e-3) / 1e9:.0f}"
                          for pr in PRECISIONS)
            print(f"{case:<14}{th:>4}{ms['f32']:>9.2f}{ms['bf16']:>9.2f}{ms['int8']:>9.2f}"
                  f"{torch_ms:>11.2f}{torch_ms / ms['bf16']:>13.2f}x"
                  f"{ms['f32'] / ms['bf16']:>11.2f}x{ms['bf16'] / ms['int8']:>12.2f}x{gf:>23}",
                  flush=True)
    for kind in sorted({k for k, _ in sizes}):
        f = sizes[(kind, "f32")]
        print(f"model.bin size ({kind}): f32 {f / 1e6:.1f} MB, bf16 {sizes[(kind, 'bf16')] / f:.3f}x, "
              f"int8 {sizes[(kind, 'int8')] / f:.3f}x")


if __name__ == "__main__":
    main()
