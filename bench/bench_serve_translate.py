#!/usr/bin/env python3
"""Serving translation under load: `tfc serve` on a Marian at OPUS-MT's shape against a
FastAPI wrapper around CTranslate2's asynchronous translate_batch, under the same trace.

  PYTHONPATH=build/python-text-site build/bench-venv/bin/with-libs \\
      build/bench-venv/bin/python bench/bench_serve_translate.py --shape opus-mt \\
      --clients 1 4 16 64 --seconds 60 --markdown     (--shape tiny: a smoke test)
Needs the bench venv (bench/peers/setup_venv.sh: transformers, torch, ctranslate2) with
fastapi and uvicorn (llama-cpp-python[server] brings them), and the tfc package
importable as for bench/bench_serve.py (PYTHONPATH=build/python-text-site, or --tfc-site).

The model: bench_translate.py's random-weight MarianMTModel (--shape opus-mt: opus-mt-en-de's
shape, d_model 512, 6+6 layers, vocabulary 58101; --shape tiny: d_model 64, 2+2 layers,
vocabulary 1000) with its WordLevel tokenizer ("t2".."tN" words): eos and pad are never
picked, so every sentence gets exactly --max-tokens tokens from both engines (same work).
CTranslate2 gets the same directory through its TransformersConverter (quantization int8
for --precision int8). Servers, both started once on free loopback ports, T threads each:
  tfc   python -m tfc.serve DIR --precision P --threads T (cache: a temporary folder)
  ct2   this file with --ct2-server: FastAPI + uvicorn, POST /v1/completions (prompt a
        string or a list, max_tokens, beam; stream false only), backed by one
        ctranslate2.Translator(device cpu, compute_type float32 | int8, inter_threads 1,
        intra_threads T). A micro-batcher: the first waiting sentence opens a batch, which
        takes whatever else arrives within 2 ms (at most --ct2-max-batch sentences, 64),
        then one translate_batch(beam_size, max_decoding_length=max_tokens,
        asynchronous=True) whose results an executor thread waits for, without blocking
        the event loop or polling; one batch runs at a time, so requests arriving meanwhile form the next
        batch. Sources are tokenized with the directory's tokenizer.json (the tokenizer tfc
        uses), hypotheses decoded with it.
Load: a fixed trace (seed 0, bench_translate.make_inputs) of 256 source sentences of 20-40
tokens (eos included), one sentence a request, beam --beam, --max-tokens new tokens,
non-streaming (CTranslate2's beam search returns at the end anyway), replayed in order by
N concurrent clients (bench_serve.py's asyncio load generator: HTTP/1.1 over loopback, no
client library) for --seconds, at most 10000 requests; requests still running --drain s
later are cut (their latency enters the percentiles as a lower bound, ">X"). Levels are
interleaved (tfc at 1 client, ct2 at 1, tfc at 4, ...), after one untimed warm-up request
each; after each level one untimed 1-token request waits until the server is idle.
Report per engine and level: sentences/s and output tokens/s (usage.completion_tokens)
over the level's wall time; latency = request sent to full response, p50 and p95; errors
= HTTP errors, error bodies, broken connections. Then tfc / ct2 for sentences/s and p95
latency. Exits 1 only when setup fails. Run it on otherwise idle cores: on a 2-core
machine shared with other work, CTranslate2 at 2 threads took ~30x longer per tiny-shape
batch than at 1 (its OpenMP threads wait on each other), tfc did not.
"""
import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from contextlib import asynccontextmanager

import numpy as np

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import bench_serve as bs  # noqa: E402
import bench_translate as bt  # noqa: E402
import jobs_common as jc  # noqa: E402

SHAPES = {"opus-mt": bt.FULL, "tiny": bt.QUICK}
TRACE_LEN = 256
MODEL_ID = "bench"
BATCH_WAIT_S = 0.002  # the CTranslate2 wrapper's batching window


# -------------------------------------------------------------------------------------
# The CTranslate2 server (this file with --ct2-server).
# -------------------------------------------------------------------------------------
def ct2_server(a):
    from typing import List, Optional, Union

    import ctranslate2
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(a.hf_dir, "tokenizer.json"))
    tr = ctranslate2.Translator(a.ct2_dir, device="cpu", compute_type=a.compute,
                                inter_threads=1, intra_threads=a.threads)
    queue = []  # (options, source tokens, future), in arrival order
    wake = asyncio.Event()

    async def batcher():
        while True:
            await wake.wait()
            wake.clear()
            loop = asyncio.get_running_loop()
            while queue:
                if len(queue) < a.ct2_max_batch:  # one short wait for more to arrive
                    await asyncio.sleep(BATCH_WAIT_S)
                items, queue[:] = queue[:a.ct2_max_batch], queue[a.ct2_max_batch:]
                groups = {}
                for it in items:
                    groups.setdefault(it[0], []).append(it)
                for (beam, n), group in groups.items():
                    try:
                        rs = tr.translate_batch([g[1] for g in group], beam_size=beam,
                                                max_decoding_length=n, asynchronous=True)
                        # Waited for on an executor thread that blocks (no polling: on 2
                        # cores a thread that wakes every few ms preempts CTranslate2's
                        # OpenMP team, whose threads spin at each barrier).
                        results = await loop.run_in_executor(
                            None, lambda rs=rs: [r.result() for r in rs])
                        for r, g in zip(results, group):
                            if not g[2].done():
                                g[2].set_result(r.hypotheses[0])
                    except Exception as e:  # noqa: BLE001 (reported to the requests)
                        for g in group:
                            if not g[2].done():
                                g[2].set_exception(e)

    @asynccontextmanager
    async def lifespan(app):
        task = asyncio.create_task(batcher())
        yield
        task.cancel()

    app = FastAPI(lifespan=lifespan)

    class Completion(BaseModel):
        model: Optional[str] = None
        prompt: Union[str, List[str]]
        max_tokens: int = 16
        beam: int = 4
        stream: bool = False

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.post("/v1/completions")
    async def completions(req: Completion):
        if req.stream:
            return JSONResponse({"error": {"message": "stream is not supported",
                                           "param": "stream"}}, status_code=400)
        texts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
        srcs = [e.tokens for e in tok.encode_batch(texts)]
        loop = asyncio.get_running_loop()
        futs = [loop.create_future() for _ in srcs]
        queue.extend(((req.beam, req.max_tokens), s, f) for s, f in zip(srcs, futs))
        wake.set()
        hyps = await asyncio.gather(*futs)
        choices = [{"index": i, "text": tok.decode([tok.token_to_id(t) for t in h]),
                    "logprobs": None,
                    "finish_reason": "length" if len(h) >= req.max_tokens else "stop"}
                   for i, h in enumerate(hyps)]
        n_prompt, n_out = sum(map(len, srcs)), sum(map(len, hyps))
        return {"id": f"cmpl-{time.time_ns()}", "object": "text_completion",
                "created": int(time.time()), "model": req.model or MODEL_ID,
                "choices": choices, "usage": {"prompt_tokens": n_prompt,
                                              "completion_tokens": n_out,
                                              "total_tokens": n_prompt + n_out}}

    uvicorn.run(app, host="127.0.0.1", port=a.port, log_level="warning")
    return 0


# -------------------------------------------------------------------------------------
# The load: bench_serve's clients, one non-streaming completion per request.
# -------------------------------------------------------------------------------------
async def post(port, body, rec):
    """Sends one non-streaming completion and fills |rec|: usage's completion tokens,
    sentences (choices), done, err (bench_serve.request's record, for run_level)."""
    writer = None
    try:
        reader, writer, status, chunked = await bs.post_json(port, "/v1/completions", body)
        text = b"".join([p async for p in bs.body_pieces(reader, chunked)])
        if status != 200:
            rec["err"] = f"HTTP {status}: {text[:200].decode(errors='replace')}"
            return
        obj = json.loads(text)
        if "error" in obj or not obj.get("choices"):
            rec["err"] = "error body: " + json.dumps(obj.get("error", obj))[:200]
            return
        rec["usage"] = obj["usage"]["completion_tokens"]
        rec["sentences"] = len(obj["choices"])
        rec["done"] = True
    except (OSError, EOFError, ValueError, IndexError, KeyError, TypeError,
            asyncio.IncompleteReadError) as e:
        rec["err"] = f"{type(e).__name__}: {e}"[:200]
    finally:
        if writer is not None:
            writer.close()


bs.request = post  # bs.run_level's clients send what bs.request sends: this request


def summarize(recs, wall):
    """The level's figures from its request records (bs.run_level's)."""
    done = [r for r in recs if r["done"] and not r["err"]]
    cut = [r for r in recs if not r["done"] and not r["err"]]
    errors = [r["err"] for r in recs if r["err"]]
    lat = [(r["end"] - r["start"], False) for r in done] + \
          [(r["end"] - r["start"], True) for r in cut]
    sentences = sum(r.get("sentences", 0) for r in done)
    tokens = sum(r["usage"] or 0 for r in done)
    p95 = sorted(lat)[max(0, math.ceil(0.95 * len(lat)) - 1)][0] if lat else None
    return dict(sps=sentences / wall, tps=tokens / wall, wall=wall, done=len(done),
                cut=len(cut), errors=len(errors), first_error=errors[0] if errors else "",
                lat50=bs.percentile(lat, 50), lat95=bs.percentile(lat, 95), p95=p95,
                tokens_per=tokens / len(done) if done else 0)


def make_trace(tmp, dims):
    """TRACE_LEN source texts (bench_translate.make_inputs' sentences, eos included:
    the WordLevel tokenizer adds none) and their token counts."""
    (src, _), lens = bt.make_inputs(tmp, dims, TRACE_LEN, 20, 40)
    vocab = bt.vocab_tokens(dims["vocab"])
    return [" ".join(vocab[i] for i in row[:n]) for row, n in zip(np.load(src), lens)], lens


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="opus-mt", choices=sorted(SHAPES))
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--seconds", type=float, default=60, help="load time per level")
    ap.add_argument("--drain", type=float, help="seconds running requests may take after "
                    "--seconds before they are cut (default: --seconds)")
    ap.add_argument("--threads", type=int, default=2, help="threads of each server")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--precision", default="int8", choices=["f32", "int8"],
                    help="tfc --precision; CTranslate2 quantization and compute_type")
    ap.add_argument("--ct2-max-batch", type=int, default=64,
                    help="sentences per translate_batch in the CTranslate2 server")
    ap.add_argument("--tfc-site", default=os.path.join(jc.ROOT, "build", "python-text-site"),
                    help="put on PYTHONPATH when tfc is not importable otherwise")
    ap.add_argument("--start-timeout", type=float, default=1800,
                    help="seconds a server may take to start (tfc compiles first)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--ct2-server", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ct2-dir", help=argparse.SUPPRESS)
    ap.add_argument("--hf-dir", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--compute", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.ct2_server:
        return ct2_server(a)
    drain = a.seconds if a.drain is None else a.drain
    engines = ["tfc", "ct2"]
    t0 = time.time()
    log = lambda s: print(f"[{time.time() - t0:5.0f} s] {s}", flush=True)  # noqa: E731

    try:
        env = bs.tfc_env(a.tfc_site)
        r = subprocess.run([sys.executable, "-c", "import ctranslate2, fastapi, uvicorn"],
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError("the CTranslate2 server's packages are not importable ("
                               + jc.first_line(r.stderr) + "): run " + sys.executable
                               + " -m pip install ctranslate2 fastapi uvicorn")
    except RuntimeError as e:
        print(f"bench_serve_translate: {e}", file=sys.stderr)
        return 1

    tmp = jc.work_dir("tfc-bench-serve-translate-", a.keep)
    d, ct2_dir = os.path.join(tmp, "marian"), os.path.join(tmp, f"ct2-{a.precision}")
    dims = SHAPES[a.shape]
    servers = {}
    try:
        bt.build_checkpoint(d, dims)
        texts, lens = make_trace(tmp, dims)
        os.environ["HF_HUB_OFFLINE"] = "1"
        from importlib.metadata import version

        import ctranslate2
        from ctranslate2.converters import TransformersConverter
        TransformersConverter(d).convert(
            ct2_dir, quantization="int8" if a.precision == "int8" else None)
        log(f"Marian {a.shape} {dims}, random weights; trace: {TRACE_LEN} sources of "
            f"{lens.min()}-{lens.max()} tokens (mean {lens.mean():.1f}), beam {a.beam}, "
            f"{a.max_tokens} new tokens each, {a.precision}; {jc.cpu_summary()}; {a.threads} "
            f"threads per server; ctranslate2 {ctranslate2.__version__}, fastapi "
            f"{version('fastapi')}, transformers {version('transformers')}")
        port = bs.free_port()
        servers["ct2"] = bs.Server("ct2", [
            sys.executable, os.path.abspath(__file__), "--ct2-server", "--ct2-dir", ct2_dir,
            "--hf-dir", d, "--port", str(port), "--threads", str(a.threads), "--compute",
            {"f32": "float32", "int8": "int8"}[a.precision], "--ct2-max-batch",
            str(a.ct2_max_batch)], port, "/health", os.path.join(tmp, "ct2.log"))
        port = bs.free_port()
        env["TFC_CACHE_DIR"] = os.path.join(tmp, "cache")
        servers["tfc"] = bs.Server("tfc", [
            sys.executable, "-m", "tfc.serve", d, "--host", "127.0.0.1", "--port", str(port),
            "--precision", a.precision, "--threads", str(a.threads), "--served-model-name",
            MODEL_ID, "--log-level", "warning"], port, "/health",
            os.path.join(tmp, "tfc.log"), env=env)
        for name in engines:
            servers[name].wait_ready(a.start_timeout)
            log(f"{name} ready on port {servers[name].port}")
    except Exception as e:  # noqa: BLE001 (setup failure: exit 1)
        print(f"bench_serve_translate: setup failed: {type(e).__name__}: {e}", file=sys.stderr)
        for s in servers.values():
            s.close()
        return 1

    bodies = [dict(model=MODEL_ID, prompt=t, max_tokens=a.max_tokens, beam=a.beam,
                   stream=False) for t in texts]

    def single(name, max_tokens):
        """One untimed request, awaited (at most 600 s): the warm-up, and after each
        level the wait until the server is idle."""
        rec = dict(usage=None, done=False, err=None)
        try:
            asyncio.run(asyncio.wait_for(post(servers[name].port, dict(
                bodies[0], max_tokens=max_tokens), rec), 600))
        except asyncio.TimeoutError:
            rec["err"] = "no answer in 600 s"
        return rec["err"] or f"{rec['usage']} tokens"

    results = {}
    try:
        for name in engines:
            log(f"{name} warm-up: {single(name, a.max_tokens)}")
        for c in a.clients:
            for name in engines:
                recs, wall = asyncio.run(bs.run_level(servers[name].port, bodies, c,
                                                      a.seconds, drain))
                s = results[(name, c)] = summarize(recs, wall)
                log(f"{name} x{c}: {s['sps']:.2f} sentences/s, {s['tps']:.1f} tokens/s, "
                    f"{s['done']} done, {s['cut']} cut, {s['errors']} errors, latency p95 "
                    f"{s['lat95']} ms" + (f"; first error: {s['first_error']}"
                                          if s["errors"] else ""))
                single(name, 1)
                time.sleep(1)  # let the server settle before the other one's turn
    finally:
        for s in servers.values():
            s.close()

    sections = []
    for name in engines:
        rows = [[c, f"{s['sps']:.2f}", f"{s['tps']:.1f}", s["lat50"], s["lat95"], s["done"],
                 f"{s['tokens_per']:.1f}", s["cut"], s["errors"], f"{s['wall']:.0f}"]
                for c in a.clients for s in [results[(name, c)]]]
        sections.append((f"{name}: {a.seconds:g} s per level (+ up to {drain:g} s drain), "
                         f"{a.threads} threads, {a.precision}, beam {a.beam}; latency in ms",
                         ["clients", "sentences/s", "tokens/s", "latency p50", "latency p95",
                          "requests", "tokens/sentence", "cut", "errors", "wall s"], rows))
    rows = []
    for c in a.clients:
        t, k = results[("tfc", c)], results[("ct2", c)]
        rows.append([c, f"{t['sps'] / k['sps']:.2f}" if k["sps"] else "-",
                     f"{t['tps'] / k['tps']:.2f}" if k["tps"] else "-",
                     f"{t['p95'] / k['p95']:.2f}" if t["p95"] and k["p95"] else "-",
                     f"{t['errors']} / {k['errors']}", f"{t['cut']} / {k['cut']}"])
    sections.append(("tfc / CTranslate2 (throughput > 1: tfc serves more; latency < 1: "
                     "tfc answers sooner)",
                     ["clients", "sentences/s", "tokens/s", "latency p95",
                      "errors tfc / ct2", "cut tfc / ct2"], rows))
    errs = [[n, c, results[(n, c)]["first_error"]] for n in engines for c in a.clients
            if results[(n, c)]["errors"]]
    if errs:
        sections.append(("first error per level", ["engine", "clients", "error"], errs))
    jc.print_sections(sections, a.markdown, lambda h: (0,) if h[-1] != "error" else (0, 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
