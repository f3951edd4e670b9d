#!/usr/bin/env python3
"""A decoder-only LLM on the CPU: tfc against llama.cpp, CTranslate2 and transformers
(issue 24).

  bench/peers/run.sh llama [--shape smollm2-135m | qwen2.5-0.5b | llama-3.2-1b]
      [--threads 1 2] [--rounds 3] [--prompt 16] [--new 64] [--prefill 256]
      [--engines tfc-f32 tfc-int8 tfc-int4 llama-f32 llama-q8_0 llama-q4_0 ct2-f32
      ct2-int8 hf] [--accuracy 2048] [--tfc-bin DIR] [--cache DIR] [--markdown] [--quick]
      [--keep]
Needs bench/peers/setup_llama.sh (llama-cpp-python and its converter in the bench venv).

The model (--shape), random weights (transformers' init, seed 0), tied embeddings,
written with save_pretrained (safetensors):
  smollm2-135m  (default) LlamaForCausalLM at SmolLM2-135M's shape: hidden 576, 30
                layers, 9 heads over 3 key/value heads, intermediate 1536, vocabulary
                49152, rope_theta 1e5, rms_norm_eps 1e-5
  qwen2.5-0.5b  Qwen2ForCausalLM at Qwen2.5-0.5B's shape: hidden 896, 24 layers, 14
                heads over 2 key/value heads, intermediate 4864, vocabulary 151936,
                q/k/v biases (zero, as transformers initializes them), rope_theta
                1e6, rms_norm_eps 1e-6, max_position_embeddings 4096
  llama-3.2-1b  LlamaForCausalLM at Llama-3.2-1B's shape: hidden 2048, 16 layers, 32
                heads over 8 key/value heads, intermediate 8192, vocabulary 128256,
                rope_theta 5e5 with llama3 rope scaling (factor 32, low / high
                frequency factors 1 / 4, original context 8192), rms_norm_eps 1e-5
Beside the weights, a tokenizer for the converters only (no engine here tokenizes
text): the Llamas a small SentencePiece tokenizer.model (the converters pad the
vocabulary), Qwen2 bench_serve.py's byte-level BPE tokenizer.json of the full
vocabulary (llama.cpp's converter is told its pre-tokenizer is 'qwen2').
--cache DIR keeps the checkpoint and the GGUF / CTranslate2 files in DIR/SHAPE
(DIR/SHAPE-quick with --quick) and reuses them in later runs; tfc compiles in every run.
Every engine runs those weights:
  tfc-f32 / tfc-int8 / tfc-int4  `tfc compile DIR [--precision int8 | int4]` (int8:
           a scale per 32 weights, as Q8_0; int4: a scale per 32 weights, the lm_head
           int8 per row; both with the activations quantized per 32-block inside the
           kernel, int8's to 16 bits, int4's to 8; docs/precision.md);
  tfc-int8-a8  the same int8 with `--activation-bits 8` (8-bit activation blocks:
           Q8_0's arithmetic, vpdpbusd on VNNI CPUs);
  tfc-int8-row  `--precision int8 --group-size 0`: one weight scale per row and the
           activations quantized per row to u8 at run time, CTranslate2's arithmetic
           (oneDNN's u8 x s8 GEMM on VNNI CPUs; docs/precision.md); each run by
           `tfrun X.bin --generate --max-len N --input input_ids=P.npy --threads T
           --bench R` ('generate: median X ms'; a warm-up, R timed runs, the model
           load not timed)
  llama-f32 / llama-q8_0 / llama-q4_0  llama.cpp through llama-cpp-python: the
           checkpoint converted by its convert_hf_to_gguf.py (--outtype f32, q8_0),
           Q4_0 quantized from the f32 GGUF by llama_model_quantize;
           Llama(n_threads=T, n_threads_batch=T, n_ctx=1024), then per call:
           reset(), and generate(prompt, top_k=1) for N tokens (greedy)
  ct2-f32 / ct2-int8  CTranslate2: the checkpoint converted by its own
           TransformersConverter (quantization float32, int8: per-row weight scales;
           for llama3 rope this script adds the scaling factor that 4.8.5's converter
           leaves out, see to_ct2);
           Generator(device="cpu", intra_threads=T, inter_threads=1, compute_type
           float32 / int8), then per call generate_batch([prompt as its vocabulary's
           strings], max_length=N, min_length=N, end_token=[], sampling_topk=1,
           include_prompt_in_result=False): exactly N tokens, greedy
  hf       transformers' AutoModelForCausalLM (PyPI torch, MKL),
           generate(max_new_tokens=N, do_sample=False) under inference_mode
Jobs (batch 1, greedy, the same random prompt ids for every engine, seed 0):
  decode   a --prompt-token prompt and --new new tokens: mostly the decode steps
           (tokens/s = new / time)
  prefill  a --prefill-token prompt and 1 new token: the prompt's GEMMs
           (tokens/s = prompt / time)
Rounds interleave the engines (an order that rotates); each figure is the median over
the rounds of each round's median of --runs calls. "vs same bits" divides by llama.cpp
at the same weight bits: tfc-f32 by llama-f32, the tfc-int8 forms by llama-q8_0,
tfc-int4 by llama-q4_0; "vs CTranslate2": tfc-f32 by ct2-f32, the tfc-int8 forms by
ct2-int8.
Peak RSS: each engine's process on the decode job (jobs_common: /usr/bin/time -f %M
around each tfrun and each worker; tfrun's the largest over its runs; a worker's
includes its Python interpreter and imports), in MB, with the same ratios (the
issue's target: tfc within 10% of llama.cpp at the same bits).
Accuracy (--accuracy N, default 2048; 0: off): a stream of N random token ids in
windows of 512, each window's next-token distributions from every quantized engine
against f32's (tfc against tfc-f32, llama.cpp against llama-f32, CTranslate2 against
ct2-f32, all of which equal transformers): the mean KL divergence KL(f32 || quantized)
and the top-1 agreement. llama.cpp's come from Llama(logits_all=True).eval(window),
CTranslate2's from Generator.forward_batch. Checks: every engine's greedy tokens
of the decode job against tfc-f32's (quantized engines may differ where the random
model has near-ties; the count of equal tokens is shown).
--quick: a smoke test of the shape's architecture (hidden 64, 2 layers, vocabulary
1000, the shape's biases and rope, initializer_range 0.3; 1 thread, 1 round).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobs_common as jc  # noqa: E402

def rope(theta, **scaling):
    return dict(rope_parameters=dict(rope_type="llama3" if scaling else "default",
                                     rope_theta=theta, **scaling))


LLAMA3 = dict(factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
              original_max_position_embeddings=8192)
# --quick: initializer_range 0.3, as the default 0.02 makes a model this small repeat the
# prompt's last token (every engine agrees, and the tokens check proves nothing).
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000, max_position_embeddings=1024,
            initializer_range=0.3)
# --shape: (architecture, dims, --quick dims); tied embeddings everywhere.
SHAPES = {
    "smollm2-135m": ("llama", dict(
        hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, vocab_size=49152, max_position_embeddings=2048,
        rms_norm_eps=1e-5, **rope(1e5)), dict(TINY, rms_norm_eps=1e-5, **rope(1e4))),
    "qwen2.5-0.5b": ("qwen2", dict(
        hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, vocab_size=151936, max_position_embeddings=4096,
        rms_norm_eps=1e-6, **rope(1e6)), dict(TINY, rms_norm_eps=1e-6, **rope(1e6))),
    "llama-3.2-1b": ("llama", dict(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072,
        rms_norm_eps=1e-5, **rope(5e5, **LLAMA3)),
        dict(TINY, max_position_embeddings=131072, rms_norm_eps=1e-5, **rope(5e5, **LLAMA3))),
}
ENGINES = ["tfc-f32", "tfc-int8", "tfc-int8-a8", "tfc-int8-row", "tfc-int4", "llama-f32",
           "llama-q8_0",
           "llama-q4_0",
           "ct2-f32", "ct2-int8", "hf"]
SAME_BITS = {"tfc-f32": "llama-f32", "tfc-int8": "llama-q8_0", "tfc-int8-a8": "llama-q8_0",
             "tfc-int8-row": "llama-q8_0", "tfc-int4": "llama-q4_0"}
VS_CT2 = {"tfc-f32": "ct2-f32", "tfc-int8": "ct2-int8", "tfc-int8-a8": "ct2-int8",
          "tfc-int8-row": "ct2-int8"}
# tfc's engines: the `tfc compile` flags of each.
TFC_FLAGS = {"tfc-f32": [], "tfc-int8": ["--precision", "int8"],
             "tfc-int8-a8": ["--precision", "int8", "--activation-bits", "8"],
             "tfc-int8-row": ["--precision", "int8", "--group-size", "0"],
             "tfc-int4": ["--precision", "int4"]}
CT2_QUANT = {"ct2-f32": "float32", "ct2-int8": "int8"}
WINDOW = 512
BOS, EOS, PAD = 1, 2, 0


# -------------------------------------------------------------------------------------
# Workers: llama.cpp, CTranslate2 and transformers, one process per (engine, threads).
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
        elif spec["kind"] == "ct2":
            import ctranslate2
            gen = ctranslate2.Generator(spec["ct2"], device="cpu", inter_threads=1,
                                        intra_threads=spec["threads"],
                                        compute_type=CT2_QUANT[spec["name"]])
            vocab = ct2_vocabulary(spec["ct2"])
            strs = {j: [vocab[t] for t in p] for j, p in prompts.items()}

            def run(job):
                r = gen.generate_batch([strs[job]], max_length=news[job], min_length=news[job],
                                       end_token=[], sampling_topk=1,
                                       include_prompt_in_result=False)
                return [int(t) for t in r[0].sequences_ids[0]]
        else:
            import torch
            from transformers import AutoModelForCausalLM
            torch.set_num_threads(spec["threads"])
            torch.set_num_interop_threads(1)
            m = AutoModelForCausalLM.from_pretrained(spec["dir"]).eval()
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
def built(path, build, log):
    """build(PART) unless |path| (a file or folder) exists; PART becomes |path| only when
    complete, so that a --cache folder never holds a half-written file."""
    if os.path.exists(path):
        log(f"reusing {path}")
        return
    part = path + ".part"
    shutil.rmtree(part, ignore_errors=True)
    if os.path.exists(part):
        os.remove(part)
    build(part)
    os.replace(part, path)


def checkpoint(d, arch, dims, tmp):
    """The random model and a tokenizer for the converters, in |d|."""
    import torch
    import transformers
    from transformers.utils import logging
    logging.disable_progress_bar()
    os.makedirs(d)
    if arch == "qwen2":
        from bench_serve import SPECIALS, tokenizer
        ids = tokenizer(d, dims["vocab_size"]).convert_tokens_to_ids(SPECIALS)
        cfg = transformers.Qwen2Config(**dims, tie_word_embeddings=True,
                                       use_sliding_window=False, bos_token_id=ids[0],
                                       eos_token_id=ids[2], pad_token_id=ids[0])
        cls = transformers.Qwen2ForCausalLM
    else:
        sentencepiece(d, dims["vocab_size"], tmp)
        cfg = transformers.LlamaConfig(**dims, tie_word_embeddings=True, bos_token_id=BOS,
                                       eos_token_id=EOS, pad_token_id=PAD)
        cls = transformers.LlamaForCausalLM
    torch.manual_seed(0)
    cls(cfg).eval().save_pretrained(d)


def sentencepiece(d, vocab_size, tmp):
    """A small SentencePiece tokenizer.model in |d| (the converters pad the vocabulary)."""
    import sentencepiece as spm
    g = np.random.default_rng(0)
    words = ["".join(chr(97 + c) for c in g.integers(0, 26, size=g.integers(2, 9)))
             for _ in range(3000)]
    text = os.path.join(tmp, "corpus.txt")
    with open(text, "w") as f:
        for i in range(0, len(words), 12):
            f.write(" ".join(words[i:i + 12]) + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(d, "tokenizer"),
                                   vocab_size=min(500, vocab_size),
                                   model_type="unigram", bos_id=BOS, eos_id=EOS, pad_id=PAD,
                                   unk_id=3, minloglevel=2)


def to_gguf(d, out, outtype, pre=None):
    """llama.cpp's convert_hf_to_gguf.py; |pre|: the BPE pre-tokenizer's name (the
    converter identifies one by hashing its tokens of a test text, which only published
    tokenizers match; bench_serve.py's splits text with Qwen2's regex: 'qwen2')."""
    conv = os.path.join(os.path.dirname(sys.executable), "..", "llama.cpp-convert")
    code = ("import os, runpy, sys; c = sys.argv[1]; "
            "sys.path[:0] = [os.path.join(c, 'gguf-py'), c]; "
            + ("import conversion.base as b; "
               f"b.TextModel.get_vocab_base_pre = lambda s, t: {pre!r}; " if pre else "")
            + "sys.argv = [os.path.join(c, 'convert_hf_to_gguf.py')] + sys.argv[2:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code, conv, d, "--outfile", out, "--outtype",
                        outtype], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"convert_hf_to_gguf --outtype {outtype} failed: "
                           + (r.stderr or r.stdout)[-1500:])


def quantize_q4_0(src, dst):
    import llama_cpp
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), p) != 0:
        raise RuntimeError("llama_model_quantize Q4_0 failed")


def ct2_vocabulary(path):
    with open(os.path.join(path, "vocabulary.json")) as f:
        return json.load(f)


def to_ct2(d, out, quant, vocab_size):
    """CTranslate2's own converter (|quant|: float32 or int8); its vocabulary must map
    every id to one string, as the worker passes the prompt as strings."""
    from ctranslate2.converters import TransformersConverter
    from ctranslate2.converters import transformers as ct
    spec_of = ct.LlamaLoader.get_model_spec

    def with_llama3(self, model):
        # CTranslate2 4.8.5 writes llama3 rope's frequency factors but not its scaling
        # factor, which its runtime then takes as 1 (plain rope: logits far from
        # transformers'); written here, as the runtime reads them.
        spec = spec_of(self, model)
        rp = getattr(model.config, "rope_parameters", None) or {}
        for layer in spec.decoder.layer if rp.get("rope_type") == "llama3" else ():
            att = layer.self_attention
            if not hasattr(att, "rotary_scaling_factor"):  # the spec is frozen
                object.__setattr__(att, "rotary_scaling_factor", np.float32(rp["factor"]))
                object.__setattr__(att, "original_max_position_embeddings",
                                   np.int32(rp["original_max_position_embeddings"]))
        return spec
    ct.LlamaLoader.get_model_spec = with_llama3
    try:
        TransformersConverter(d).convert(out, quantization=quant, force=True)
    finally:
        ct.LlamaLoader.get_model_spec = spec_of
    vocab = ct2_vocabulary(out)
    if len(vocab) != vocab_size or len(set(vocab)) != len(vocab):
        raise RuntimeError(f"CTranslate2's vocabulary has {len(vocab)} tokens, "
                           f"{len(set(vocab))} distinct; the model has {vocab_size}")


def log_softmax(x):
    x = x.astype(np.float64)
    x -= x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def accuracy(a, tmp, dims, bos, binps, ggufs, models, tfrun, errors, log):
    """Mean KL(f32 || quantized) and top-1 agreement over a.accuracy positions."""
    n = a.accuracy - a.accuracy % WINDOW or WINDOW
    g = np.random.default_rng(1)
    windows = [np.concatenate([[bos], g.integers(3, dims["vocab_size"], size=WINDOW - 1)])
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

    def llama_logits(name):
        from llama_cpp import Llama
        llm = Llama(model_path=ggufs[name.split("-", 1)[1]], n_ctx=WINDOW + 8, n_batch=WINDOW,
                    logits_all=True, n_threads=a.threads[-1], n_threads_batch=a.threads[-1],
                    verbose=False)
        out = []
        for w in windows:
            llm.reset()
            llm.eval([int(t) for t in w])
            out.append(np.array(llm.scores[:WINDOW], dtype=np.float32))
        return out

    def ct2_logits(name):
        import ctranslate2
        gen = ctranslate2.Generator(models[name], device="cpu", intra_threads=a.threads[-1],
                                    compute_type=CT2_QUANT[name])
        vocab = ct2_vocabulary(models[name])
        return [np.array(gen.forward_batch([[vocab[t] for t in w]]))[0] for w in windows]

    have = set(binps) | {f"llama-{q}" for q in ggufs} | set(models)
    rows = []
    for ref, quants, get in (("tfc-f32", ("tfc-int8", "tfc-int8-a8", "tfc-int8-row", "tfc-int4"),
                              tfc_logits),
                             ("llama-f32", ("llama-q8_0", "llama-q4_0"), llama_logits),
                             ("ct2-f32", ("ct2-int8",), ct2_logits)):
        def dists(e):
            try:
                return [log_softmax(x) for x in get(e)] if e in have else None
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


def ratio(x, peer):
    """x / peer as '1.23'; '-' when either is missing."""
    return f"{x / peer:.2f}" if x and peer else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--shape", default="smollm2-135m", choices=list(SHAPES))
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
    ap.add_argument("--cache", help="keep the checkpoint, GGUF and CTranslate2 files in "
                    "CACHE/SHAPE and reuse them")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if a.worker:
        return worker(json.loads(a.worker))
    arch, full, quick = SHAPES[a.shape]
    dims = dict(quick if a.quick else full)
    a.threads = a.threads or ([1] if a.quick else [1, 2])
    a.rounds = a.rounds or (1 if a.quick else 3)
    if a.quick and a.accuracy == 2048:
        a.accuracy = 512
    tfc, tfrun = (os.path.join(a.tfc_bin, b) for b in ("tfc", "tfrun"))
    tmp = jc.work_dir("tfc-bench-llama-", a.keep)
    base = os.path.join(a.cache, a.shape + ("-quick" if a.quick else "")) if a.cache else tmp
    os.makedirs(base, exist_ok=True)
    t0 = time.time()
    log = lambda s: print(f"[{time.time() - t0:5.0f} s] {s}", flush=True)  # noqa: E731

    d = os.path.join(base, "model")
    built(d, lambda p: checkpoint(p, arch, dims, tmp), log)
    with open(os.path.join(d, "config.json")) as f:
        bos = json.load(f)["bos_token_id"]
    g = np.random.default_rng(0)
    jobs = {"decode": (a.prompt, a.new), "prefill": (a.prefill, 1)}
    prompts = {}
    for j, (n, _) in jobs.items():
        p = np.concatenate([[bos], g.integers(3, dims["vocab_size"], size=n - 1)])
        prompts[j] = os.path.join(tmp, f"prompt-{j}.npy")
        np.save(prompts[j], p[None].astype(np.int64))
    import ctranslate2
    import llama_cpp
    import torch
    import transformers
    log(f"{a.shape}{' --quick' if a.quick else ''}: {arch} {dims}; decode: {a.prompt}-token "
        f"prompt + {a.new} new; prefill: {a.prefill}-token prompt + 1; greedy, batch 1; "
        f"{jc.cpu_summary()}; llama-cpp-python {llama_cpp.__version__}, ctranslate2 "
        f"{ctranslate2.__version__}, transformers {transformers.__version__}, torch "
        f"{torch.__version__}; {a.rounds} rounds x {a.runs} runs; threads {a.threads}")

    engines = {th: [] for th in a.threads}
    errors, outs, workers, sizes, binps = [], {}, [], {}, {}
    for name, flags in TFC_FLAGS.items():
        prec = name[len("tfc-"):]
        if name not in a.engines:
            continue
        binp = os.path.join(tmp, f"llama-{prec}.bin")
        rc, out, _ = jc.run_measured([tfc, "compile", d, "-o", binp, "--set", "max_batch=1",
                                      "--set", "max_len=1024"] + flags)
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
    ggufs, models = {}, {}
    pre = "qwen2" if arch == "qwen2" else None
    try:
        if any(e.startswith("llama-") for e in a.engines):
            for q in ("f32", "q8_0", "q4_0"):
                if q == "f32" or f"llama-{q}" in a.engines:
                    path = os.path.join(base, f"llama-{q}.gguf")
                    built(path, (lambda p: quantize_q4_0(ggufs["f32"], p)) if q == "q4_0"
                          else (lambda p: to_gguf(d, p, q, pre)), log)
                    ggufs[q] = path
                    log(f"GGUF {q}: {os.path.getsize(path) / 1e6:.0f} MB")
    except RuntimeError as err:
        errors.append(("llama.cpp", "convert", jc.first_line(str(err))))
    for name, quant in CT2_QUANT.items():
        if name in a.engines:
            models[name] = os.path.join(base, name)
            try:
                built(models[name], lambda p: to_ct2(d, p, quant, dims["vocab_size"]), log)
                mb = os.path.getsize(os.path.join(models[name], "model.bin")) / 1e6
                log(f"CTranslate2 {quant}: {mb:.0f} MB")
            except Exception as err:  # noqa: BLE001 - e.g. an architecture it cannot convert
                errors.append((name, "convert", f"{type(err).__name__}: {jc.first_line(str(err))}"))
                del models[name]
    for name in a.engines:
        kind = name.split("-")[0]
        if kind == "tfc":
            continue
        q = name.split("-", 1)[1] if kind == "llama" else None
        if (kind == "llama" and q not in ggufs) or (kind == "ct2" and name not in models):
            continue
        if q:
            sizes[name] = os.path.getsize(ggufs[q])
        if kind == "ct2":
            sizes[name] = os.path.getsize(os.path.join(models[name], "model.bin"))
        for j, (n, new) in jobs.items():
            for th in a.threads:
                spec = dict(tmp=tmp, kind=kind, name=name, job=j, threads=th, dir=d,
                            gguf=ggufs.get(q), ct2=models.get(name), prompts=prompts,
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
    rss = {}  # (engine/job, threads): peak KB
    for th, es in engines.items():
        for e in es:
            rss[(e.name, th)] = e.close()

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
                peers = [med.get((f"{m.get(e)}/{j}", th)) for m in (SAME_BITS, VS_CT2)]
                rows.append([e, f"{sizes[e] / 1e6:.0f}" if e in sizes else "-",
                             f"{ms:.0f}" if ms else "-", f"{tps:.1f}" if tps else "-",
                             f"{tps / best:.2f}" if tps and best else "-"] +
                            [ratio(tps, p and count / p * 1e3) for p in peers])
            sections.append((f"{j}: {n}-token prompt + {new} new, {th} thread"
                             f"{'s' if th > 1 else ''}; tokens/s = {'new' if j == 'decode' else 'prompt'} "
                             "tokens / median ms; ratio = tokens/s / the best llama.cpp's",
                             ["engine", "file MB", "ms", "tokens/s", "vs best llama.cpp",
                              "vs same bits", "vs CTranslate2"], rows))
    rows = []
    for e in names:
        kb = [rss.get((f"{e}/decode", th)) for th in a.threads]
        peers = [[rss.get((f"{m.get(e)}/decode", th)) for th in a.threads]
                 for m in (SAME_BITS, VS_CT2)]
        if any(kb):
            rows.append([e] + [f"{k / 1e3:.0f}" if k else "-" for k in kb] +
                        [" / ".join(ratio(k, p) for k, p in zip(kb, ps))
                         for ps in peers])
    if rows:
        sections.append((f"peak RSS of each engine's process on the decode job, MB (threads "
                         f"{' / '.join(map(str, a.threads))}); ratio = RSS / the peer's",
                         ["engine"] + [f"{th} thread{'s' if th > 1 else ''}"
                                       for th in a.threads] +
                         ["vs same bits", "vs CTranslate2"], rows))
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
        rows = accuracy(a, tmp, dims, bos, binps, ggufs, models, tfrun, errors, log)
        if rows:
            sections.append((f"accuracy: {a.accuracy} random tokens in windows of {WINDOW}; "
                             "each engine's next-token distributions against its own f32",
                             ["engine", "against", "mean KL", "top-1 agreement"], rows))
    if errors:
        sections.append(("errors", ["engine", "where", "error"], errors))
    jc.print_sections(sections, a.markdown, lambda h: (0, 1) if h[-1] in ("tokens", "error") else (0,))


if __name__ == "__main__":
    main()
