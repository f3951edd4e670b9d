#!/usr/bin/env python3
"""A decoder-only LLM on the CPU: tfc against llama.cpp and transformers (issue 24).

  bench/peers/run.sh llama [--threads 1 2] [--rounds 3] [--prompt 16] [--new 64]
      [--prefill 256] [--engines tfc-f32 tfc-int8 tfc-int4 llama-f32 llama-q8_0 llama-q4_0 hf]
      [--accuracy 2048] [--tfc-bin DIR] [--markdown] [--quick] [--keep]
Needs bench/peers/setup_llama.sh (llama-cpp-python and its converter in the bench venv).

The model: a LlamaForCausalLM at SmolLM2-135M's shape (hidden 576, 30 layers, 9 heads
over 3 key/value heads, intermediate 1536, vocabulary 49152, tied embeddings,
rope_theta 100000), random weights (transformers' init, seed 0), written with
save_pretrained beside a small SentencePiece tokenizer.model (llama.cpp's converter
needs one; the vocabulary is padded to 49152). Every engine runs those weights:
  tfc-f32 / tfc-int8 / tfc-int4  `tfc compile DIR [--precision int8 | int4]` (int8:
           per-row weight scales, activations quantized per row, exact; int4: a scale
           per 32 weights, activations quantized per 32-block inside the kernel, the
           lm_head int8; docs/precision.md), run by
           `tfrun X.bin --generate --max-len N --input input_ids=P.npy --threads T
           --bench R` ('generate: median X ms'; a warm-up, R timed runs, the model
           load not timed)
  llama-f32 / llama-q8_0 / llama-q4_0  llama.cpp through llama-cpp-python: the
           checkpoint converted by its convert_hf_to_gguf.py (--outtype f32, q8_0),
           Q4_0 quantized from the f32 GGUF by llama_model_quantize;
           Llama(n_threads=T, n_threads_batch=T, n_ctx=1024), then per call:
           reset(), and generate(prompt, top_k=1) for N tokens (greedy)
  hf       transformers' LlamaForCausalLM (PyPI torch, MKL),
           generate(max_new_tokens=N, do_sample=False) under inference_mode
Jobs (batch 1, greedy, the same random prompt ids for every engine, seed 0):
  decode   a --prompt-token prompt and --new new tokens: mostly the decode steps
           (tokens/s = new / time)
  prefill  a --prefill-token prompt and 1 new token: the prompt's GEMMs
           (tokens/s = prompt / time)
Rounds interleave the engines (an order that rotates); each figure is the median over
the rounds of each round's median of --runs calls. "vs same bits" divides by llama.cpp
at the same weight bits: tfc-f32 by llama-f32, tfc-int8 by llama-q8_0, tfc-int4 by
llama-q4_0.
Accuracy (--accuracy N, default 2048; 0: off): a stream of N random token ids in
windows of 512, each window's next-token distributions from every quantized engine
against f32's (tfc against tfc-f32, llama.cpp against llama-f32, both of which equal
transformers): the mean KL divergence KL(f32 || quantized) and the top-1 agreement.
llama.cpp's come from Llama(logits_all=True).eval(window). Checks: every engine's greedy tokens
of the decode job against tfc-f32's (quantized engines may differ where the random
model has near-ties; the count of equal tokens is shown).
--quick: a smoke test (hidden 64, 2 layers, vocabulary 1000; 1 thread, 1 round).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobs_common as jc  # noqa: E402

FULL = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
            num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
            max_position_embeddings=2048, rope_theta=100000.0, tie_word_embeddings=True)
QUICK = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
             max_position_embeddings=512, rope_theta=10000.0, tie_word_embeddings=True)
ENGINES = ["tfc-f32", "tfc-int8", "tfc-int4", "llama-f32", "llama-q8_0", "llama-q4_0", "hf"]
SAME_BITS = {"tfc-f32": "llama-f32", "tfc-int8": "llama-q8_0", "tfc-int4": "llama-q4_0"}
WINDOW = 512
BOS, EOS, PAD = 1, 2, 0


# -------------------------------------------------------------------------------------
# Workers: llama.cpp and transformers, one process per (engine, threads).
# -------------------------------------------------------------------------------------
def worker(spec):
    def setup(spec):
        prompts = {j: [int(t) for t in np.load(p)[0]] for j, p in spec["prompts"].items()}
        news = spec["news"]
        if spec["kind"] == "llama":
            from llama_cpp import Llama
            llm = Llama(model_path=spec["gguf"], n_ctx=1024, n_threads=spec["threads"],
                        n_threads_batch=spec["threads"], n_batch=512, verbose=False)

            def run(job):
                llm.reset()
                out = []
                for tok in llm.generate(prompts[job], top_k=1, top_p=1.0, min_p=0.0,
                                        temp=0.0, repeat_penalty=1.0, reset=True):
                    out.append(int(tok))
                    if len(out) == news[job]:
                        break
                return out
        else:
            import torch
            from transformers import LlamaForCausalLM
            torch.set_num_threads(spec["threads"])
            torch.set_num_interop_threads(1)
            m = LlamaForCausalLM.from_pretrained(spec["dir"]).eval()
            ids = {j: torch.tensor([p]) for j, p in prompts.items()}

            def run(job):
                with torch.inference_mode():
                    g = m.generate(ids[job], attention_mask=torch.ones_like(ids[job]),
                                   max_new_tokens=news[job], min_new_tokens=news[job],
                                   do_sample=False, pad_token_id=PAD)
                return [int(t) for t in g[0, ids[job].shape[1]:]]
        job = spec["job"]

        def save(toks):
            np.save(os.path.join(spec["tmp"], f"{spec['name']}-{job}-{spec['threads']}.npy"),
                    np.array([toks], dtype=np.int64))
        return (lambda: run(job)), save
    jc.worker_main(spec, setup)


# -------------------------------------------------------------------------------------
# Parent side.
# -------------------------------------------------------------------------------------
def checkpoint(d, dims, tmp):
    """The random Llama and a SentencePiece tokenizer.model, in |d|."""
    import sentencepiece as spm
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging
    logging.disable_progress_bar()
    cfg = LlamaConfig(**dims, rms_norm_eps=1e-5, bos_token_id=BOS, eos_token_id=EOS,
                      pad_token_id=PAD)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).eval().save_pretrained(d)
    # A tokenizer for the GGUF converter only: no engine here tokenizes text.
    g = np.random.default_rng(0)
    words = ["".join(chr(97 + c) for c in g.integers(0, 26, size=g.integers(2, 9)))
             for _ in range(3000)]
    text = os.path.join(tmp, "corpus.txt")
    with open(text, "w") as f:
        for i in range(0, len(words), 12):
            f.write(" ".join(words[i:i + 12]) + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(d, "tokenizer"),
                                   vocab_size=min(500, dims["vocab_size"]),
                                   model_type="unigram", bos_id=BOS, eos_id=EOS, pad_id=PAD,
                                   unk_id=3, minloglevel=2)


def to_gguf(d, out, outtype, log):
    conv = os.path.join(os.path.dirname(sys.executable), "..", "llama.cpp-convert")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(conv, "gguf-py"), conv, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, os.path.join(conv, "convert_hf_to_gguf.py"), d,
                        "--outfile", out, "--outtype", outtype], capture_output=True,
                       text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"convert_hf_to_gguf --outtype {outtype} failed: "
                           + (r.stderr or r.stdout)[-1500:])
    log(f"GGUF {outtype}: {os.path.getsize(out) / 1e6:.0f} MB")


def quantize_q4_0(src, dst, log):
    import llama_cpp
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), p) != 0:
        raise RuntimeError("llama_model_quantize Q4_0 failed")
    log(f"GGUF q4_0: {os.path.getsize(dst) / 1e6:.0f} MB")


def log_softmax(x):
    x = x.astype(np.float64)
    x -= x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def accuracy(a, tmp, dims, binps, ggufs, tfrun, errors, log):
    """Mean KL(f32 || quantized) and top-1 agreement over a.accuracy positions."""
    n = a.accuracy - a.accuracy % WINDOW or WINDOW
    g = np.random.default_rng(1)
    windows = [np.concatenate([[BOS], g.integers(3, dims["vocab_size"], size=WINDOW - 1)])
               for _ in range(n // WINDOW)]

    def tfc_logits(name):
        out = []
        for i, w in enumerate(windows):
            inp = os.path.join(tmp, f"acc-{i}.npy")
            np.save(inp, w[None].astype(np.int64))
            o = os.path.join(tmp, f"acc-{name}-{i}")
            r = subprocess.run([tfrun, binps[name], "--input", f"input_ids={inp}", "--threads",
                                str(a.threads[-1]), "--output-dir", o], capture_output=True,
                               text=True)
            if r.returncode:
                raise RuntimeError(r.stderr.strip()[-300:])
            out.append(np.load(os.path.join(o, "logits.npy"))[0])
        return out

    def llama_logits(q):
        from llama_cpp import Llama
        llm = Llama(model_path=ggufs[q], n_ctx=WINDOW + 8, n_batch=WINDOW, logits_all=True,
                    n_threads=a.threads[-1], n_threads_batch=a.threads[-1], verbose=False)
        out = []
        for w in windows:
            llm.reset()
            llm.eval([int(t) for t in w])
            out.append(np.array(llm.scores[:WINDOW], dtype=np.float32))
        return out

    rows = []
    for ref, quants, get in (("tfc-f32", ("tfc-int8", "tfc-int4"), tfc_logits),
                             ("llama-f32", ("llama-q8_0", "llama-q4_0"), llama_logits)):
        key = (lambda e: e) if get is tfc_logits else (lambda e: e.split("-", 1)[1])
        have = binps if get is tfc_logits else ggufs
        def dists(e):
            try:
                return [log_softmax(x) for x in get(key(e))] if key(e) in have else None
            except (RuntimeError, ValueError) as err:
                errors.append((e, "accuracy", jc.first_line(str(err))))
                return None
        base = dists(ref)
        for e in quants if base else ():
            got = dists(e)
            if got is None:
                continue
            kl = np.mean(np.concatenate([(np.exp(p) * (p - q)).sum(-1) for p, q in zip(base, got)]))
            top1 = np.mean(np.concatenate([p.argmax(-1) == q.argmax(-1) for p, q in zip(base, got)]))
            rows.append([e, ref, f"{kl:.2e}", f"{top1:.4f}"])
            log(f"accuracy {e}: KL {kl:.2e}, top-1 {top1:.4f}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, nargs="+", help="default 1 2 (--quick: 1)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 3; --quick: 1)")
    ap.add_argument("--runs", type=int, default=1, help="timed calls per engine and round")
    ap.add_argument("--prompt", type=int, default=16, help="the decode job's prompt tokens")
    ap.add_argument("--new", type=int, default=64, help="the decode job's new tokens")
    ap.add_argument("--prefill", type=int, default=256, help="the prefill job's prompt tokens")
    ap.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES)
    ap.add_argument("--accuracy", type=int, default=2048,
                    help="tokens of the accuracy stream (0: skip; --quick: 512)")
    ap.add_argument("--tfc-bin", default=os.path.join(jc.ROOT, "build", "bin"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if a.worker:
        return worker(json.loads(a.worker))
    dims = dict(QUICK if a.quick else FULL)
    a.threads = a.threads or ([1] if a.quick else [1, 2])
    a.rounds = a.rounds or (1 if a.quick else 3)
    if a.quick and a.accuracy == 2048:
        a.accuracy = 512
    tfc, tfrun = (os.path.join(a.tfc_bin, b) for b in ("tfc", "tfrun"))
    tmp = jc.work_dir("tfc-bench-llama-", a.keep)
    t0 = time.time()
    log = lambda s: print(f"[{time.time() - t0:5.0f} s] {s}", flush=True)  # noqa: E731

    d = os.path.join(tmp, "llama")
    checkpoint(d, dims, tmp)
    g = np.random.default_rng(0)
    jobs = {"decode": (a.prompt, a.new), "prefill": (a.prefill, 1)}
    prompts = {}
    for j, (n, _) in jobs.items():
        p = np.concatenate([[BOS], g.integers(3, dims["vocab_size"], size=n - 1)])
        prompts[j] = os.path.join(tmp, f"prompt-{j}.npy")
        np.save(prompts[j], p[None].astype(np.int64))
    import llama_cpp
    import torch
    import transformers
    log(f"Llama {dims}; decode: {a.prompt}-token prompt + {a.new} new; prefill: "
        f"{a.prefill}-token prompt + 1; greedy, batch 1; {jc.cpu_summary()}; llama-cpp-python "
        f"{llama_cpp.__version__}, transformers {transformers.__version__}, torch "
        f"{torch.__version__}; {a.rounds} rounds x {a.runs} runs; threads {a.threads}")

    engines = {th: [] for th in a.threads}
    errors, outs, workers, sizes, binps = [], {}, [], {}, {}
    for prec in ("f32", "int8", "int4"):
        if f"tfc-{prec}" not in a.engines:
            continue
        binp = os.path.join(tmp, f"llama-{prec}.bin")
        rc, out, _ = jc.run_measured([tfc, "compile", d, "-o", binp, "--set", "max_batch=1",
                                      "--set", "max_len=1024"] +
                                     (["--precision", prec] if prec != "f32" else []))
        if rc != 0:
            errors.append((f"tfc-{prec}", "-", jc.first_line(out)))
            continue
        sizes[f"tfc-{prec}"] = os.path.getsize(binp)
        binps[f"tfc-{prec}"] = binp
        for j, (n, new) in jobs.items():
            args = ["--generate", "--max-len", str(new), "--input", f"input_ids={prompts[j]}"]
            for th in a.threads:
                engines[th].append(jc.Tfrun(f"tfc-{prec}/{j}", tfrun, binp, args, th))
            o = os.path.join(tmp, f"tfc-{prec}-{j}")
            try:
                engines[a.threads[-1]][-1].output(o)
                outs[(f"tfc-{prec}", j)] = np.load(os.path.join(o, "ids.npy"))[:, :int(
                    np.load(os.path.join(o, "lengths.npy"))[0])]
            except (RuntimeError, OSError) as err:
                errors.append((f"tfc-{prec}", j, jc.first_line(str(err))))
    ggufs = {}
    try:
        if any(e.startswith("llama-") for e in a.engines):
            ggufs["f32"] = os.path.join(tmp, "llama-f32.gguf")
            to_gguf(d, ggufs["f32"], "f32", log)
            if "llama-q8_0" in a.engines:
                ggufs["q8_0"] = os.path.join(tmp, "llama-q8_0.gguf")
                to_gguf(d, ggufs["q8_0"], "q8_0", log)
            if "llama-q4_0" in a.engines:
                ggufs["q4_0"] = os.path.join(tmp, "llama-q4_0.gguf")
                quantize_q4_0(ggufs["f32"], ggufs["q4_0"], log)
    except RuntimeError as err:
        errors.append(("llama.cpp", "convert", jc.first_line(str(err))))
    for name in a.engines:
        if not (name.startswith("llama-") or name == "hf"):
            continue
        kind = "hf" if name == "hf" else "llama"
        q = name.split("-", 1)[1] if kind == "llama" else None
        if kind == "llama" and q not in ggufs:
            continue
        if q:
            sizes[name] = os.path.getsize(ggufs[q])
        for j, (n, new) in jobs.items():
            for th in a.threads:
                spec = dict(tmp=tmp, kind=kind, name=name, job=j, threads=th, dir=d,
                            gguf=ggufs.get(q), prompts=prompts,
                            news={k: v[1] for k, v in jobs.items()})
                w = jc.Worker(f"{name}-{j}", os.path.abspath(__file__), spec, th)
                w.name = f"{name}/{j}"  # the results' key (the log file has the other)
                try:
                    w.wait_ready()
                    workers.append(w)
                    engines[th].append(w)
                except RuntimeError as err:
                    errors.append((name, f"{j}@{th}", jc.first_line(str(err))))
                    w.close()
            p = os.path.join(tmp, f"{name}-{j}-{a.threads[-1]}.npy")
            if os.path.exists(p):
                outs[(name, j)] = np.load(p)
        log(f"{name} ready")

    med, _, errs = jc.run_rounds(engines, a.rounds, a.runs, log)
    errors += errs
    for w in workers:
        w.close()

    # Tables.
    sections = []
    names = [e for e in ENGINES if e in a.engines]
    for j, (n, new) in jobs.items():
        count = new if j == "decode" else n
        for th in a.threads:
            rows = []
            best = max((med.get((f"{p}/{j}", th)) and count / med[(f"{p}/{j}", th)] * 1e3 or 0)
                       for p in names if p.startswith("llama-")) if any(
                           p.startswith("llama-") for p in names) else 0
            for e in names:
                ms = med.get((f"{e}/{j}", th))
                tps = count / ms * 1e3 if ms else None
                peer = med.get((f"{SAME_BITS.get(e)}/{j}", th))
                same = f"{tps / (count / peer * 1e3):.2f}" if tps and peer else "-"
                rows.append([e, f"{sizes[e] / 1e6:.0f}" if e in sizes else "-",
                             f"{ms:.0f}" if ms else "-", f"{tps:.1f}" if tps else "-",
                             f"{tps / best:.2f}" if tps and best else "-", same])
            sections.append((f"{j}: {n}-token prompt + {new} new, {th} thread"
                             f"{'s' if th > 1 else ''}; tokens/s = {'new' if j == 'decode' else 'prompt'} "
                             "tokens / median ms; ratio = tokens/s / the best llama.cpp's",
                             ["engine", "file MB", "ms", "tokens/s", "vs best llama.cpp",
                              "vs same bits"], rows))
    checks = []
    ref = outs.get(("tfc-f32", "decode"))
    for e in names:
        got = outs.get((e, "decode"))
        if e == "tfc-f32" or got is None or ref is None:
            continue
        k = min(got.shape[1], ref.shape[1])
        same = int((got[0, :k] == ref[0, :k]).sum())
        first = next((i for i in range(k) if got[0, i] != ref[0, i]), k)
        checks.append([e, f"{same}/{ref.shape[1]} equal, the first {first} in a row"])
    if checks:
        sections.append(("greedy tokens of the decode job against tfc-f32's",
                         ["engine", "tokens"], checks))
    if a.accuracy:
        rows = accuracy(a, tmp, dims, binps, ggufs, tfrun, errors, log)
        if rows:
            sections.append((f"accuracy: {a.accuracy} random tokens in windows of {WINDOW}; "
                             "each engine's next-token distributions against its own f32",
                             ["engine", "against", "mean KL", "top-1 agreement"], rows))
    if errors:
        sections.append(("errors", ["engine", "where", "error"], errors))
    jc.print_sections(sections, a.markdown, lambda h: (0, 1) if h[-1] in ("tokens", "error") else (0,))


if __name__ == "__main__":
    main()
