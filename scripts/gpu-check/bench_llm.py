"""End-to-end LLM generation on CUDA: tfrun --generate on the model.bin files of
make_llm.py (Qwen2.5-0.5B's and Llama-3.2-1B's shapes), as issue 24's CPU benchmark
measures them (bench/bench_llama.py): prefill tokens/s of a 512-token prompt, and
decode tokens/s at batch 1 from a 128-token prompt for 128 new tokens.

  bench_llm.py BUILD LLM_DIR [--runs N] [--profile]

Prefill: a 512-token prompt and one new token (the prompt's last token is the first
decoding step, as in every engine), 512 / the median time. Decode: 128 / (the median
time of 129 new tokens - that of 1), so the prompt's cost drops out. eos is the
vocabulary's last id, which these weights never pick (each run's token count is
checked). Runs are interleaved per model (f32, bf16, int8, int4 in turn).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

VOCAB = {"qwen2.5-0.5b": 151936, "llama-3.2-1b": 128256}
# (label, model.bin suffix, tfrun --dtype)
CONFIGS = [("f32", "f32", "f32"), ("bf16", "f32", "bf16"), ("int8", "int8", "f32"),
           ("int4", "int4", "f32")]
LINE = re.compile(r"generate: median ([0-9.]+) ms over \d+ runs, (\d+) tokens")


def gen_ms(tfrun, model, dtype, prompt, new, eos, runs, profile=False):
    cmd = [tfrun, model, "--device", "cuda", "--dtype", dtype, "--generate", "--input",
           f"input_ids={prompt}", "--max-len", str(new), "--eos-id", str(eos),
           "--bench", str(runs)] + (["--profile"] if profile else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if profile:
        print(p.stdout)
    m = LINE.search(p.stdout + p.stderr)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout[-800:]}{p.stderr[-800:]}")
    if int(m.group(2)) != new:
        raise RuntimeError(f"{model}: {m.group(2)} tokens, not {new} (eos was picked)")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("llm")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", action="store_true",
                    help="first, tfrun --profile of 32 decoding steps of each shape in bf16 "
                         "(each kernel synchronized: where a step's time goes)")
    a = ap.parse_args()
    tfrun = os.path.join(a.build, "bin", "tfrun")
    p128, p512 = (os.path.join(a.llm, f"prompt{n}.npy") for n in (128, 512))
    if a.profile:
        for shape, vocab in VOCAB.items():
            print(f"## {shape}, bf16: tfrun --profile, 32 new tokens after 128")
            gen_ms(tfrun, os.path.join(a.llm, f"{shape}-f32.bin"), "bf16", p128, 32,
                   vocab - 1, 1, profile=True)
    print("| shape | weights | prefill 512 tokens/s | decode tokens/s | decode ms/token |")
    print("|---|---|---|---|---|")
    for shape, vocab in VOCAB.items():
        eos = vocab - 1
        for label, suffix, dtype in CONFIGS:
            model = os.path.join(a.llm, f"{shape}-{suffix}.bin")
            try:
                pre = gen_ms(tfrun, model, dtype, p512, 1, eos, a.runs)
                one = gen_ms(tfrun, model, dtype, p128, 1, eos, a.runs)
                full = gen_ms(tfrun, model, dtype, p128, 129, eos, a.runs)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print(f"| {shape} | {label} | failed: {str(e).splitlines()[0][:120]} | | |")
                continue
            per = (full - one) / 128
            print(f"| {shape} | {label} | {512 / pre * 1000:.0f} | {1000 / per:.0f} | "
                  f"{per:.2f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
