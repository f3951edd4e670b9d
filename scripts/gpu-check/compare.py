#!/usr/bin/env python3
"""The same model.bin on the CPU and on CUDA (scripts/gpu-check/run.sh, step 3).

  python3 scripts/gpu-check/compare.py BUNDLE_ROOT

For each small model pack.sh compiled: the forward pass (tfrun's deterministic example
input) on the CPU and on CUDA in f32, f16 and bf16, as the max abs difference of every
output relative to the CPU output's max abs value; greedy and beam-4 generation on both,
as the fraction of rows whose ids agree and the largest score difference. int8 and int4
model.bin files run weight-only on CUDA, where the CPU also rounds the activations: each
is compared with the f32 model on the CPU, and CUDA's distance must be at most 1.5x the
CPU's. Prints one line per check and
exits 1 when a check is outside its bound: f32 1e-4, f16 and bf16 3e-2 of the scale
(generation may still differ on near-ties, so ids are reported, not asserted).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

B = sys.argv[1]
TFRUN = os.path.join(B, "bin", "tfrun")
M = os.path.join(B, "models")
BOUND = {"f32": 1e-4, "f16": 3e-2, "bf16": 3e-2}
# --dtype bf16 keeps every activation in bf16, the residual stream too, as PyTorch's
# .bfloat16() does; on make_hf.py's LLaMA-family models (weights of std 0.2) PyTorch's
# own bf16 logits are 2.2e-2 to 4.9e-2 of the scale off its f32 ones.
BOUND_BF16_LLAMA = 1e-1
tmp = tempfile.mkdtemp(prefix="tfc-compare-")
bad = []


def run(args):
    r = subprocess.run([TFRUN] + args, capture_output=True, text=True, timeout=60)
    return r.returncode, (r.stderr.strip().splitlines() or [""])[-1]


def outputs(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def forward(name, dtypes=("f32", "f16", "bf16"), bounds=BOUND):
    m = os.path.join(M, name + ".bin")
    ref_dir = os.path.join(tmp, name + "-cpu")
    rc, err = run([m, "--output-dir", ref_dir])
    if rc:
        bad.append(f"{name} cpu: {err}")
        print(f"{name:<20} forward cpu FAILED: {err}")
        return
    ref = outputs(ref_dir)
    for dt in dtypes:
        d = os.path.join(tmp, f"{name}-cuda-{dt}")
        rc, err = run([m, "--device", "cuda", "--dtype", dt, "--output-dir", d])
        if rc:
            bad.append(f"{name} cuda {dt}: {err}")
            print(f"{name:<20} forward cuda {dt:<5} FAILED: {err}")
            continue
        got = outputs(d)
        for k, r in ref.items():
            scale = float(np.max(np.abs(r))) or 1.0
            diff = float(np.max(np.abs(got[k].astype(np.float64) - r))) / scale
            ok = diff <= bounds[dt]
            if not ok:
                bad.append(f"{name} {dt} {k}: {diff:.2e}")
            print(f"{name:<20} forward cuda {dt:<5} {k}: max|diff|/max|cpu| {diff:.2e} "
                  f"{'ok' if ok else 'OUT OF BOUND'}")


def generate(name, inp, beam, extra=()):
    m = os.path.join(M, name + ".bin")
    res = {}
    for dev in ("cpu", "cuda"):
        d = os.path.join(tmp, f"{name}-gen{beam}-{dev}")
        rc, err = run([m, "--generate", "--beam", str(beam), "--max-len", "12", "--input", inp,
                       "--output-dir", d, "--device", dev] + list(extra))
        if rc:
            bad.append(f"{name} generate beam {beam} {dev}: {err}")
            print(f"{name:<20} generate beam {beam} {dev} FAILED: {err}")
            return
        res[dev] = outputs(d)
    same = np.mean([np.array_equal(a, b) for a, b in zip(res["cpu"]["ids"], res["cuda"]["ids"])])
    sd = float(np.max(np.abs(res["cpu"]["scores"] - res["cuda"]["scores"])))
    print(f"{name:<20} generate beam {beam}: rows with equal ids {same:.0%}, "
          f"max |score diff| {sd:.2e}")


rng = np.random.default_rng(0)
src = os.path.join(tmp, "src.npy")
np.save(src, rng.integers(3, 500, size=(4, 10)).astype(np.int64))
prompt = os.path.join(tmp, "prompt.npy")
np.save(prompt, rng.integers(3, 1000, size=(3, 7)).astype(np.int64))

forward("floydhub")
forward("torch-transformer")
forward("gpt2")
forward("bert")
forward("floydhub-bf16", ("f32",))
for beam in (1, 4):
    generate("floydhub", f"src={src}", beam)
    generate("torch-transformer", f"src={src}", beam)
generate("gpt2", f"tokens={prompt}", 1, ["--bos-id", "1", "--eos-id", "2"])
# The LLaMA family: rotary, grouped- and multi-query attention, q/k norms; T5's
# relative position bias (make_hf.py).
for name in ("llama-gqa", "llama-mqa", "qwen3", "gemma2", "t5"):
    if os.path.exists(os.path.join(M, name + ".bin")):
        forward(name, bounds=BOUND if name == "t5" else {**BOUND, "bf16": BOUND_BF16_LLAMA})
        for beam in (1, 4):
            generate(name, f"input_ids={prompt}", beam)


def forward_quantized(name, base):
    """A quantized model.bin against its f32 model on the CPU: CUDA's weight-only
    int8/int4 (f32 activations) must be at least about as close as the CPU's, which
    also rounds the activations (u8 per row for per-row int8, s16 blocks for
    group-wise int8, s8 blocks for int4)."""
    outs = {}
    for label, model, dev in (("f32", base, "cpu"), ("cpu", name, "cpu"), ("cuda", name, "cuda")):
        d = os.path.join(tmp, f"{name}-q-{label}")
        rc, err = run([os.path.join(M, model + ".bin"), "--device", dev, "--output-dir", d])
        if rc:
            bad.append(f"{name} {label}: {err}")
            print(f"{name:<20} forward {label} FAILED: {err}")
            return
        outs[label] = outputs(d)
    for k, r in outs["f32"].items():
        scale = float(np.max(np.abs(r))) or 1.0
        e_cpu = float(np.max(np.abs(outs["cpu"][k].astype(np.float64) - r))) / scale
        e_cuda = float(np.max(np.abs(outs["cuda"][k].astype(np.float64) - r))) / scale
        ok = e_cuda <= 1.5 * e_cpu
        if not ok:
            bad.append(f"{name} {k}: cuda {e_cuda:.2e} vs cpu {e_cpu:.2e} from f32")
        print(f"{name:<20} forward {k}: max|diff|/max|f32| cpu {e_cpu:.2e}, cuda {e_cuda:.2e} "
              f"{'ok' if ok else 'CUDA FARTHER FROM F32'}")


# int8 and int4 weights: weight-only on CUDA, where the CPU also rounds the
# activations, so CUDA and the CPU differ by that rounding; each is compared
# with the f32 model (the same seed's or directory's weights).
forward_quantized("floydhub-int8", "floydhub")
for beam in (1, 4):
    generate("floydhub-int8", f"src={src}", beam)
for name in ("llama-gqa-int8", "llama-gqa-int4", "qwen3-int8", "qwen3-int4"):
    if os.path.exists(os.path.join(M, name + ".bin")):
        forward_quantized(name, name.rsplit("-", 1)[0])
        for beam in (1, 4):
            generate(name, f"input_ids={prompt}", beam)
if bad:
    print(f"{len(bad)} check(s) failed: " + "; ".join(bad))
    sys.exit(1)
print("all checks passed")
