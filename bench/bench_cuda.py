#!/usr/bin/env python3
"""tfc on CUDA vs PyTorch on the same GPU (issue 6): the tutorial-floydhub encoder at base size.

  /usr/bin/python3 bench/bench_cuda.py [--runs 20] [--batch 1 8 32] [--seq 128 512]
      [--dtypes f32 f16 bf16] [--device 0] [--build build]

Model: the encoder of tutorial-floydhub (bench/tutorial-floydhub-encoder.yaml), d_model
512, 8 heads, d_ff 2048, 6 layers, vocab 32000, with the weights bench_floydhub.py uses
(scripts/torch_models.py, seed 0). For each batch x sequence length, tfc compiles one f32
model.bin and `tfrun model.bin --device cuda --dtype {f32,f16,bf16} --bench N` times it;
PyTorch runs the tutorial's own encoder eagerly on the same GPU under
torch.inference_mode(), in f32, model.half() and model.to(torch.bfloat16), with
torch.cuda.synchronize() around each timed run (TF32 off, PyTorch's default for matmuls).

tfrun's --bench times whole tfrun_session_run calls, which include the host<->device
copies (the token ids up, the f32 output [B, S, 512] down). The 'torch' column times the
forward alone (ids already on the GPU, output left there); 'torch+io' adds the same copies
(ids up, output widened to f32 and copied down). Ratios are PyTorch / tfc: above 1, tfc
is faster. Each tfc output is also compared with PyTorch's f32 output (max abs error),
next to PyTorch's own error in the same dtype.

A GPU machine often lacks the compiler's toolchain (LLVM/MLIR): `--prepare DIR` (here, with tfc
and any PyTorch) writes DIR/enc.bin, DIR/probe.bin and DIR/weights.npz, and `--prebuilt DIR`
(there, with tfrun, numpy and torch) times them without tfc. Prepared weights are rounded to 7
levels per tensor (3-bit codes times a scale) so that DIR compresses about 10x for the trip;
tfc and PyTorch get the same rounded f32 values, so the comparison is unchanged. One model.bin
(max_batch = the largest --batch, max_len 512) serves every case: shapes up to the compiled
bounds are run-time shapes.

Without torch.cuda (a CPU-only PyTorch), only tfrun is timed and the reference output is
computed by PyTorch f32 on the CPU. Without a GPU (tfrun --device cuda reports 'no CUDA
device'), it prints one line and exits 0. Needs a tree built with CUDA (scripts/build.sh
on a machine with nvcc) and, for the comparison, python3-torch
(scripts/setup.sh --with-torch).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DTYPES = ["f32", "f16", "bf16"]


def no_gpu_line(reason):
    return f"no CUDA device: {reason}; the CUDA benchmarks need an NVIDIA GPU"


def compile_probe(bin_dir, probe):
    r = subprocess.run([os.path.join(bin_dir, "tfc"), "compile",
                        os.path.join(ROOT, "models", "demo-reverse.yaml"),
                        "--weights", os.path.join(ROOT, "models", "demo-reverse.safetensors"),
                        "-o", probe], capture_output=True, text=True)
    return None if r.returncode == 0 else f"tfc compile of the probe model failed: {r.stderr.strip()}"


def probe_cuda(bin_dir, device, probe):
    """Runs the demo model (compiled at `probe`) on the GPU. Returns None when it runs,
    else the reason as (message, is_no_gpu)."""
    r = subprocess.run([os.path.join(bin_dir, "tfrun"), probe, "--device", f"cuda:{device}"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        return None
    msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
    msg = msg.replace("tfrun: error: ", "", 1)
    if msg.startswith("no CUDA device: "):
        return (msg[len("no CUDA device: "):], True)
    if "no CUDA device" in msg or "built without CUDA" in msg:
        return (msg, True)
    return (msg, False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="timed runs per case (median)")
    ap.add_argument("--warmup", type=int, default=3, help="PyTorch warm-up runs")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--seq", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--dtypes", nargs="+", default=DTYPES, choices=DTYPES)
    ap.add_argument("--device", type=int, default=0, help="CUDA ordinal")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="build directory holding bin/tfc and bin/tfrun")
    ap.add_argument("--prepare", metavar="DIR",
                    help="compile the models and write the weights into DIR, then exit "
                         "(no GPU needed)")
    ap.add_argument("--prebuilt", metavar="DIR",
                    help="time the models that --prepare wrote into DIR (no tfc needed)")
    a = ap.parse_args()
    if a.runs <= 0 or max(a.seq) > 512 or min(a.seq) <= 0 or min(a.batch) <= 0:
        sys.exit("bench_cuda.py: --runs, --batch and --seq must be positive, --seq at most 512")
    if a.prepare and a.prebuilt:
        sys.exit("bench_cuda.py: --prepare and --prebuilt exclude each other")
    bin_dir = os.path.join(a.build, "bin")
    tools = ("tfrun",) if a.prebuilt else ("tfc",) if a.prepare else ("tfc", "tfrun")
    for tool in tools:
        if not os.access(os.path.join(bin_dir, tool), os.X_OK):
            sys.exit(f"bench_cuda.py: {os.path.join(bin_dir, tool)} not found; build the tree "
                     "first (scripts/build.sh) or pass --build")
    work = a.prebuilt or a.prepare or tempfile.mkdtemp(prefix="tfc-bench-cuda-")
    os.makedirs(work, exist_ok=True)
    probe = os.path.join(work, "probe.bin")
    if not a.prebuilt:
        err = compile_probe(bin_dir, probe)
        if err:
            print(f"bench_cuda.py: {err}", file=sys.stderr)
            return 1

    if not a.prepare:
        # The GPU check comes first, and needs neither numpy nor torch.
        why = probe_cuda(bin_dir, a.device, probe)
        if why is not None:
            msg, no_gpu = why
            if no_gpu:
                print(no_gpu_line(msg))
                return 0
            print(f"bench_cuda.py: tfrun --device cuda:{a.device} failed on the probe model: "
                  f"{msg}", file=sys.stderr)
            return 1

    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"bench_cuda.py: {e}; needs numpy and python3-torch (scripts/setup.sh --with-torch)",
              file=sys.stderr)
        return 1
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import torch_models as tm
    from bench_floydhub import P, gemm_flops

    have_cuda = torch.cuda.is_available() and not a.prepare
    dev = torch.device(f"cuda:{a.device}" if have_cuda else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False  # f32 means f32, as in tfc
    torch.backends.cudnn.allow_tf32 = False

    torch.manual_seed(0)
    params = tm.resolve_params("tutorial-floydhub",
                               [f"{k}={v}" for k, v in P.items()] + ["max_len=512"])
    model = tm.build("tutorial-floydhub", params)
    codes_path = os.path.join(work, "weights.npz")
    mbin = os.path.join(work, "enc.bin")
    if a.prepare or a.prebuilt:
        # 7 levels per parameter: the same f32 values on both sides, and a DIR that
        # compresses for the trip to the GPU machine.
        if a.prepare:
            tm.init_weights(model, 0)
            codes = {}
            for k, p in model.encoder.named_parameters():
                w = p.detach().numpy().astype(np.float32)
                scale = np.float32(max(float(np.abs(w).max()), 1e-30) / 3)
                codes[k + ".codes"] = np.clip(np.rint(w / scale), -3, 3).astype(np.int8)
                codes[k + ".scale"] = np.array(scale, dtype=np.float32)
            np.savez(codes_path, **codes)
        else:
            codes = dict(np.load(codes_path))
        with torch.no_grad():
            for k, p in model.encoder.named_parameters():
                w = codes[k + ".codes"].astype(np.float32) * codes[k + ".scale"]
                p.copy_(torch.from_numpy(w))
    else:
        tm.init_weights(model, 0)
    if not a.prebuilt:
        weights = os.path.join(work, "w.safetensors")
        tm.save_safetensors(weights, {k: v for k, v in tm.exported_state_dict(model).items()})
        r = subprocess.run(
            [os.path.join(bin_dir, "tfc"), "compile",
             os.path.join(ROOT, "bench", "tutorial-floydhub-encoder.yaml"),
             "--weights", weights, "-o", mbin, "--set", "max_len=512",
             "--set", f"max_batch={max(a.batch)}"] +
            sum([["--set", f"{k}={v}"] for k, v in P.items() if k != "tgt_vocab"], []),
            capture_output=True, text=True)
        os.remove(weights)
        if r.returncode != 0:
            print(f"bench_cuda.py: tfc compile failed: {r.stderr.strip()}", file=sys.stderr)
            return 1
        if a.prepare:
            print(f"bench_cuda.py: wrote {mbin}, {probe} and {codes_path}")
            return 0
    tmp = tempfile.mkdtemp(prefix="tfc-bench-cuda-")
    encoder = model.encoder.to(dev).eval()
    tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    encoders = {}
    if have_cuda:
        import copy
        for dt in a.dtypes:
            encoders[dt] = encoder if dt == "f32" else copy.deepcopy(encoder).to(tdt[dt])

    # The tutorial fills masked scores with -1e9, which PyTorch refuses to store in f16
    # ("value cannot be converted to type at::Half without overflow"). For the f16 runs a
    # fill below f16's range becomes f16's lowest value: the same softmax (exp() of it is
    # 0; the inputs here have no padding, so no row is fully masked).
    orig_masked_fill = torch.Tensor.masked_fill

    def f16_safe_masked_fill(self, mask, value):
        if self.dtype == torch.float16 and isinstance(value, (int, float)) \
                and value < torch.finfo(torch.float16).min:
            value = torch.finfo(torch.float16).min
        return orig_masked_fill(self, mask, value)

    def sync():
        if have_cuda:
            torch.cuda.synchronize(dev)

    def median_ms(fn, runs, warmup):
        for _ in range(warmup):
            fn()
        ts = []
        for _ in range(runs):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            ts.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(ts))

    name = torch.cuda.get_device_name(dev) if have_cuda else "(PyTorch has no CUDA)"
    print(f"tfc (tfrun --device cuda:{a.device}) vs PyTorch {torch.__version__} eager on {name}: "
          "tutorial-floydhub encoder, d_model 512, 8 heads, d_ff 2048, 6 layers, vocab 32000")
    print("tfc ms: tfrun --bench, whole tfrun_session_run calls INCLUDING the host<->device "
          "copies (ids up, f32 output down); torch: the forward alone; torch+io: with the same "
          "copies")
    print(f"median of {a.runs} runs; ratio = PyTorch / tfc (> 1: tfc is faster); TFLOP/s: tfc's "
          "GEMM flops only; err: max |x - PyTorch f32| of the encoder output")
    if not have_cuda:
        print("note: torch.cuda is not available: tfrun only; the reference output comes from "
              "PyTorch f32 on the CPU")
    print()
    print(f"{'case':<10}{'dtype':>6}{'tfc ms':>10}{'torch ms':>10}{'torch+io':>10}"
          f"{'torch/tfc':>11}{'+io/tfc':>9}{'tfc TF/s':>10}{'err tfc':>10}{'err torch':>11}  check")

    failures = []
    for b in a.batch:
        for s in a.seq:
            case = f"{b}x{s}"
            rng = np.random.default_rng(0)
            src = rng.integers(1, 32000, size=(b, s)).astype(np.int64)
            np.save(os.path.join(tmp, "src.npy"), src)

            # Reference: PyTorch f32 (on the GPU, or on the CPU without torch.cuda).
            with torch.inference_mode():
                st = torch.from_numpy(src).to(dev)
                ref = encoder(st, (st != 0).unsqueeze(-2)).float().cpu().numpy()

            for dt in a.dtypes:
                outdir = os.path.join(tmp, f"out-{case}-{dt}")
                os.makedirs(outdir, exist_ok=True)
                r = subprocess.run([os.path.join(bin_dir, "tfrun"), mbin, "--device",
                                    f"cuda:{a.device}", "--dtype", dt, "--bench", str(a.runs),
                                    "--input", f"src={tmp}/src.npy", "--output-dir", outdir],
                                   capture_output=True, text=True)
                if r.returncode != 0 or "median " not in r.stdout:
                    err = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
                    print(f"{case:<10}{dt:>6}  tfrun failed: {err}", flush=True)
                    failures.append(f"{case} {dt}")
                    continue
                tfc_ms = float(r.stdout.split("median ")[1].split(" ms")[0])
                out = np.load(os.path.join(outdir, "memory.npy"))
                err_tfc = float(np.max(np.abs(out.astype(np.float64) - ref)))

                torch_ms = torch_io_ms = err_torch = float("nan")
                if have_cuda:
                    enc = encoders[dt]
                    torch.Tensor.masked_fill = f16_safe_masked_fill if dt == "f16" \
                        else orig_masked_fill
                    try:
                        with torch.inference_mode():
                            st = torch.from_numpy(src).to(dev)
                            mask = (st != 0).unsqueeze(-2)
                            torch_out = enc(st, mask).float().cpu().numpy()
                            err_torch = float(np.max(np.abs(torch_out.astype(np.float64) - ref)))
                            torch_ms = median_ms(lambda: enc(st, mask), a.runs, a.warmup)

                            def with_io():
                                x = torch.from_numpy(src).to(dev)
                                return enc(x, (x != 0).unsqueeze(-2)).float().cpu()

                            torch_io_ms = median_ms(with_io, a.runs, a.warmup)
                    finally:
                        torch.Tensor.masked_fill = orig_masked_fill

                # A tfc output far worse than PyTorch's own in the same dtype is suspect.
                floor = 1e-3 if dt == "f32" else 1e-2
                if have_cuda:
                    ok = err_tfc <= 4 * err_torch + floor
                else:
                    ok = dt != "f32" or err_tfc <= floor
                if not ok:
                    failures.append(f"{case} {dt}: err {err_tfc:.2e}")
                tf = gemm_flops("enc", b, s) / (tfc_ms * 1e-3) / 1e12

                def col(x, w, fmt, suffix=""):
                    return f"{'-':>{w}}" if x != x else f"{format(x, fmt) + suffix:>{w}}"
                print(f"{case:<10}{dt:>6}{tfc_ms:>10.3f}{col(torch_ms, 10, '.3f')}"
                      f"{col(torch_io_ms, 10, '.3f')}{col(torch_ms / tfc_ms, 11, '.2f', 'x')}"
                      f"{col(torch_io_ms / tfc_ms, 9, '.2f', 'x')}{tf:>10.1f}{err_tfc:>10.1e}"
                      f"{col(err_torch, 11, '.1e')}  {'ok' if ok else 'CHECK'}", flush=True)

    print()
    if failures:
        print(f"{len(failures)} case(s) failed or look wrong: " + "; ".join(failures))
        return 1
    print("all cases ran; tfc's errors are in line with PyTorch's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
