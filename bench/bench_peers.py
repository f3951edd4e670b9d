#!/usr/bin/env python3
"""tfc against its peers on the CPU: ONNX Runtime, CTranslate2 and PyTorch (issue 11, section 7).

Setup once (a venv under build/, PyPI wheels; see bench/peers/setup_venv.sh), then run:
  bench/peers/setup_venv.sh
  bench/peers/run.sh [--threads 1 2] [--rounds 11] [--runs 3]
      [--cases enc:1x128 enc:1x512 enc:8x128 encdec:1x128 greedy]
      [--engines tfc ort ct2 torch] [--precision f32 | int8 bf16]
      [--new-tokens 64] [--src-len 32] [--set NAME=VALUE ...] [--markdown] [--quick]
run.sh runs this file with the venv's Python and the LD_LIBRARY_PATH that PyPI
torch needs. --omp-wait default|passive: see OMP_WAIT below. It needs a built tree (build/bin/tfc, tfrun).

Model: tutorial-floydhub at base size (d_model 512, 8 heads, d_ff 2048, 6+6 layers,
vocab 32000), random Xavier weights with seed 0, built by scripts/torch_models.py
exactly as bench/bench_floydhub.py builds it (PE table of 512 positions) and saved to
safetensors for tfc. Every engine gets these weights and the same token ids (seeded).

Cases:
  enc:BxS     the encoder alone (embedding, PE, 6 layers, final norm) on a [B, S] source
  encdec:BxS  encoder + decoder + the 32000-way output projection on a [B, S] source and
              target (the target starts with bos = 1)
  greedy      greedy decoding of --new-tokens (64) tokens from one --src-len (32) token
              source, the encoder included; every engine must produce exactly 64 tokens,
              so the eos is an id that PyTorch's greedy output never contains
Engines (each runs the same computation; none is given a shortcut the others lack):
  tfc    build/bin/tfc compile (bench/tutorial-floydhub-encoder.yaml for enc, else
         models/tutorial-floydhub.yaml; --precision P), then build/bin/tfrun --bench R
         --threads T (with --generate --max-len N for greedy); its median is parsed as
         bench_generate.parse_tfrun does (tfrun prints nothing quieter)
  ort    ONNX Runtime, CPU EP, graph optimizations on, intra-op threads T, inter-op 1,
         spinning as by default (off with --omp-wait passive). Graphs exported from
         the same torch model (torch.onnx.export, TorchScript exporter, static shapes per
         case): the encoder for enc, the whole model with the vocab head for encdec; for
         greedy two graphs, `encode` (encoder + each layer's cross-attention K/V) and a
         KV-cached `step` (one token in: the next id by ArgMax and the new self-attention
         K/V out), looped from Python like bench_generate.cached_greedy
  ct2    CTranslate2 (ctranslate2.specs.TransformerSpec filled from the state_dict, as
         its OpenNMT-py converter fills it; saved once, loaded with compute_type
         float32 / int8 / bfloat16, intra_threads T). enc: ctranslate2.Encoder over a
         TransformerEncoderModelSpec. encdec: Translator.score_batch, which runs the
         encoder, the decoder and the vocab projection over the whole target (and a
         log_softmax: CT2 4.8 has no Python call that returns raw decoder logits).
         greedy: translate_batch(beam_size=1, max_decoding_length=N, end_token=<unused>)
  torch  the tutorial's own modules (PyPI torch, MKL), eager, torch.inference_mode();
         greedy is bench_generate.cached_greedy (the same modules with a KV cache)

How CT2 expresses the FloydHub model: pre-norm encoder/decoder layers with a final norm,
relu FFN, embeddings * sqrt(d_model) (scale_embeddings) plus the tutorial's quirky PE
table given as position_encodings.encodings, fused QKV (self) and KV (cross)
projections. One quirk it cannot express exactly: the tutorial's Norm is
alpha * (x - mean) / (std_unbiased + 1e-6) + bias, CT2's LayerNorm is
gamma * (x - mean) / sqrt(var_biased + eps) + beta. We set gamma = alpha * sqrt((d-1)/d)
(which turns the biased variance into the unbiased one) and eps = 1e-12 * (d-1)/d, so
the only difference left is where the 1e-6 goes: a relative change of about
1e-6 / std per norm. Measured in PyTorch alone (the tutorial's Norm swapped for this
formula, encoder 1x128, f32): 1.0e-6 relative L2 at d_model 64, 1.3e-6 at 512, against
2.4e-7 / 3.8e-7 for f32 rounding alone; so CT2's f32 check shows about 1e-6 where
tfc and ORT show 2e-7 to 4e-7. The check below measures it in every run.

Timing: for each case, `--rounds` interleaved rounds; in each round, for each thread
count, every engine is timed once, in an order that rotates from round to round: the
median of --runs calls after one warm-up call (tfc: one `tfrun --bench R` process,
whose own warm-up and median are used; its model load is not timed). Each engine runs
with its thread pools as out of the box, and a 0.3 s pause after its turn lets their
idle spinning end before the next engine (--omp-wait passive: OMP_WAIT_POLICY=PASSIVE
for all instead).
The table shows the median over the rounds in ms (greedy: ms per whole generation),
tfc / min(ORT, CT2) (<= 1.0: tfc is as fast or faster) and tfc / each. Then the check of every engine's output
against PyTorch f32 on the same inputs (computed with max(--threads)): max abs error
and relative L2 (||y - y_torch|| / ||y_torch||) of the encoder output or logits (CT2
encdec: the log-probs of the target tokens, against PyTorch's log_softmax there); for
greedy, whether the 64 ids equal PyTorch's (else the first position that differs).

--precision int8 bf16: the same cases with tfc compile --precision int8 | bf16, CT2
compute_type int8 | bfloat16 (CTranslate2 refuses bfloat16 on CPUs it deems without
bf16: printed as "refused: <message>"), ONNX Runtime int8 through
onnxruntime.quantization quant_pre_process + quantize_dynamic (int8 weights, one scale
per channel, activations quantized at run time; ORT's CPU EP has no bf16 MatMul: n/a).
PyTorch stays the f32 reference (it is not timed then). --precision f32 int8 bf16 runs all three.

--quick: a smoke test (d_model 64, 4 heads, d_ff 128, 2+2 layers, vocab 1000, 1 round,
2 runs, 1 thread; --threads 1 2 to try both): every engine and every check, in seconds.
--markdown: also print the tables as Markdown (for docs/performance.md).
BENCH_SAMPLES=1 (environment): also print every round's figure per engine.
"""
import os
import sys
import time

# --omp-wait default (the default): every engine as a user runs it, OpenMP and ORT
# thread pools spinning briefly between parallel regions as they do out of the box;
# after each engine's turn the run pauses SETTLE_S so that no engine's idle spinning
# (Intel OpenMP's KMP_BLOCKTIME is 200 ms) overlaps the next engine's timing.
# --omp-wait passive: OMP_WAIT_POLICY=PASSIVE for all and ORT spinning off: workers
# sleep at once, which costs every OpenMP engine a wake-up per parallel region
# (measured: tfc greedy at 2 threads 215 -> 293 ms). Set before any OpenMP runtime
# loads (torch, CTranslate2), hence read from argv here.
OMP_WAIT = "passive" if "--omp-wait=passive" in sys.argv or any(
    a == "--omp-wait" and b == "passive" for a, b in zip(sys.argv, sys.argv[1:])) else "default"
if OMP_WAIT == "passive":
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
SETTLE_S = 0.3

import argparse  # noqa: E402
import contextlib  # noqa: E402
import glob  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import torch_models as tm  # noqa: E402
from bench_floydhub import P as BASE_DIMS, median_ms  # noqa: E402
from bench_generate import BOS, PAD, _split, cached_greedy, parse_tfrun  # noqa: E402
from jobs_common import table  # noqa: E402,F401 (one table printer for every bench)

BIN = os.path.join(ROOT, "build", "bin")
ENGINES = ["tfc", "ort", "ct2", "torch"]
CASES = ["enc:1x128", "enc:1x512", "enc:8x128", "encdec:1x128", "greedy"]
QUICK_DIMS = dict(d_model=64, heads=4, d_ff=128, layers=2, src_vocab=1000, tgt_vocab=1000)
PE_LEN = 512                      # positions in the PE table (the largest case is 1x512)


class NotAvailable(Exception):
    """An engine that cannot run a case at a precision; the message says why."""


# -------------------------------------------------------------------------------------
# Cases and their inputs (the same ids for every engine).
# -------------------------------------------------------------------------------------
class Case:
    def __init__(self, name, a, dims):
        self.name = name
        if name == "greedy":
            self.kind, self.b, self.s = "greedy", 1, a.src_len
        else:
            self.kind, shape = name.split(":")
            self.b, self.s = map(int, shape.split("x"))
            if self.kind not in ("enc", "encdec"):
                raise SystemExit(f"unknown case {name!r} (enc:BxS, encdec:BxS or greedy)")
        self.n_new = a.new_tokens
        rng = np.random.default_rng(0)
        v = dims["src_vocab"]
        # ids >= 3 keep clear of pad 0, bos 1, eos 2
        self.src = rng.integers(3, v, size=(self.b, self.s)).astype(np.int64)
        if self.kind == "encdec":
            # decoder input: bos + the first S-1 target ids; the labels are those ids + eos
            y = rng.integers(3, dims["tgt_vocab"], size=(self.b, self.s - 1)).astype(np.int64)
            self.tgt = np.concatenate([np.full((self.b, 1), BOS, np.int64), y], axis=1)
            self.labels = np.concatenate([y, np.full((self.b, 1), 2, np.int64)], axis=1)
        self.eos = None               # greedy: set from the reference output


# -------------------------------------------------------------------------------------
# Engines. Each: setup(case, precision) (raises NotAvailable), output() for the check,
# time_round(threads, runs) -> ms (the median of `runs` calls in this round), close().
# -------------------------------------------------------------------------------------
class TorchEngine:
    name = "torch"

    def __init__(self, ctx):
        self.ctx = ctx

    def setup(self, case, precision):
        if precision != "f32":
            raise NotAvailable("reference only (f32)")
        m = self.ctx.model
        self.case = case
        st = torch.from_numpy(case.src)
        if case.kind == "enc":
            mask = (st != PAD).unsqueeze(-2)
            self.fn = lambda: m.encoder(st, mask)  # noqa: E731
        elif case.kind == "encdec":
            tt = torch.from_numpy(case.tgt)
            self.fn = lambda: m(st, tt)  # noqa: E731
        else:
            self.fn = lambda: cached_greedy(m, st, case.n_new, -1)  # noqa: E731

    def output(self):                 # the reference itself: not checked
        return self.ctx.reference(self.case)

    def time_round(self, th, runs):
        torch.set_num_threads(th)
        with torch.inference_mode():
            return median_ms(self.fn, runs)

    def close(self):
        pass


class TfcEngine:
    name = "tfc"

    def __init__(self, ctx):
        self.ctx = ctx
        for b in ("tfc", "tfrun"):
            if not os.path.exists(os.path.join(BIN, b)):
                raise NotAvailable(f"build/bin/{b} missing (build the tree: scripts/build.sh)")

    def setup(self, case, precision):
        ctx, d = self.ctx, self.ctx.dims
        self.case = case
        tag = f"{case.name.replace(':', '-')}-{precision}"
        self.bin = os.path.join(ctx.tmp, f"tfc-{tag}.bin")
        if case.kind == "enc":
            yaml = os.path.join(ROOT, "bench", "tutorial-floydhub-encoder.yaml")
            sets = {k: v for k, v in d.items() if k != "tgt_vocab"}
            sets.update(max_len=case.s, max_batch=case.b)
        else:
            yaml = os.path.join(ROOT, "models", "tutorial-floydhub.yaml")
            sets = dict(d, max_batch=case.b)
            if case.kind == "encdec":
                sets["max_len"] = case.s
            else:
                sets.update(max_len=max(1 + case.n_new, case.s), bos_id=BOS, eos_id=case.eos,
                            pad_id=PAD)
        cmd = [os.path.join(BIN, "tfc"), "compile", yaml, "--weights", ctx.weights, "-o", self.bin,
               "--precision", precision] + sum([["--set", f"{k}={v}"] for k, v in sets.items()], [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise NotAvailable("tfc compile failed: " + _first_line(r.stderr or r.stdout))
        np.save(os.path.join(ctx.tmp, "src.npy"), case.src)
        self.args = ["--input", f"src={ctx.tmp}/src.npy"]
        if case.kind == "encdec":
            np.save(os.path.join(ctx.tmp, "tgt.npy"), case.tgt)
            self.args += ["--input", f"tgt={ctx.tmp}/tgt.npy"]
        if case.kind == "greedy":
            self.args += ["--generate", "--max-len", str(case.n_new)]
        # src.npy / tgt.npy are rewritten per case: the cases run one after the other

    def _tfrun(self, extra):
        r = subprocess.run([os.path.join(BIN, "tfrun"), self.bin] + self.args + extra,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"tfrun failed (rc {r.returncode}): "
                               + _first_line(r.stderr or r.stdout))
        return r.stdout + "\n" + r.stderr

    def output(self):
        out = tempfile.mkdtemp(dir=self.ctx.tmp)
        self._tfrun(["--threads", str(max(self.ctx.threads)), "--output-dir", out])
        if self.case.kind == "greedy":
            return np.load(os.path.join(out, "ids.npy"))[0].tolist()
        files = glob.glob(os.path.join(out, "*.npy"))
        if len(files) != 1:
            raise RuntimeError(f"expected one output from tfrun, got {files}")
        return np.load(files[0])

    def time_round(self, th, runs):
        text = self._tfrun(["--threads", str(th), "--bench", str(runs)])
        return parse_tfrun(text, self.case.n_new)[0]

    def close(self):
        pass


class OrtEngine:
    name = "ort"

    def __init__(self, ctx):
        import onnxruntime
        self.ort = onnxruntime
        self.ctx = ctx

    def _session(self, path, th):
        so = self.ort.SessionOptions()
        so.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = th
        so.inter_op_num_threads = 1
        so.execution_mode = self.ort.ExecutionMode.ORT_SEQUENTIAL
        if OMP_WAIT == "passive":
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return self.ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    @staticmethod
    def _quantize(path):
        """ORT's recommended int8 flow: quant_pre_process (shape inference and graph
        optimization), then quantize_dynamic with int8 weights, one scale per channel."""
        from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic
        out = path.replace(".onnx", "-int8.onnx")
        if not os.path.exists(out):
            pre = path.replace(".onnx", "-pre.onnx")
            logging.disable(logging.WARNING)   # its "consider pre-processing" hint
            try:
                quant_pre_process(path, pre)
                quantize_dynamic(pre, out, weight_type=QuantType.QInt8, per_channel=True)
            finally:
                logging.disable(logging.NOTSET)
        return out

    def setup(self, case, precision):
        if precision == "bf16":
            raise NotAvailable("n/a: ONNX Runtime's CPU EP has no bf16 MatMul "
                               "(its bf16 fast-math GEMM option is for arm64 only)")
        self.case = case
        paths = self.ctx.onnx_graphs(case)
        if precision == "int8":
            paths = {k: self._quantize(p) for k, p in paths.items()}
        self.sess = {th: {k: self._session(p, th) for k, p in paths.items()}
                     for th in self.ctx.threads}
        feeds = {"src": case.src}
        if case.kind == "encdec":
            feeds["tgt"] = case.tgt
        self.feeds = feeds

    def _run(self, th):
        s = self.sess[th]
        if self.case.kind != "greedy":
            return s["main"].run(None, self.feeds)[0]
        d = self.ctx.dims
        ck, cv = s["encode"].run(None, self.feeds)
        shape = (d["layers"], 1, d["heads"], 0, d["d_model"] // d["heads"])
        pk = pv = np.zeros(shape, np.float32)
        tok = np.array([[BOS]], np.int64)
        ids = []
        for pos in range(self.case.n_new):
            tok, pk, pv = s["step"].run(None, {"tok": tok, "pos": np.array([pos], np.int64),
                                                "past_k": pk, "past_v": pv,
                                                "cross_k": ck, "cross_v": cv})
            ids.append(int(tok[0, 0]))
        return ids

    def output(self):
        return self._run(max(self.ctx.threads))

    def time_round(self, th, runs):
        return median_ms(lambda: self._run(th), runs)

    def close(self):
        self.sess = None


class Ct2Engine:
    name = "ct2"
    COMPUTE = {"f32": "float32", "int8": "int8", "bf16": "bfloat16"}

    def __init__(self, ctx):
        import ctranslate2
        self.ct2 = ctranslate2
        self.ctx = ctx

    def setup(self, case, precision):
        self.case = case
        path = self.ctx.ct2_model("enc" if case.kind == "enc" else "encdec")
        cls = self.ct2.Encoder if case.kind == "enc" else self.ct2.Translator
        try:
            self.model = {th: cls(path, device="cpu", compute_type=self.COMPUTE[precision],
                                  inter_threads=1, intra_threads=th) for th in self.ctx.threads}
        except ValueError as e:
            raise NotAvailable(f"refused: {e}")
        tok = lambda a: [[f"t{i}" for i in row] for row in a.tolist()]  # noqa: E731
        self.src_ids = case.src.tolist()
        self.src_tok = tok(case.src)
        if case.kind == "encdec":
            self.tgt_tok = tok(case.tgt[:, 1:])   # CT2 adds the bos (decoder_start) itself

    def _run(self, th):
        m, c = self.model[th], self.case
        if c.kind == "enc":
            return np.array(m.forward_batch(self.src_ids).last_hidden_state)
        if c.kind == "encdec":
            return np.array([r.log_probs for r in m.score_batch(self.src_tok, self.tgt_tok)],
                            np.float32)
        r = m.translate_batch(self.src_tok, beam_size=1, max_decoding_length=c.n_new,
                              end_token=f"t{c.eos}")
        return [int(t[1:]) for t in r[0].hypotheses[0]]

    def output(self):
        return self._run(max(self.ctx.threads))

    def time_round(self, th, runs):
        return median_ms(lambda: self._run(th), runs)

    def close(self):
        self.model = None


ENGINE_CLASSES = {"tfc": TfcEngine, "ort": OrtEngine, "ct2": Ct2Engine, "torch": TorchEngine}


# -------------------------------------------------------------------------------------
# The shared model and its conversions (ONNX graphs, the CTranslate2 model).
# -------------------------------------------------------------------------------------
class _Enc(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, src):
        return self.m.encoder(src, (src != PAD).unsqueeze(-2))


class _EncDec(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, src, tgt):
        return self.m(src, tgt)


class _Encode(torch.nn.Module):
    """Greedy, once per source: the encoder, then every decoder layer's cross-attention
    K and V ([layers, 1, heads, S, d_k] each), as cached_greedy computes them."""
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, src):
        m = self.m
        h = m.decoder.layers[0].attn_2.h
        dk = m.out.in_features // h
        e = m.encoder(src, (src != PAD).unsqueeze(-2))
        ks = [_split(layer.attn_2.k_linear(e), h, dk) for layer in m.decoder.layers]
        vs = [_split(layer.attn_2.v_linear(e), h, dk) for layer in m.decoder.layers]
        return torch.stack(ks), torch.stack(vs)


class _Step(torch.nn.Module):
    """Greedy, one token: bench_generate.cached_greedy's step over past self-attention
    K/V of any length; returns the arg-max id and the K/V with this position appended.
    No source mask: the benchmark's source has no padding (ids >= 3), so the tutorial's
    masked_fill is a no-op there."""
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, tok, pos, past_k, past_v, cross_k, cross_v):
        m, dec = self.m, self.m.decoder
        d = m.out.in_features
        h = dec.layers[0].attn_1.h
        dk = d // h

        def attend(q, k, v):
            s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dk)
            return torch.matmul(torch.softmax(s, dim=-1), v)

        x = dec.embed(tok) * math.sqrt(dec.pe.d_model) + dec.pe.pe.index_select(1, pos)
        ks, vs = [], []
        for li, layer in enumerate(dec.layers):
            a = layer.attn_1
            x2 = layer.norm_1(x)
            k = torch.cat([past_k[li], _split(a.k_linear(x2), h, dk)], dim=2)
            v = torch.cat([past_v[li], _split(a.v_linear(x2), h, dk)], dim=2)
            ks.append(k)
            vs.append(v)
            o = attend(_split(a.q_linear(x2), h, dk), k, v)
            x = x + a.out(o.transpose(1, 2).reshape(1, 1, d))
            a = layer.attn_2
            o = attend(_split(a.q_linear(layer.norm_2(x)), h, dk), cross_k[li], cross_v[li])
            x = x + a.out(o.transpose(1, 2).reshape(1, 1, d))
            x = x + layer.ff(layer.norm_3(x))
        logits = m.out(dec.norm(x))[:, -1]
        return torch.argmax(logits, dim=-1, keepdim=True), torch.stack(ks), torch.stack(vs)


class Context:
    def __init__(self, a, dims):
        self.dims, self.threads = dims, a.threads
        self.tmp = tempfile.mkdtemp(prefix="tfc-bench-peers-")
        torch.manual_seed(0)
        params = tm.resolve_params("tutorial-floydhub",
                                   [f"{k}={v}" for k, v in dims.items()] + [f"max_len={PE_LEN}"])
        self.model = tm.build("tutorial-floydhub", params)
        tm.init_weights(self.model, 0)
        self.model.eval()
        self.sd = {k: v.detach().numpy() for k, v in tm.exported_state_dict(self.model).items()}
        self.weights = os.path.join(self.tmp, "w.safetensors")
        tm.save_safetensors(self.weights, self.sd)
        self._ct2 = {}

    def reference(self, case):
        """PyTorch f32: the encoder output, the logits, or the greedy ids."""
        m, st = self.model, torch.from_numpy(case.src)
        with torch.inference_mode():
            if case.kind == "enc":
                return m.encoder(st, (st != PAD).unsqueeze(-2)).numpy()
            if case.kind == "encdec":
                return m(st, torch.from_numpy(case.tgt)).numpy()
            return cached_greedy(m, st, case.n_new, -1)

    # ONNX ------------------------------------------------------------------------------
    def onnx_graphs(self, case):
        """{"main": path} (enc, encdec) or {"encode", "step"} (greedy), exported once."""
        tag = case.name.replace(":", "-")
        m, d = self.model, self.dims
        st = torch.from_numpy(case.src)
        if case.kind == "enc":
            specs = {"main": (_Enc(m), (st,), ["src"], ["memory"], None)}
        elif case.kind == "encdec":
            specs = {"main": (_EncDec(m), (st, torch.from_numpy(case.tgt)), ["src", "tgt"],
                              ["logits"], None)}
        else:
            L, h = d["layers"], d["heads"]
            dk = d["d_model"] // h
            kv = torch.zeros(L, 1, h, 1, dk)
            cross = torch.zeros(L, 1, h, case.s, dk)
            specs = {
                "encode": (_Encode(m), (st,), ["src"], ["cross_k", "cross_v"], None),
                "step": (_Step(m), (torch.tensor([[BOS]]), torch.tensor([0]), kv, kv, cross, cross),
                         ["tok", "pos", "past_k", "past_v", "cross_k", "cross_v"],
                         ["next", "present_k", "present_v"],
                         {"past_k": {3: "t"}, "past_v": {3: "t"},
                          "present_k": {3: "t1"}, "present_v": {3: "t1"}}),
            }
        paths = {}
        for k, (mod, args, ins, outs, dyn) in specs.items():
            paths[k] = os.path.join(self.tmp, f"ort-{tag}-{k}.onnx")
            if os.path.exists(paths[k]):
                continue
            with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(mod.eval(), args, paths[k], input_names=ins, output_names=outs,
                                  dynamic_axes=dyn, opset_version=17, dynamo=False)
        return paths

    # CTranslate2 -----------------------------------------------------------------------
    def ct2_model(self, kind):
        """Directory of the CTranslate2 model: "enc" (TransformerEncoderModelSpec) or
        "encdec" (TransformerSpec), filled from the state_dict, saved once."""
        if kind in self._ct2:
            return self._ct2[kind]
        from ctranslate2.specs import transformer_spec as ts
        sd, d = self.sd, self.dims
        n = d["d_model"]
        gain = math.sqrt((n - 1) / n)        # biased variance -> the Norm's unbiased std

        def norm(spec, name):
            spec.gamma = sd[name + ".alpha"] * np.float32(gain)
            spec.beta = sd[name + ".bias"]

        def linear(spec, *names):             # several names: fused along the outputs
            spec.weight = np.concatenate([sd[x + ".weight"] for x in names])
            spec.bias = np.concatenate([sd[x + ".bias"] for x in names])

        def attention(spec, p, self_attn):
            if self_attn:
                linear(spec.linear[0], p + ".q_linear", p + ".k_linear", p + ".v_linear")
            else:
                linear(spec.linear[0], p + ".q_linear")
                linear(spec.linear[1], p + ".k_linear", p + ".v_linear")
            linear(spec.linear[-1], p + ".out")

        def ffn(spec, p, norm_name):
            norm(spec.layer_norm, norm_name)
            linear(spec.linear_0, p + ".ff.linear_1")
            linear(spec.linear_1, p + ".ff.linear_2")

        def stack(spec, p):                   # embeddings, PE table, final norm
            emb = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
            emb.weight = sd[p + ".embed.embed.weight"]
            spec.scale_embeddings = True       # x * sqrt(d_model)
            spec.position_encodings.encodings = sd[p + ".pe.pe"][0]
            norm(spec.layer_norm, p + ".norm")

        enc = ts.TransformerEncoderSpec(d["layers"], d["heads"], pre_norm=True)
        stack(enc, "encoder")
        for i, layer in enumerate(enc.layer):
            p = f"encoder.layers.{i}"
            attention(layer.self_attention, p + ".attn", True)
            norm(layer.self_attention.layer_norm, p + ".norm_1")
            ffn(layer.ffn, p, p + ".norm_2")
        vocab = [f"t{i}" for i in range(d["src_vocab"])]
        if kind == "enc":
            spec = ts.TransformerEncoderModelSpec(enc)
            spec.register_vocabulary(vocab)
        else:
            dec = ts.TransformerDecoderSpec(d["layers"], d["heads"], pre_norm=True)
            stack(dec, "decoder")
            for i, layer in enumerate(dec.layer):
                p = f"decoder.layers.{i}"
                attention(layer.self_attention, p + ".attn_1", True)
                norm(layer.self_attention.layer_norm, p + ".norm_1")
                attention(layer.attention, p + ".attn_2", False)
                norm(layer.attention.layer_norm, p + ".norm_2")
                ffn(layer.ffn, p, p + ".norm_3")
            linear(dec.projection, "out")
            spec = ts.TransformerSpec(enc, dec)
            spec.register_source_vocabulary(vocab)
            spec.register_target_vocabulary([f"t{i}" for i in range(d["tgt_vocab"])])
            spec.config.decoder_start_token = f"t{BOS}"
        spec.config.bos_token, spec.config.eos_token, spec.config.unk_token = \
            f"t{BOS}", "t2", f"t{PAD}"
        spec.config.layer_norm_epsilon = 1e-12 * (n - 1) / n
        spec.validate()
        spec.optimize(quantization=None)
        path = os.path.join(self.tmp, f"ct2-{kind}")
        os.makedirs(path, exist_ok=True)
        spec.save(path)
        self._ct2[kind] = path
        return path


# -------------------------------------------------------------------------------------
# Reporting.
# -------------------------------------------------------------------------------------
def _first_line(text):
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def compare(case, engine, out, ref):
    """(max abs, rel L2, note) or, for greedy, a text on the ids."""
    if case.kind == "greedy":
        if out == ref:
            return f"ids equal ({len(out)}/{len(ref)})"
        k = next((i for i, (x, y) in enumerate(zip(out, ref)) if x != y), min(len(out), len(ref)))
        return f"ids differ from position {k} ({len(out)} ids, {len(ref)} in PyTorch)"
    note = ""
    if engine == "ct2" and case.kind == "encdec":
        # score_batch gives the log-probs of the labels: compare with PyTorch's there
        lp = torch.log_softmax(torch.from_numpy(ref).double(), dim=-1).numpy()
        ref = np.take_along_axis(lp, case.labels[..., None], axis=-1)[..., 0]
        note = " (log-probs of the target ids)"
    out = np.asarray(out, np.float64).reshape(np.shape(ref))
    ref = np.asarray(ref, np.float64)
    err = np.abs(out - ref).max()
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    return f"max abs {err:.2e}, rel L2 {rel:.2e}{note}"


def _ms(x):
    return f"{x:.2f}" if isinstance(x, float) else x


def _ratio(x, y):
    return f"{x / y:.2f}" if isinstance(x, float) and isinstance(y, float) else "-"


def timing_rows(results, engines, cases, threads):
    rows = []
    for c in cases:
        for th in threads:
            ms = {e: results.get((c, th, e), "-") for e in engines}
            peers = [ms[e] for e in ("ort", "ct2") if isinstance(ms.get(e), float)]
            best = min(peers) if peers else None
            row = [c, th] + [_ms(ms[e]) for e in engines]
            if "tfc" in engines:
                row.append(_ratio(ms["tfc"], best) if best else "-")
                row += [_ratio(ms["tfc"], ms[e]) for e in engines if e != "tfc"]
            rows.append(row)
    heads = ["case", "threads"] + [f"{e} ms" for e in engines]
    if "tfc" in engines:
        heads += ["tfc/min(ort,ct2)"] + [f"tfc/{e}" for e in engines if e != "tfc"]
    return heads, rows


# -------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", help="default 1 2 (--quick: 1)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 11; --quick: 1)")
    ap.add_argument("--runs", type=int,
                    help="timed calls per engine per round (default 3; --quick: 2)")
    ap.add_argument("--cases", nargs="+", default=CASES)
    ap.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES)
    ap.add_argument("--precision", nargs="+", default=["f32"], choices=["f32", "int8", "bf16"])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--src-len", type=int, default=32)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="model dims: d_model, heads, d_ff, layers, src_vocab, tgt_vocab")
    ap.add_argument("--quick", action="store_true", help="smoke test: tiny model, 1 round")
    ap.add_argument("--markdown", action="store_true", help="also print Markdown tables")
    ap.add_argument("--omp-wait", choices=["default", "passive"], default="default",
                    help="thread pools as out of the box (default), or all passive")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    dims = dict(QUICK_DIMS if a.quick else BASE_DIMS)
    a.threads = a.threads or ([1] if a.quick else [1, 2])
    a.rounds = a.rounds or (1 if a.quick else 11)
    a.runs = a.runs or (2 if a.quick else 3)
    for s in a.set:
        k, v = s.split("=", 1)
        if k not in dims:
            raise SystemExit(f"--set: unknown dim {k!r} (known: {', '.join(dims)})")
        dims[k] = int(v)
    torch.set_num_interop_threads(1)

    ctx = Context(a, dims)
    versions = {"torch": torch.__version__}
    engines = []
    for e in a.engines:
        try:
            engines.append(ENGINE_CLASSES[e](ctx))
            if e == "ort":
                versions["onnxruntime"] = engines[-1].ort.__version__
            if e == "ct2":
                versions["ctranslate2"] = engines[-1].ct2.__version__
        except (ImportError, NotAvailable) as err:
            print(f"{e}: not available ({err})")
    names = [e.name for e in engines]
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), platform.processor())
    print(f"tutorial-floydhub {dims}; {cpu}, {os.cpu_count()} cores; "
          + ", ".join(f"{k} {v}" for k, v in versions.items())
          + f"; --omp-wait {OMP_WAIT}; {a.rounds} rounds x "
          f"{a.runs} runs; threads {a.threads}", flush=True)

    cases = [Case(c, a, dims) for c in a.cases]
    report = []
    for prec in a.precision:
        results, checks = {}, []
        # PyTorch is the f32 reference: timed at f32 only
        run_engines = [e for e in engines if prec == "f32" or e.name != "torch"]
        run_names = [e.name for e in run_engines]
        for case in cases:
            ref = ctx.reference(case)
            if case.kind == "greedy":      # an eos that PyTorch's greedy ids never contain
                case.eos = next(v for v in range(3, dims["tgt_vocab"]) if v not in ref)
            live = []
            for e in run_engines:
                try:
                    e.setup(case, prec)
                    if e.name != "torch":
                        checks.append((case.name, e.name, compare(case, e.name, e.output(), ref)))
                    live.append(e)
                except NotAvailable as err:
                    checks.append((case.name, e.name, str(err)))
                    for th in a.threads:
                        results[(case.name, th, e.name)] = "n/a"
                except Exception as err:  # noqa: BLE001 - report and go on with the others
                    checks.append((case.name, e.name, f"error: {_first_line(str(err))}"))
            times = {}
            for r in range(a.rounds):
                for th in a.threads:
                    k = r % max(1, len(live))     # rotate the order: no engine always first
                    for e in live[k:] + live[:k]:
                        try:
                            times.setdefault((th, e.name), []).append(e.time_round(th, a.runs))
                            if OMP_WAIT == "default":
                                time.sleep(SETTLE_S)
                        except Exception as err:  # noqa: BLE001
                            checks.append((case.name, e.name,
                                           f"timing error: {_first_line(str(err))}"))
                            live.remove(e)
            for (th, en), ts in times.items():
                results[(case.name, th, en)] = float(np.median(ts))
                if os.environ.get("BENCH_SAMPLES"):
                    print(f"    samples {case.name} {th} {en}: " + " ".join(f"{t:.1f}" for t in ts))
            for e in run_engines:
                e.close()
            row = "; ".join(f"{th} thr: " + ", ".join(
                f"{en} {_ms(results.get((case.name, th, en), '-'))}" for en in run_names)
                for th in a.threads)
            print(f"  [{prec}] {case.name} done ({row})", flush=True)
        heads, rows = timing_rows(results, run_names, [c.name for c in cases], a.threads)
        title = (f"{prec}: median ms over {a.rounds} rounds (greedy: one whole "
                 f"{a.new_tokens}-token generation)")
        acc_title = f"{prec}: outputs against PyTorch f32"
        report.append((title, heads, rows))
        report.append((acc_title, ["case", "engine", "check"], checks))
        print(f"\n{title}\n{table(heads, rows, False)}\n\n{acc_title}\n"
              f"{table(['case', 'engine', 'check'], checks, False, (0, 1, 2))}\n", flush=True)
    if a.markdown:
        for title, heads, rows in report:
            print(f"**{title}**\n\n{table(heads, rows, True)}\n")
    if a.keep:
        print(f"kept {ctx.tmp}")
    else:
        with contextlib.suppress(OSError):
            shutil.rmtree(ctx.tmp)


if __name__ == "__main__":
    main()
