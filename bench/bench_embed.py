#!/usr/bin/env python3
"""Sentence-embedding throughput: tfc against ONNX Runtime and PyTorch (issue 14, section 5).

Setup once (the venv of tests/hf/setup_venv.sh: PyPI torch, transformers, onnxruntime),
then run:
  bench/peers/run.sh embed [--threads 1 2] [--precision f32 [int8]] [--rounds 11]
      [--runs 3] [--batch 32] [--engines tfc ort ort-fused torch] [--tfc-bin DIR]
      [--markdown] [--quick] [--keep] [--isa AVX2]
--tfc-bin: where tfc and tfrun are (default build/bin of this checkout).

The job is what sentence-transformers' encode() does for all-MiniLM-L6-v2: a batch of
32 sentences, padded to the longest, through the BERT encoder, then mean pooling over
the real tokens and L2 normalization; sentences per second = batch / the median time of
one call.

Model: a BertModel at all-MiniLM-L6-v2's shape (hidden 384, 6 layers, 12 heads,
intermediate 1536, vocabulary 30522, 512 positions, GELU), random weights
(transformers' init, seed 0), written by save_pretrained. Inputs (seed 0): 32 rows of
lengths uniform in [20, 40] tokens, [CLS] 101 first and [SEP] 102 last, ids in
[1000, 30522) between, padded with 0 to the longest row; token_type_ids 0;
attention_mask 1 on the real tokens.

Engines (each (engine, threads) in its own process, jobs_common.py):
  tfc        tfc compile DIR --head sentence_embedding (mean pooling + L2 in the plan),
             then tfrun --input input_ids=... --input token_type_ids=...
             --input attention_mask=... --threads T --bench R (its median)
  ort        ONNX Runtime, CPU EP, ORT_ENABLE_ALL, intra-op threads T, inter-op 1, on a
             torch.onnx.export (TorchScript exporter, opset 17, dynamic batch and
             sequence axes) of the same model with the pooling and the normalization
             in the graph, eager attention in the export
  ort-fused  the same export after onnxruntime.transformers.optimizer.optimize_model
             (model_type bert, 12 heads, 384 hidden): ORT's offline BERT fusions
             (Attention, SkipLayerNormalization, BiasGelu), the way ONNX Runtime's docs
             say to run BERT models fast
  torch      transformers' BertModel (its default sdpa attention) + the same pooling and
             normalization in PyTorch, eager, torch.inference_mode(), set_num_threads(T)
--precision int8 (optional): tfc --precision int8; ONNX Runtime quantize_dynamic (int8
weights per channel, activations quantized at run time) of each export after
quant_pre_process (without its symbolic shape inference); PyTorch quantize_dynamic of every nn.Linear (qint8).
Check: every engine's embeddings against PyTorch f32 (eager attention) computed in
this process: max abs difference and the smallest cosine similarity over the batch.
Memory: each engine's peak RSS (ru_maxrss of its own process, see jobs_common.py).

--quick: a smoke test (hidden 64, 2 layers, 4 heads, vocabulary 2000, batch 8, 1 round).
--isa AVX2: cap every engine at AVX2 through its own switch (jobs_common.ISA_CAPS), so
that an AVX-512 machine runs what an AVX2-only CPU runs; ONNX Runtime has no switch
and runs the machine's best ISA (the header line says so).
--markdown: also print the tables as Markdown (for docs/performance.md).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobs_common as jc  # noqa: E402

FULL = dict(hidden=384, layers=6, heads=12, ffn=1536, vocab=30522)
QUICK = dict(hidden=64, layers=2, heads=4, ffn=128, vocab=2000)
ENGINES = ["tfc", "ort", "ort-fused", "torch"]
INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def _pool(torch, h, mask):
    """sentence-transformers' Pooling (mean) + Normalize."""
    m = mask.unsqueeze(-1).to(h.dtype)
    mean = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(mean, p=2, dim=1)


# -------------------------------------------------------------------------------------
# Worker side (no torch import for ORT).
# -------------------------------------------------------------------------------------
def setup_worker(s):
    feeds = {k: np.load(s[k]) for k in INPUTS}
    th = s["threads"]
    if s["engine"].startswith("ort"):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = th
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(s["onnx"], so, providers=["CPUExecutionProvider"])
        names = {i.name for i in sess.get_inputs()}
        feeds = {k: v for k, v in feeds.items() if k in names}
        return (lambda: sess.run(None, feeds)[0]), (lambda r: np.save(s["out"], r))

    import torch
    from transformers import BertModel
    torch.set_num_threads(th)
    torch.set_num_interop_threads(1)
    m = BertModel.from_pretrained(s["dir"], add_pooling_layer=False).eval()
    if s["precision"] == "int8":
        m = torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
    t = {k: torch.from_numpy(v) for k, v in feeds.items()}

    def call():
        with torch.inference_mode():
            return _pool(torch, m(**t).last_hidden_state, t["attention_mask"])
    return call, (lambda r: np.save(s["out"], r.numpy()))


# -------------------------------------------------------------------------------------
# Parent side.
# -------------------------------------------------------------------------------------
class _Embed:
    """BertModel + pooling + normalization, for the ONNX export (a torch.nn.Module)."""

    def __new__(cls, torch, m):
        class Embed(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, input_ids, token_type_ids, attention_mask):
                h = self.m(input_ids=input_ids, token_type_ids=token_type_ids,
                           attention_mask=attention_mask).last_hidden_state
                return _pool(torch, h, attention_mask)
        return Embed()


def build(tmp, dims, batch, lo, hi, engines, precisions):
    """The checkpoint, the inputs, the ONNX files, the PyTorch f32 reference."""
    import warnings

    import torch
    from transformers import BertConfig, BertModel
    d = os.path.join(tmp, "minilm")
    cfg = BertConfig(hidden_size=dims["hidden"], num_hidden_layers=dims["layers"],
                     num_attention_heads=dims["heads"], intermediate_size=dims["ffn"],
                     vocab_size=dims["vocab"], max_position_embeddings=512)
    torch.manual_seed(0)
    BertModel(cfg, add_pooling_layer=False).eval().save_pretrained(d)
    g = np.random.default_rng(0)
    lens = g.integers(lo, hi + 1, size=batch)
    s = int(lens.max())
    ids = np.zeros((batch, s), np.int64)
    mask = np.zeros((batch, s), np.int64)
    for b, n in enumerate(lens):
        ids[b, :n] = g.integers(1000, dims["vocab"], size=n)
        ids[b, 0], ids[b, n - 1] = 101, 102
        mask[b, :n] = 1
    arrays = dict(input_ids=ids, token_type_ids=np.zeros_like(ids), attention_mask=mask)
    paths = {k: os.path.join(tmp, k + ".npy") for k in INPUTS}
    for k in INPUTS:
        np.save(paths[k], arrays[k])
    ref_model = BertModel.from_pretrained(d, add_pooling_layer=False,
                                          attn_implementation="eager").eval()
    emb = _Embed(torch, ref_model)
    t = tuple(torch.from_numpy(arrays[k]) for k in INPUTS)
    with torch.inference_mode():
        ref = emb(*t).numpy()
    onnx = {}
    if any(e.startswith("ort") for e in engines):
        onnx["ort"] = os.path.join(tmp, "minilm.onnx")
        dyn = {k: {0: "batch", 1: "seq"} for k in INPUTS}
        dyn["sentence_embedding"] = {0: "batch"}
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(emb, t, onnx["ort"], input_names=list(INPUTS),
                              output_names=["sentence_embedding"], dynamic_axes=dyn,
                              opset_version=17, dynamo=False)
        if "ort-fused" in engines:
            from onnxruntime.transformers import optimizer
            onnx["ort-fused"] = os.path.join(tmp, "minilm-fused.onnx")
            opt = optimizer.optimize_model(onnx["ort"], model_type="bert",
                                           num_heads=dims["heads"], hidden_size=dims["hidden"])
            onnx["fusions"] = opt.get_fused_operator_statistics()
            opt.save_model_to_file(onnx["ort-fused"])
        if "int8" in precisions:
            import logging

            from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic
            logging.disable(logging.WARNING)
            for k in ("ort", "ort-fused"):
                if k in onnx:
                    # quant_pre_process without its symbolic shape inference, which
                    # fails on the dynamic axes of this export
                    src = onnx[k].replace(".onnx", "-pre.onnx")
                    quant_pre_process(onnx[k], src, skip_symbolic_shape=True)
                    onnx[k + "-int8"] = onnx[k].replace(".onnx", "-int8.onnx")
                    # DefaultTensorType: the fused graph's contrib ops have no inferred
                    # output types, and their outputs are f32
                    quantize_dynamic(src, onnx[k + "-int8"], weight_type=QuantType.QInt8,
                                     per_channel=True,
                                     extra_options={"DefaultTensorType": 1})  # FLOAT
            logging.disable(logging.NOTSET)
    return d, paths, lens, ref, onnx


def compare(out, ref):
    out = np.asarray(out, np.float64).reshape(ref.shape)
    cos = (out * ref).sum(1) / (np.linalg.norm(out, axis=1) * np.linalg.norm(ref, axis=1))
    return f"max abs {np.abs(out - ref).max():.2e}, min cosine {cos.min():.7f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, nargs="+", help="default 1 2 (--quick: 1)")
    ap.add_argument("--precision", nargs="+", default=["f32"], choices=["f32", "int8"])
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 11; --quick: 1)")
    ap.add_argument("--runs", type=int, help="timed calls per engine per round (default 3)")
    ap.add_argument("--batch", type=int, help="sentences (default 32; --quick: 8)")
    ap.add_argument("--len", type=int, nargs=2, default=[20, 40], metavar=("MIN", "MAX"),
                    help="sentence lengths in tokens, [CLS] and [SEP] included")
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
    a.rounds = a.rounds or (1 if a.quick else 11)
    a.runs = a.runs or (2 if a.quick else 3)
    a.batch = a.batch or (8 if a.quick else 32)
    tfc, tfrun = (os.path.join(a.tfc_bin, b) for b in ("tfc", "tfrun"))
    if "tfc" in a.engines and not (os.access(tfc, os.X_OK) and os.access(tfrun, os.X_OK)):
        raise SystemExit(f"no tfc and tfrun in {a.tfc_bin}: build the tree (scripts/build.sh) "
                         "or pass --tfc-bin DIR")
    tmp = jc.work_dir("tfc-bench-embed-", a.keep)
    log = lambda s: print(s, flush=True)  # noqa: E731

    import onnxruntime
    import torch
    import transformers
    d, paths, lens, ref, onnx = build(tmp, dims, a.batch, *a.len, a.engines, a.precision)
    log(f"BERT {dims}, random weights, mean pooling + L2; batch {a.batch} sentences of "
        f"{lens.min()}-{lens.max()} tokens (mean {lens.mean():.1f}, padded to {lens.max()}); "
        f"{jc.cpu_summary()}; {cap}; onnxruntime {onnxruntime.__version__}, transformers "
        f"{transformers.__version__}, torch {torch.__version__}; {a.rounds} rounds x "
        f"{a.runs} runs; threads {a.threads}")
    if "fusions" in onnx:
        log("ort-fused: " + ", ".join(f"{k} {v}" for k, v in onnx["fusions"].items() if v))

    results, rss, checks, errors = {}, {}, [], []
    for prec in a.precision:
        engines = {th: [] for th in a.threads}
        if "tfc" in a.engines:
            binp = os.path.join(tmp, f"minilm-{prec}.bin")
            rc, out, _ = jc.run_measured([tfc, "compile", d, "-o", binp, "--precision", prec,
                                          "--head", "sentence_embedding",
                                          "--set", f"max_batch={max(64, a.batch)}"])
            if rc != 0:
                errors.append(("tfc", prec, "compile failed: " + jc.first_line(out)))
            else:
                args = sum([["--input", f"{k}={paths[k]}"] for k in INPUTS], [])
                for th in a.threads:
                    engines[th].append(jc.Tfrun("tfc", tfrun, binp, args, th))
                o = os.path.join(tmp, f"tfc-{prec}")
                engines[a.threads[-1]][-1].output(o)
                checks.append((prec, "tfc", compare(
                    np.load(os.path.join(o, "sentence_embedding.npy")), ref)))
        for name in [e for e in ENGINES[1:] if e in a.engines]:
            key = name if prec == "f32" else f"{name}-int8"
            if name.startswith("ort") and key not in onnx:
                continue
            first = True
            for th in a.threads:
                out = os.path.join(tmp, f"{name}-{prec}-{th}.npy")
                spec = dict(paths, tmp=tmp, dir=d, engine=name, threads=th, out=out,
                            precision=prec, onnx=onnx.get(key))
                w = jc.Worker(name, os.path.abspath(__file__), spec, th)
                try:
                    w.wait_ready()
                    engines[th].append(w)
                    if first:
                        checks.append((prec, name, compare(np.load(out), ref)))
                        first = False
                except RuntimeError as err:
                    errors.append((name, prec, jc.first_line(str(err))))
                    w.close()
        jc.measure(prec, engines, a, log, results, rss, errors)

    # Tables -------------------------------------------------------------------------
    names = [e for e in ENGINES if e in a.engines]
    peers = [e for e in names if e != "tfc"]
    ort_names = [e for e in peers if e.startswith("ort")]
    heads = ["precision", "threads"] + [f"{e} sent/s" for e in names]
    if "tfc" in names:
        heads += (["tfc/best ort"] if ort_names else []) + [f"tfc/{e}" for e in peers]
    rows = []
    for prec in a.precision:
        for th in a.threads:
            sps = {e: a.batch / results[(prec, e, th)] * 1e3 for e in names
                   if (prec, e, th) in results}
            row = [prec, th] + [f"{sps[e]:.1f}" if e in sps else "-" for e in names]
            if "tfc" in names:
                best = max([sps[e] for e in ort_names if e in sps], default=None)
                if ort_names:
                    row.append(f"{sps['tfc'] / best:.2f}" if "tfc" in sps and best else "-")
                row += [f"{sps['tfc'] / sps[e]:.2f}" if "tfc" in sps and e in sps else "-"
                        for e in peers]
            rows.append(row)
    ms_heads = ["precision", "threads"] + [f"{e} ms" for e in names]
    ms_rows = [[prec, th] + [f"{results[(prec, e, th)]:.1f}" if (prec, e, th) in results
                             else "-" for e in names]
               for prec in a.precision for th in a.threads]
    mheads = ["precision", "engine"] + [f"peak RSS MB, {th} thr" for th in a.threads]
    mrows = [[prec, e] + [f"{rss[(prec, e, th)] / 1024:.0f}" if rss.get((prec, e, th)) else "-"
                          for th in a.threads]
             for prec in a.precision for e in names]
    title = (f"sentences/s (median over {a.rounds} rounds of the median of {a.runs} calls; "
             f"batch {a.batch}); tfc/peer > 1: tfc is faster")
    sections = [(title, heads, rows), ("median ms per batch", ms_heads, ms_rows),
                ("peak RSS per engine process", mheads, mrows),
                ("embeddings against PyTorch f32 (eager attention)",
                 ["precision", "engine", "check"], checks)]
    if errors:
        sections.append(("errors", ["engine", "precision", "error"], errors))
    jc.print_sections(sections, a.markdown,
                      lambda h: (0, 1, 2) if h[-1] in ("check", "error")
                      else (0, 1) if h[1] == "engine" else (0,))


if __name__ == "__main__":
    main()
