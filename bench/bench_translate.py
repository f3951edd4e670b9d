#!/usr/bin/env python3
"""Translation throughput: tfc against CTranslate2 and transformers (issue 14, section 5).

Setup once (the venv of tests/hf/setup_venv.sh: PyPI torch, transformers, ctranslate2),
then run:
  bench/peers/run.sh translate [--threads 1 2] [--precision f32 int8] [--rounds 4]
      [--runs 1] [--batch 32] [--beam 4] [--new-tokens 32] [--engines tfc ct2 hf]
      [--tfc-bin DIR] [--markdown] [--quick] [--keep] [--isa AVX2]
--tfc-bin: where tfc and tfrun are (default build/bin of this checkout).

The job is CTranslate2's own translation benchmark setup: beam search with 4 beams
over a batch of 32 source sentences of 20-40 tokens, every engine producing the same
number of tokens, and tokens per second = batch x new tokens / the median time of
one translate_batch / generate call.

Model: a MarianMTModel at opus-mt-en-de's shape (d_model 512, 8 heads, FFN 2048,
6+6 layers, vocabulary 58101, pad 58100 = decoder_start, eos 0, static sinusoidal
positions, scale_embedding, swish, one shared embedding table as the output
projection, final_logits_bias), random weights (transformers' init, seed 0), written
by save_pretrained with a WordLevel tokenizer (tokenizer.json: "</s>" 0, "<unk>" 1,
"t2".."t58099", "<pad>" 58100) so that CTranslate2's converter can read the directory.
Two changes make every engine do the same work:
  - final_logits_bias of eos (0) and of pad (58100) is -1e4, so no engine ever picks
    them: every hypothesis runs to exactly --new-tokens tokens (tfrun has no minimum
    length; CTranslate2 drops the pad token from its vocabulary, and OPUS-MT's
    configs forbid it with bad_words_ids);
  - forced_eos_token_id is removed from config.json and generation_config.json
    (transformers and tfc would force eos as the last token; CTranslate2 does not).
The sources: ids in [2, 58100), each row ends with eos, lengths uniform in [20, 40]
(seed 0), right-padded with pad (attention_mask 0 there); CTranslate2 gets each row's
tokens without the padding (it batches them itself).

Engines (per precision; each (engine, threads) in its own process, jobs_common.py):
  tfc   tfc compile DIR --precision P --set max_batch=batch*beam (the HF default is 64
        rows), then tfrun --generate --beam 4 --max-len N --input input_ids=...
        --input attention_mask=... --threads T --bench R (its median; its model load
        is not timed)
  ct2   CTranslate2 from PyPI, the model converted from the same directory by its own
        `ct2-transformers-converter --model DIR` (--quantization int8 for int8),
        Translator(compute_type float32 | int8, intra_threads T, inter_threads 1),
        translate_batch(beam_size 4, min_decoding_length N, max_decoding_length N,
        return_scores True)
  hf    transformers' MarianMTModel.from_pretrained(DIR) (its default sdpa attention)
        .generate(num_beams 4, min_new_tokens N, max_new_tokens N) under
        torch.inference_mode(), torch.set_num_threads(T); int8: PyTorch's dynamic
        quantization of every nn.Linear (torch.ao.quantization.quantize_dynamic,
        qint8), the int8 path PyTorch offers on the CPU
Checks: every engine's best hypothesis per sentence against transformers f32's (when
hf runs; else against tfc f32): how many sentences are equal, how many tokens agree
position by position; and the scores tfc and CTranslate2 give their best hypotheses
(log-probability / length, length_penalty 1) against transformers f32's
log-probabilities of the same tokens, teacher-forced (a check of every step's
logits, which the tokens alone are not when the random model repeats a token: with
transformers' default init every engine's best hypothesis is one token repeated).
Random weights give near-flat logits, so a 1e-6 difference can swap two beams: a
token difference is not an error by itself, and the work stays the same (N tokens for
every hypothesis of every engine; the token count is checked).
Memory: each engine's peak RSS (ru_maxrss of its own process: interpreter, library,
model and working memory; for tfc the largest over its tfrun processes).

--quick: a smoke test (d_model 64, 2+2 layers, vocabulary 1000, batch 8, 8 new tokens,
1 round, 1 thread); every engine and check in seconds.
--isa AVX2: cap every engine at AVX2 through its own switch (jobs_common.ISA_CAPS), so
that an AVX-512 machine runs what an AVX2-only CPU runs; ONNX Runtime has no switch
and runs the machine's best ISA (the header line says so).
--markdown: also print the tables as Markdown (for docs/performance.md).
"""
import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobs_common as jc  # noqa: E402

FULL = dict(d_model=512, heads=8, ffn=2048, layers=6, vocab=58101)
QUICK = dict(d_model=64, heads=4, ffn=128, layers=2, vocab=1000)
EOS, UNK = 0, 1
ENGINES = ["tfc", "ct2", "hf"]


def vocab_tokens(v):
    """The WordLevel vocabulary, in id order (pad last, as Marian's)."""
    return ["</s>", "<unk>"] + [f"t{i}" for i in range(2, v - 1)] + ["<pad>"]


# -------------------------------------------------------------------------------------
# Worker side (no torch import for ct2).
# -------------------------------------------------------------------------------------
def setup_worker(s):
    n, beam, th = s["new_tokens"], s["beam"], s["threads"]
    src, mask = np.load(s["src"]), np.load(s["mask"])
    if s["engine"] == "ct2":
        import ctranslate2
        tr = ctranslate2.Translator(s["ct2_dir"], device="cpu", compute_type=s["compute"],
                                    inter_threads=1, intra_threads=th)
        vocab = vocab_tokens(s["vocab"])
        index = {t: i for i, t in enumerate(vocab)}
        batch = [[vocab[i] for i in row[:m.sum()]] for row, m in zip(src.tolist(), mask)]

        def call():
            return tr.translate_batch(batch, beam_size=beam, min_decoding_length=n,
                                      max_decoding_length=n, max_batch_size=0,
                                      return_scores=True)

        def save(res):
            ids = np.full((len(res), max(len(r.hypotheses[0]) for r in res)), -1, np.int64)
            for b, r in enumerate(res):
                ids[b, :len(r.hypotheses[0])] = [index[t] for t in r.hypotheses[0]]
            np.save(s["out"], ids)
            np.save(s["out"].replace(".npy", "-scores.npy"),
                    np.array([r.scores[0] for r in res], np.float64))
        return call, save

    import torch
    from transformers import MarianMTModel
    torch.set_num_threads(th)
    torch.set_num_interop_threads(1)
    m = MarianMTModel.from_pretrained(s["dir"]).eval()
    if s["precision"] == "int8":
        m = torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
    ts, tm = torch.from_numpy(src), torch.from_numpy(mask)

    def call():
        with torch.inference_mode():
            return m.generate(input_ids=ts, attention_mask=tm, num_beams=beam, do_sample=False,
                              min_new_tokens=n, max_new_tokens=n)

    def save(res):
        np.save(s["out"], res[:, 1:].numpy())      # after decoder_start
    return call, save


# -------------------------------------------------------------------------------------
# Parent side.
# -------------------------------------------------------------------------------------
def build_checkpoint(d, dims):
    """The random-weight Marian directory (see the docstring) and its tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import MarianConfig, MarianMTModel, PreTrainedTokenizerFast
    v = dims["vocab"]
    cfg = MarianConfig(
        vocab_size=v, decoder_vocab_size=v, pad_token_id=v - 1, eos_token_id=EOS,
        decoder_start_token_id=v - 1, forced_eos_token_id=None, scale_embedding=True,
        activation_function="swish", d_model=dims["d_model"],
        encoder_layers=dims["layers"], decoder_layers=dims["layers"],
        encoder_attention_heads=dims["heads"], decoder_attention_heads=dims["heads"],
        encoder_ffn_dim=dims["ffn"], decoder_ffn_dim=dims["ffn"],
        max_position_embeddings=512, share_encoder_decoder_embeddings=True)
    torch.manual_seed(0)
    m = MarianMTModel(cfg).eval()
    with torch.no_grad():
        m.final_logits_bias[0, EOS] = -1e4
        m.final_logits_bias[0, v - 1] = -1e4
        # CTranslate2 starts the decoder from a zero embedding; Marian from pad's row
        m.model.shared.weight[v - 1].zero_()
    m.generation_config.forced_eos_token_id = None
    m.save_pretrained(d)
    vocab = {t: i for i, t in enumerate(vocab_tokens(v))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>",
                            pad_token="<pad>").save_pretrained(d)
    for f in ("config.json", "generation_config.json"):   # no forced eos anywhere
        p = os.path.join(d, f)
        c = json.load(open(p))
        c.pop("forced_eos_token_id", None)
        json.dump(c, open(p, "w"), indent=2)


def make_inputs(tmp, dims, batch, lo, hi):
    g = np.random.default_rng(0)
    v = dims["vocab"]
    lens = g.integers(lo, hi + 1, size=batch)
    s = int(lens.max())
    src = np.full((batch, s), v - 1, np.int64)
    mask = np.zeros((batch, s), np.int64)
    for b, n in enumerate(lens):
        src[b, :n - 1] = g.integers(2, v - 1, size=n - 1)
        src[b, n - 1] = EOS
        mask[b, :n] = 1
    paths = os.path.join(tmp, "src.npy"), os.path.join(tmp, "mask.npy")
    np.save(paths[0], src)
    np.save(paths[1], mask)
    return paths, lens


_TF_MODEL = {}


def teacher_forced_scores(d, src, mask, ids):
    """transformers f32's length-normalized log-probability of each row of |ids| (n new
    tokens, no eos): sum of log_softmax at the chosen tokens / n, the score beam search
    ranks by with length_penalty 1 (tfc's scores.npy, CTranslate2's scores)."""
    import torch
    from transformers import MarianMTModel
    if d not in _TF_MODEL:
        _TF_MODEL[d] = MarianMTModel.from_pretrained(d).eval()
    m = _TF_MODEL[d]
    start = m.config.decoder_start_token_id
    t = torch.from_numpy(ids)
    dec = torch.cat([torch.full((t.shape[0], 1), start, dtype=t.dtype), t[:, :-1]], 1)
    with torch.inference_mode():
        lp = torch.log_softmax(m(input_ids=torch.from_numpy(src), attention_mask=torch.from_numpy(
            mask), decoder_input_ids=dec).logits.double(), -1)
    return lp.gather(-1, t.unsqueeze(-1))[..., 0].sum(1).numpy() / t.shape[1]


def compare(ids, ref, n):
    """'equal sentences x/B, tokens agreeing y%' (position by position over n tokens)."""
    if ids.shape[0] != ref.shape[0]:
        return f"batch {ids.shape[0]} vs {ref.shape[0]}"
    lens = [(row >= 0).sum() for row in ids]
    bad_len = sum(ln != n for ln in lens)
    a, b = ids[:, :n], ref[:, :n]
    if a.shape != b.shape:
        return f"shape {list(ids.shape)} vs {list(ref.shape)}"
    rows = int((a == b).all(axis=1).sum())
    agree = float((a == b).mean())
    first = [int(np.argmax(r != q)) for r, q in zip(a, b) if (r != q).any()]
    txt = f"{rows}/{len(a)} sentences equal, {100 * agree:.1f}% of tokens"
    if first:
        txt += f" (first difference at position {min(first)}, median {int(np.median(first))})"
    if bad_len:
        txt += f"; {bad_len} rows not {n} tokens long!"
    return txt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, nargs="+", help="default 1 2 (--quick: 1)")
    ap.add_argument("--precision", nargs="+", default=["f32", "int8"], choices=["f32", "int8"])
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 4; --quick: 1)")
    ap.add_argument("--runs", type=int, default=1, help="timed calls per engine per round")
    ap.add_argument("--batch", type=int, help="source sentences (default 32; --quick: 8)")
    ap.add_argument("--src-len", type=int, nargs=2, default=[20, 40], metavar=("MIN", "MAX"))
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, help="tokens per sentence (default 32; --quick: 8)")
    ap.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES)
    ap.add_argument("--tfc-bin", default=os.path.join(jc.ROOT, "build", "bin"))
    ap.add_argument("--quick", action="store_true", help="smoke test: tiny model, 1 round")
    ap.add_argument("--markdown", action="store_true", help="also print Markdown tables")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--isa", choices=sorted(jc.ISA_CAPS),
                    help="cap every engine at this ISA (jobs_common.ISA_CAPS): what an "
                         "AVX2-only CPU runs, on an AVX-512 machine")
    a = ap.parse_args()
    if a.worker:
        return jc.worker_main(json.loads(a.worker), setup_worker)
    cap = jc.cap_isa(a.isa)  # before the peers' libraries load: they read it then
    dims = dict(QUICK if a.quick else FULL)
    a.threads = a.threads or ([1] if a.quick else [1, 2])
    a.rounds = a.rounds or (1 if a.quick else 4)
    a.batch = a.batch or (8 if a.quick else 32)
    n = a.new_tokens = a.new_tokens or (8 if a.quick else 32)
    tfc, tfrun = (os.path.join(a.tfc_bin, b) for b in ("tfc", "tfrun"))
    if "tfc" in a.engines and not (os.access(tfc, os.X_OK) and os.access(tfrun, os.X_OK)):
        raise SystemExit(f"no tfc and tfrun in {a.tfc_bin}: build the tree (scripts/build.sh) "
                         "or pass --tfc-bin DIR")
    tmp = jc.work_dir("tfc-bench-translate-", a.keep)
    t0 = time.time()
    log = lambda s: print(f"[{time.time() - t0:5.0f} s] {s}", flush=True)  # noqa: E731

    import ctranslate2
    import torch
    import transformers
    d = os.path.join(tmp, "marian")
    build_checkpoint(d, dims)
    (src, mask), lens = make_inputs(tmp, dims, a.batch, *a.src_len)
    log(f"Marian {dims}, random weights; batch {a.batch} sources of {lens.min()}-{lens.max()} "
        f"tokens (mean {lens.mean():.1f}), beam {a.beam}, {n} new tokens each; "
        f"{jc.cpu_summary()}; {cap}; ctranslate2 {ctranslate2.__version__}, transformers "
        f"{transformers.__version__}, torch {torch.__version__}; {a.rounds} rounds x "
        f"{a.runs} runs; threads {a.threads}")

    conv = shutil.which("ct2-transformers-converter") or os.path.join(
        os.path.dirname(sys.executable), "ct2-transformers-converter")
    tokens = a.batch * n
    results, rss, checks, errors = {}, {}, [], []
    ref = None
    for prec in a.precision:
        engines = {th: [] for th in a.threads}
        outs, scores = {}, {}
        # tfc
        if "tfc" in a.engines:
            binp = os.path.join(tmp, f"marian-{prec}.bin")
            rc, out, _ = jc.run_measured([tfc, "compile", d, "-o", binp, "--precision", prec,
                                          "--set", f"max_batch={a.batch * a.beam}"])
            if rc != 0:
                errors.append(("tfc", prec, "compile failed: " + jc.first_line(out)))
            else:
                args = ["--generate", "--beam", str(a.beam), "--max-len", str(n),
                        "--input", f"input_ids={src}", "--input", f"attention_mask={mask}"]
                for th in a.threads:
                    e = jc.Tfrun("tfc", tfrun, binp, args, th)
                    engines[th].append(e)
                o = os.path.join(tmp, f"tfc-{prec}")
                engines[a.threads[-1]][-1].output(o)
                log(f"[{prec}] tfc compiled, output written")
                outs["tfc"] = np.load(os.path.join(o, "ids.npy"))
                ln = np.load(os.path.join(o, "lengths.npy"))
                outs["tfc"] = np.where(np.arange(outs["tfc"].shape[1]) < ln[:, None],
                                       outs["tfc"], -1)
                scores["tfc"] = np.load(os.path.join(o, "scores.npy"))
        # Python peers
        spec0 = dict(tmp=tmp, dir=d, src=src, mask=mask, new_tokens=n, beam=a.beam,
                     precision=prec, vocab=dims["vocab"])
        if "ct2" in a.engines:
            ct2_dir = os.path.join(tmp, f"ct2-{prec}")
            if not os.path.exists(ct2_dir):
                cmd = [conv, "--model", d, "--output_dir", ct2_dir]
                if prec == "int8":
                    cmd += ["--quantization", "int8"]
                rc, out, _ = jc.run_measured(cmd, env=dict(os.environ, HF_HUB_OFFLINE="1"))
                if rc != 0:
                    errors.append(("ct2", prec, "converter failed: " + jc.first_line(out)))
                log(f"[{prec}] ct2-transformers-converter done")
        for name in [e for e in ("ct2", "hf") if e in a.engines]:
            if name == "ct2" and not os.path.exists(os.path.join(tmp, f"ct2-{prec}")):
                continue
            for th in a.threads:
                out = os.path.join(tmp, f"{name}-{prec}-{th}.npy")
                spec = dict(spec0, engine=name, threads=th, out=out, ct2_dir=os.path.join(
                    tmp, f"ct2-{prec}"), compute={"f32": "float32", "int8": "int8"}[prec])
                w = jc.Worker(name, os.path.abspath(__file__), spec, th)
                try:
                    w.wait_ready()
                    log(f"[{prec}] {name}@{th} ready")
                    engines[th].append(w)
                    outs[name] = np.load(out)
                    if name == "ct2":
                        scores[name] = np.load(out.replace(".npy", "-scores.npy"))
                except RuntimeError as err:
                    errors.append((name, prec, jc.first_line(str(err))))
                    w.close()
        if ref is None:
            ref = ("hf f32", outs["hf"]) if "hf" in outs and prec == "f32" else \
                  (f"tfc {prec}", outs.get("tfc"))
        for name, ids in outs.items():
            txt = f"{ids.shape[1]} tokens; against {ref[0]}: " + compare(ids, ref[1], n)
            if name in scores and ids.shape[1] == n and (ids >= 0).all():
                want = teacher_forced_scores(d, np.load(src), np.load(mask), ids)
                txt += (f"; scores vs transformers f32 on these tokens: max |diff| "
                        f"{np.abs(scores[name] - want).max():.1e} (scores about "
                        f"{np.median(want):.3f})")
            checks.append((prec, name, txt))
        jc.measure(prec, engines, a, log, results, rss, errors)

    # Tables -------------------------------------------------------------------------
    names = [e for e in ENGINES if e in a.engines]
    peers = [e for e in names if e != "tfc"]
    heads = ["precision", "threads"] + [f"{e} tok/s" for e in names] + \
        [f"tfc/{e}" for e in peers if "tfc" in names]
    rows = []
    for prec in a.precision:
        for th in a.threads:
            tps = {e: tokens / results[(prec, e, th)] * 1e3 for e in names
                   if (prec, e, th) in results}
            row = [prec, th] + [f"{tps[e]:.0f}" if e in tps else "-" for e in names]
            row += [f"{tps['tfc'] / tps[e]:.2f}" if "tfc" in tps and e in tps else "-"
                    for e in peers if "tfc" in names]
            rows.append(row)
    mheads = ["precision", "engine"] + [f"peak RSS MB, {th} thr" for th in a.threads]
    mrows = [[prec, e] + [f"{rss[(prec, e, th)] / 1024:.0f}" if rss.get((prec, e, th)) else "-"
                          for th in a.threads]
             for prec in a.precision for e in names]
    ms_heads = ["precision", "threads"] + [f"{e} ms" for e in names]
    ms_rows = [[prec, th] + [f"{results[(prec, e, th)]:.0f}" if (prec, e, th) in results
                             else "-" for e in names]
               for prec in a.precision for th in a.threads]
    title = (f"tokens/s (median over {a.rounds} rounds; batch {a.batch} x {n} new tokens, "
             f"beam {a.beam}); tfc/peer > 1: tfc is faster")
    sections = [(title, heads, rows), ("median ms per batch", ms_heads, ms_rows),
                ("peak RSS per engine process", mheads, mrows),
                ("tokens: best hypothesis per sentence", ["precision", "engine", "check"],
                 checks)]
    if errors:
        sections.append(("errors", ["engine", "precision", "error"], errors))
    jc.print_sections(sections, a.markdown,
                      lambda h: (0, 1, 2) if h[-1] in ("check", "error")
                      else (0, 1) if h[1] == "engine" else (0,))


if __name__ == "__main__":
    main()
