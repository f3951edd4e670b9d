#!/usr/bin/env python3
"""Decoder-only prefill: a prompt fed in chunks against token by token (issue 23).

  bench/peers/run.sh prefill [--threads 1 2] [--lengths 16 64 128 256 512]
      [--rounds 3] [--runs 1] [--engines prefill tbt hf] [--tfc-bin DIR]
      [--markdown] [--quick] [--keep]
Without transformers (no hf): /usr/bin/python3 bench/bench_prefill.py --engines prefill tbt

The job: GPT-2 124M's shape (models/gpt2.yaml's defaults: d_model 768, 12 heads, 12
layers, vocabulary 50257, max_len 1024), batch 1, a prompt of L random ids (uniform
in [1, 50256): neither pad 0 nor eos 50256; seed 0) and 2 new tokens, greedy. Nearly
all the time is the prompt: the issue's target is a 512-token prompt >= 10x faster
prefilled than fed token by token.

Engines (each (engine, L, threads) timed once per round; rounds interleaved, in an
order that rotates from round to round; the tables give the median over the rounds):
  prefill  tfrun X.bin --generate --max-len 2 --input tokens=P.npy --threads T
           --bench R: its 'generate: median X ms' (a warm-up, then R timed runs; the
           model load is not timed). The prompt goes through decode_step in chunks
           (the default, TFRUN_PREFILL_CHUNK unset: up to 512 tokens per call)
  tbt      the same command with TFRUN_PREFILL_CHUNK=1 in tfrun's environment: the
           prompt is fed one token per decode step, as before prefill
  hf       transformers' GPT2LMHeadModel (its default attention) in a worker process
           (bench/jobs_common.py), torch.set_num_threads(T): generate(input_ids,
           attention_mask, max_new_tokens=2, do_sample=False) under
           torch.inference_mode(); the median of R calls after a warm-up per length
Weights: with hf, transformers' random init of GPT2LMHeadModel at that shape (seed 0),
written by save_pretrained; tfc compiles models/gpt2.yaml with --weights of that
model.safetensors (the same tensor names), so all engines run the same weights and
their tokens are checked against each other (prefill's 2 tokens against tbt's and
transformers'). Without hf: `tfc compile models/gpt2.yaml --seed 1` (random weights).

--quick: a smoke test (d_model 128, 2 heads, 2 layers, vocabulary 1000, max_len 256;
prompts of 16, 64 and 128 tokens; 1 thread, 1 round): every engine and check in
about a minute.
--markdown: also print the tables as Markdown (for docs/performance.md).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobs_common as jc  # noqa: E402

FULL = dict(d_model=768, heads=12, layers=12, vocab=50257, max_len=1024)
QUICK = dict(d_model=128, heads=2, layers=2, vocab=1000, max_len=256)
ENGINES = ["prefill", "tbt", "hf"]
NEW = 2                          # new tokens per generation


# -------------------------------------------------------------------------------------
# Worker side: transformers (one process per thread count, every length).
# -------------------------------------------------------------------------------------
def worker(spec):
    out = sys.stdout
    sys.stdout = sys.stderr            # library chatter must not reach the protocol
    try:
        import torch
        from transformers import GPT2LMHeadModel
        torch.set_num_threads(spec["threads"])
        torch.set_num_interop_threads(1)
        m = GPT2LMHeadModel.from_pretrained(spec["dir"]).eval()
        prompts = {int(n): torch.from_numpy(np.load(p)) for n, p in spec["prompts"].items()}
        eos = m.config.eos_token_id

        def call(n):
            ids = prompts[n]
            with torch.inference_mode():
                return m.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                  max_new_tokens=NEW, do_sample=False, num_beams=1,
                                  pad_token_id=eos)
        for n in prompts:              # warm-up per length; its tokens for the checks
            np.save(os.path.join(spec["tmp"], f"hf-{n}-{spec['threads']}.npy"),
                    call(n)[:, prompts[n].shape[1]:].numpy())
    except Exception as e:  # noqa: BLE001 - the parent reports it and goes on
        out.write(f"@@error {type(e).__name__}: {jc.first_line(str(e))}\n")
        out.flush()
        sys.exit(1)
    out.write("@@ready\n")
    out.flush()
    for ln in sys.stdin:
        cmd = ln.split()
        if not cmd or cmd[0] == "quit":
            break
        runs, n = int(cmd[1]), int(cmd[2])
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            call(n)
            ts.append((time.perf_counter() - t0) * 1e3)
        out.write(f"@@ms {jc.median(ts)}\n")
        out.flush()


class HfLength:
    """One prompt length of the transformers worker, as jc.run_rounds times an engine."""

    def __init__(self, w, n):
        self.w, self.n, self.name = w, n, f"hf/{n}"

    def time_round(self, runs):
        return float(self.w.ask(f"run {runs} {self.n}").split()[1])


# -------------------------------------------------------------------------------------
# Parent side.
# -------------------------------------------------------------------------------------
def hf_weights(d, dims):
    """transformers' random GPT2LMHeadModel (seed 0) in |d|; returns its safetensors."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging
    logging.disable_progress_bar()
    cfg = GPT2Config(vocab_size=dims["vocab"], n_positions=dims["max_len"],
                     n_embd=dims["d_model"], n_layer=dims["layers"], n_head=dims["heads"],
                     bos_token_id=dims["vocab"] - 1, eos_token_id=dims["vocab"] - 1)
    torch.manual_seed(0)
    GPT2LMHeadModel(cfg).eval().save_pretrained(d)
    return os.path.join(d, "model.safetensors")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, nargs="+", help="default 1 2 (--quick: 1)")
    ap.add_argument("--lengths", type=int, nargs="+",
                    help="prompt lengths (default 16 64 128 256 512; --quick: 16 64 128)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 3; --quick: 1)")
    ap.add_argument("--runs", type=int, default=1,
                    help="timed generations per engine, length and round (tfrun --bench R)")
    ap.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES)
    ap.add_argument("--tfc-bin", default=os.path.join(jc.ROOT, "build", "bin"))
    ap.add_argument("--quick", action="store_true", help="smoke test: tiny model, 1 round")
    ap.add_argument("--markdown", action="store_true", help="also print Markdown tables")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    if a.worker:
        return worker(json.loads(a.worker))
    dims = dict(QUICK if a.quick else FULL)
    a.threads = a.threads or ([1] if a.quick else [1, 2])
    a.lengths = a.lengths or ([16, 64, 128] if a.quick else [16, 64, 128, 256, 512])
    a.rounds = a.rounds or (1 if a.quick else 3)
    if max(a.lengths) + NEW > dims["max_len"]:
        raise SystemExit(f"prompts of up to {max(a.lengths)} tokens + {NEW} need max_len "
                         f">= {max(a.lengths) + NEW} (the model's is {dims['max_len']})")
    tfc, tfrun = (os.path.join(a.tfc_bin, b) for b in ("tfc", "tfrun"))
    if not (os.access(tfc, os.X_OK) and os.access(tfrun, os.X_OK)):
        raise SystemExit(f"no tfc and tfrun in {a.tfc_bin}: build the tree (scripts/build.sh) "
                         "or pass --tfc-bin DIR")
    tmp = jc.work_dir("tfc-bench-prefill-", a.keep)
    t0 = time.time()
    log = lambda s: print(f"[{time.time() - t0:5.0f} s] {s}", flush=True)  # noqa: E731

    # Prompts and weights ------------------------------------------------------------
    g = np.random.default_rng(0)
    prompts = {}
    for n in a.lengths:
        prompts[n] = os.path.join(tmp, f"prompt-{n}.npy")
        np.save(prompts[n], g.integers(1, dims["vocab"] - 1, size=(1, n)).astype(np.int64))
    d = os.path.join(tmp, "gpt2")
    binp = os.path.join(tmp, "gpt2.bin")
    sets = sum([["--set", f"{k}={dims[k]}"] for k in ("d_model", "heads", "layers", "vocab",
                                                     "max_len")], []) + \
        ["--set", f"bos_id={dims['vocab'] - 1}", "--set", f"eos_id={dims['vocab'] - 1}",
         "--set", "max_batch=1"]
    versions = ""
    if "hf" in a.engines:
        import torch
        import transformers
        versions = f"; transformers {transformers.__version__}, torch {torch.__version__}"
        weights = ["--weights", hf_weights(d, dims)]
        wdesc = "transformers' random init (seed 0), the same for every engine"
    else:
        weights = ["--seed", "1"]
        wdesc = "tfc compile --seed 1"
    rc, out, _ = jc.run_measured([tfc, "compile", os.path.join(jc.ROOT, "models", "gpt2.yaml"),
                                  "-o", binp] + weights + sets)
    if rc != 0:
        raise SystemExit(f"tfc compile failed:\n{out}")
    log(f"GPT-2 {dims}, weights: {wdesc}; prompts {a.lengths} tokens (batch 1) + {NEW} new "
        f"tokens, greedy; {jc.cpu_summary()}{versions}; {a.rounds} rounds x {a.runs} runs; "
        f"threads {a.threads}")

    # Engines ------------------------------------------------------------------------
    engines = {th: [] for th in a.threads}
    errors, outs = [], {}
    envs = {"prefill": None, "tbt": {"TFRUN_PREFILL_CHUNK": "1"}}
    for name in [e for e in ("prefill", "tbt") if e in a.engines]:
        for n in a.lengths:
            args = ["--generate", "--max-len", str(NEW), "--input", f"tokens={prompts[n]}"]
            for th in a.threads:
                engines[th].append(jc.Tfrun(f"{name}/{n}", tfrun, binp, args, th, envs[name]))
            o = os.path.join(tmp, f"{name}-{n}")
            try:
                engines[a.threads[-1]][-1].output(o)
                outs[(name, n)] = np.load(os.path.join(o, "ids.npy"))[:, :int(
                    np.load(os.path.join(o, "lengths.npy"))[0])]
            except (RuntimeError, OSError) as err:
                errors.append((name, n, jc.first_line(str(err))))
        log(f"{name}: tfrun ran each prompt once (outputs for the checks)")
    workers = []
    if "hf" in a.engines:
        for th in a.threads:
            spec = dict(tmp=tmp, dir=d, threads=th, prompts={str(n): p for n, p in prompts.items()})
            w = jc.Worker("hf", os.path.abspath(__file__), spec, th)
            try:
                w.wait_ready()
                workers.append(w)
                engines[th] += [HfLength(w, n) for n in a.lengths]
                log(f"hf@{th} ready")
            except RuntimeError as err:
                errors.append(("hf", "-", jc.first_line(str(err))))
                w.close()
        for n in a.lengths:
            p = os.path.join(tmp, f"hf-{n}-{a.threads[-1]}.npy")
            if os.path.exists(p):
                outs[("hf", n)] = np.load(p)

    # Checks: the new tokens of every engine against prefill's -------------------------
    checks = []
    for n in a.lengths:
        ref = outs.get(("prefill", n))
        for name in ("tbt", "hf"):
            if (name, n) in outs and ref is not None:
                got = outs[(name, n)]
                same = got.shape == ref.shape and bool((got == ref).all())
                checks.append((n, f"{name} vs prefill", "equal" if same else
                               f"DIFFERENT: {got.tolist()} vs {ref.tolist()}"))
        if ref is not None:
            checks.append((n, "prefill tokens", str(ref[0].tolist())))

    med, _, errs = jc.run_rounds(engines, a.rounds, a.runs, log)
    errors += [(nm, th, m) for nm, th, m in errs]
    for w in workers:
        w.close()

    # Tables -------------------------------------------------------------------------
    sections = []
    has_hf = any(k[0].startswith("hf/") for k in med)
    for th in a.threads:
        heads = ["prompt", "prefill ms", "token-by-token ms", "speedup"]
        if has_hf:
            heads += ["transformers ms", "transformers/prefill"]
        rows = []
        for n in a.lengths:
            p, t, h = (med.get((f"{e}/{n}", th)) for e in ENGINES)
            row = [n, f"{p:.1f}" if p else "-", f"{t:.1f}" if t else "-",
                   f"{t / p:.1f}x" if p and t else "-"]
            if has_hf:
                row += [f"{h:.1f}" if h else "-", f"{h / p:.2f}" if h and p else "-"]
            rows.append(row)
        sections.append((f"{th} thread{'s' if th > 1 else ''}: median ms per generation "
                         f"(prompt + {NEW} new tokens) over {a.rounds} rounds; speedup = "
                         "token-by-token / prefill; transformers/prefill > 1: tfc is faster",
                         heads, rows))
    big = max(a.lengths)
    target = [[th, big, f"{med[(f'tbt/{big}', th)] / med[(f'prefill/{big}', th)]:.2f}x",
               "yes" if med[(f"tbt/{big}", th)] >= 10 * med[(f"prefill/{big}", th)] else "NO"]
              for th in a.threads if (f"prefill/{big}", th) in med and (f"tbt/{big}", th) in med]
    if target:
        sections.append(("issue 23's target (for 512 tokens at GPT-2 124M's shape): the "
                         f"longest prompt here ({big}) prefilled >= 10x faster than token by "
                         "token", ["threads", "prompt", "speedup", ">= 10x"], target))
    if checks:
        sections.append(("tokens (greedy, 2 new)", ["prompt", "check", "result"], checks))
    if errors:
        sections.append(("errors", ["engine", "where", "error"], errors))
    jc.print_sections(sections, a.markdown, lambda h: (0, 1, 2) if h[-1] in ("result", "error") else ())


if __name__ == "__main__":
    main()
