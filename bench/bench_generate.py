#!/usr/bin/env python3
"""Greedy generation on tutorial-floydhub at base size: tfrun vs PyTorch, and the bound.

One command, the same weights and source for all, in the same run:
  /usr/bin/python3 bench/bench_generate.py [--threads 1 2] [--new-tokens 64]
      [--src-len 32] [--runs 5] [--torch-runs 3] [--skip-tfrun] [--skip-tutorial]
Model: d_model 512, 8 heads, d_ff 2048, 6+6 layers, vocab 32000, batch 1; a 32-token
source, 64 new tokens. Three decoders, each timed as a whole (encoder included):

  tfrun     build/bin/tfrun model.bin --generate --input src=src.npy --max-len N
            --threads T --bench R; parses "generate: median X ms over R runs, T tokens"
            (see parse_tfrun(); skipped with a message while tfrun lacks the flags)
  tutorial  the FloydHub tutorial's translate() loop (scripts/generate_ref.py
            greedy_tutorial): no cache, the decoder re-runs over the whole prefix and
            the output projection over every position at each step
  kv-cache  the same modules with a KV cache (cached_greedy below): per decoder layer
            the self-attention K/V of past positions are kept, the cross-attention K/V
            are computed once from the encoder output, and each step runs one position.
            Its tokens are checked against the tutorial loop's.

Exactly N new tokens are forced: PyTorch runs with eos = -1 (never matches), and tfc
compiles the model with eos_id = the lowest id >= 3 that the greedy output does not
contain, so tfrun never meets it either (tfrun's tokens are checked when it can write
them). Prints tokens/s, the ratios tfrun/tutorial and tfrun/kv-cache (> 1: tfrun is
faster), and the memory-bandwidth bound: the f32 weight bytes one decode step must read
(the decoder layers without the cross-attention K/V projections, which run once in
encode, plus the final norm and the output projection) over the bandwidth of a large
numpy copy (1 GiB, best of 5, read + write bytes), measured in the same run. The copy is
single-threaded; on the 2-core dev machine a 2-thread torch copy_ measured about the same
bandwidth (36-39 GB/s vs numpy's 39-41), so one bound serves both thread counts.
Example (2-core VM, 2024-11): tfrun 194 / 253 tokens/s at 1 / 2 threads, the tutorial
loop 1.5 / 1.4, the kv-cache loop 38 / 34; bound 255 tokens/s (154 MB per token at
39 GB/s). With 2 threads tfrun is very sensitive to other load on the machine.
Note: this Debian torch is built with BLAS_INFO=generic (netlib reference BLAS), so its
GEMMs are much slower than a pip/MKL torch; compare with that in mind.
"""
import argparse
import os
import re
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
import torch.nn.functional as F  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import generate_ref as gr  # noqa: E402
import torch_models as tm  # noqa: E402

BIN = os.path.join(ROOT, "build", "bin")
P = dict(d_model=512, heads=8, d_ff=2048, layers=6, src_vocab=32000, tgt_vocab=32000)
BOS, PAD = 1, 0


# -------------------------------------------------------------------------------------
# tfrun's --bench line. Adjust here if the format changes.
# -------------------------------------------------------------------------------------
_MEDIAN = re.compile(r"median\s*[=:]?\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*(ms|s|us)\b")
_TOKENS = re.compile(r"(\d+)\s+(?:new\s+)?tokens?\b")
_UNIT = {"s": 1e3, "ms": 1.0, "us": 1e-3}


def parse_tfrun(text, default_tokens):
    """(median ms per generate call, tokens per call) from tfrun's output: prefers a line
    that starts with 'generate', otherwise the first line that has a median."""
    lines = text.splitlines()
    cands = [ln for ln in lines if ln.strip().lower().startswith("generate")] + \
            [ln for ln in lines if "median" in ln]
    for ln in cands:
        m = _MEDIAN.search(ln)
        if m:
            ms = float(m.group(1)) * _UNIT[m.group(2)]
            t = _TOKENS.search(ln)
            return ms, int(t.group(1)) if t else default_tokens
    raise ValueError("no 'median X ms' in tfrun's output:\n" + text)


# -------------------------------------------------------------------------------------
# PyTorch greedy with a KV cache, over the tutorial's modules (same weights).
# -------------------------------------------------------------------------------------
def _split(x, h, dk):            # [1, t, d] -> [1, h, t, dk]
    return x.view(1, -1, h, dk).transpose(1, 2)


def _attend(q, k, v, dk, mask=None):
    # the tutorial's attention(): matmul / sqrt(d_k), masked_fill(mask == 0, -1e9), softmax
    scores = torch.matmul(q, k.transpose(-2, -1)) / (dk ** 0.5)
    if mask is not None:
        scores = scores.masked_fill(mask.unsqueeze(1) == 0, -1e9)
    return torch.matmul(F.softmax(scores, dim=-1), v)


@torch.inference_mode()
def cached_greedy(model, src, max_new, eos):
    """Greedy for one source row ([1, S]) with a KV cache; returns the new ids."""
    enc, dec = model.encoder, model.decoder
    d, h = model.out.in_features, dec.layers[0].attn_1.h
    dk = d // h
    src_mask = (src != PAD).unsqueeze(-2)
    e_out = enc(src, src_mask)
    cross = []                                                 # K, V once per layer
    for layer in dec.layers:
        a = layer.attn_2
        cross.append((_split(a.k_linear(e_out), h, dk), _split(a.v_linear(e_out), h, dk)))
    total = 1 + max_new
    kc = [torch.empty(1, h, total, dk) for _ in dec.layers]
    vc = [torch.empty(1, h, total, dk) for _ in dec.layers]
    tok, ids = BOS, []
    for pos in range(max_new):
        x = dec.embed(torch.tensor([[tok]]))
        x = x * (dec.pe.d_model ** 0.5) + dec.pe.pe[:, pos:pos + 1]     # PositionalEncoder
        for li, layer in enumerate(dec.layers):
            a = layer.attn_1
            x2 = layer.norm_1(x)
            kc[li][:, :, pos] = _split(a.k_linear(x2), h, dk)[:, :, 0]
            vc[li][:, :, pos] = _split(a.v_linear(x2), h, dk)[:, :, 0]
            o = _attend(_split(a.q_linear(x2), h, dk), kc[li][:, :, :pos + 1],
                        vc[li][:, :, :pos + 1], dk)
            x = x + a.out(o.transpose(1, 2).reshape(1, 1, d))
            a = layer.attn_2
            x2 = layer.norm_2(x)
            o = _attend(_split(a.q_linear(x2), h, dk), cross[li][0], cross[li][1], dk, src_mask)
            x = x + a.out(o.transpose(1, 2).reshape(1, 1, d))
            x = x + layer.ff(layer.norm_3(x))
        logits = model.out(dec.norm(x))[0, -1]
        tok = int(torch.argmax(logits))
        if tok == eos:
            break
        ids.append(tok)
    return ids


# -------------------------------------------------------------------------------------
def median_ms(fn, runs):
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts))


def copy_bandwidth(nbytes=1 << 30, reps=5):
    a = np.ones(nbytes // 4, dtype=np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best                                   # read + write


def step_weight_bytes(model):
    """f32 bytes of the weights one decode step reads (cached cross-attention K/V)."""
    n = 0
    for name, p in model.decoder.named_parameters():
        if ".attn_2.k_linear." in name or ".attn_2.v_linear." in name:
            continue                                           # applied once, in encode
        if name.startswith("embed."):
            n += p.shape[1]                                    # one embedding row
            continue
        n += p.numel()
    n += sum(p.numel() for p in model.out.parameters())
    return 4 * n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--src-len", type=int, default=32)
    ap.add_argument("--runs", type=int, default=5, help="timed runs of tfrun and the kv-cache loop")
    ap.add_argument("--torch-runs", type=int, default=3, help="timed runs of the (slow) tutorial loop")
    ap.add_argument("--skip-tfrun", action="store_true")
    ap.add_argument("--skip-tutorial", action="store_true")
    a = ap.parse_args()
    n_new, s = a.new_tokens, a.src_len
    max_len = max(80, 1 + n_new, s)
    tmp = tempfile.mkdtemp(prefix="tfc-bench-gen-")

    torch.manual_seed(0)
    params = tm.resolve_params("tutorial-floydhub", [f"{k}={v}" for k, v in P.items()] +
                               [f"max_len={max_len}"])
    model = tm.build("tutorial-floydhub", params)
    tm.init_weights(model, 0)
    model.eval()
    rng = np.random.default_rng(0)
    src = rng.integers(3, P["src_vocab"], size=(1, s)).astype(np.int64)
    src_t = torch.from_numpy(src)
    np.save(os.path.join(tmp, "src.npy"), src)

    # Reference tokens (eos -1: never stops early) and an eos id that never occurs.
    torch.set_num_threads(max(a.threads))
    ref = cached_greedy(model, src_t, n_new, eos=-1)
    if not a.skip_tutorial:
        (tut_ids, _), = gr.greedy_tutorial("tutorial-floydhub", model, src, n_new, BOS, -1, PAD)
        same = tut_ids == ref
        print(f"kv-cache tokens == tutorial tokens: {same}"
              + ("" if same else f"\n  tutorial {tut_ids}\n  kv-cache {ref}"), flush=True)
    eos = next(v for v in range(3, P["tgt_vocab"]) if v not in ref)
    print(f"{n_new} new tokens forced: PyTorch eos = -1, tfc eos_id = {eos} (not in the output)")

    bw = copy_bandwidth()
    wbytes = step_weight_bytes(model)
    bound_tps = bw / wbytes
    print(f"memory bandwidth (numpy copy 1 GiB, best of 5, read+write): {bw / 1e9:.2f} GB/s; "
          f"weights read per token: {wbytes / 1e6:.1f} MB -> bound {bound_tps:.1f} tokens/s",
          flush=True)

    mbin = None
    if not a.skip_tfrun:
        weights = os.path.join(tmp, "w.safetensors")
        tm.save_safetensors(weights, {k: v for k, v in tm.exported_state_dict(model).items()})
        mbin = os.path.join(tmp, "model.bin")
        subprocess.run([os.path.join(BIN, "tfc"), "compile",
                        os.path.join(ROOT, "models", "tutorial-floydhub.yaml"), "--weights", weights,
                        "-o", mbin, "--set", f"max_len={max_len}", "--set", "max_batch=1",
                        "--set", f"bos_id={BOS}", "--set", f"eos_id={eos}", "--set", f"pad_id={PAD}"] +
                       sum([["--set", f"{k}={v}"] for k, v in P.items()], []),
                       check=True, stderr=subprocess.DEVNULL)
        gen = [os.path.join(BIN, "tfrun"), mbin, "--generate", "--input", f"src={tmp}/src.npy",
               "--max-len", str(n_new)]
        os.makedirs(f"{tmp}/gen", exist_ok=True)
        r = subprocess.run(gen + ["--threads", str(max(a.threads)), "--output-dir", f"{tmp}/gen"],
                           capture_output=True, text=True, env=_TFRUN_ENV)
        if r.returncode != 0:
            msg = (r.stderr or r.stdout).strip()
            first = msg.splitlines()[0] if msg else ""
            if "usage" in msg.lower() or "unknown" in msg.lower() or "unrecognized" in msg.lower():
                print(f"tfrun: skipped, this build's tfrun rejects --generate ({first})")
            else:
                print(f"tfrun: skipped, `tfrun --generate` failed (rc {r.returncode}): {first}")
            mbin = None
        else:
            try:
                ids = np.load(f"{tmp}/gen/ids.npy")[0].tolist()
                print(f"tfrun tokens == kv-cache tokens: {ids == ref}"
                      + ("" if ids == ref else f"\n  tfrun {ids}"))
            except OSError as e:
                print(f"tfrun: no ids.npy to check ({e})")

    print(f"{'threads':>7}{'tfrun tok/s':>13}{'tutorial tok/s':>16}{'kv-cache tok/s':>16}"
          f"{'tfrun/tut':>11}{'tfrun/kv':>10}{'tfrun/bound':>13}")
    tf_lines = []
    for th in a.threads:
        torch.set_num_threads(th)
        tf_tps = None
        if mbin:
            r = subprocess.run(gen + ["--threads", str(th), "--bench", str(a.runs)],
                               capture_output=True, text=True, env=_TFRUN_ENV)
            if r.returncode != 0:
                print(f"tfrun --bench failed (rc {r.returncode}): {r.stderr.strip()[:300]}")
            else:
                ms, toks = parse_tfrun(r.stdout + "\n" + r.stderr, n_new)
                tf_tps = toks / (ms * 1e-3)
                tf_lines.append(f"  tfrun --threads {th}: " + next(
                    (ln for ln in r.stdout.splitlines() if "median" in ln), "").strip())
        tut_tps = None
        if not a.skip_tutorial:
            ms = median_ms(lambda: gr.greedy_tutorial("tutorial-floydhub", model, src, n_new,
                                                      BOS, -1, PAD), a.torch_runs)
            tut_tps = n_new / (ms * 1e-3)
        ms = median_ms(lambda: cached_greedy(model, src_t, n_new, -1), a.runs)
        kv_tps = n_new / (ms * 1e-3)

        def f(x, w, p=1):
            return f"{x:>{w}.{p}f}" if x is not None else f"{'-':>{w}}"
        ratio = lambda x, y: x / y if x is not None and y is not None else None  # noqa: E731
        print(f"{th:>7}{f(tf_tps, 13)}{f(tut_tps, 16)}{f(kv_tps, 16)}{f(ratio(tf_tps, tut_tps), 11, 2)}"
              f"{f(ratio(tf_tps, kv_tps), 10, 2)}{f(ratio(tf_tps, bound_tps), 13, 2)}", flush=True)
    for ln in tf_lines:
        print(ln)
    print(f"bound: {bound_tps:.1f} tokens/s ({wbytes / 1e6:.1f} MB of f32 weights per token at "
          f"{bw / 1e9:.2f} GB/s); tfrun/bound is tfrun's fraction of it")


if __name__ == "__main__":
    main()
