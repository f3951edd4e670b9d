#!/usr/bin/env python3
"""A translation service: continuous batching against one-at-a-time, static batches
and CTranslate2, under Poisson arrivals (issue 23).

  bench/peers/run.sh service [--threads 1 2] [--beams 1 4] [--requests 256]
      [--rates 0.5 1 2] [--new-tokens 32 | --length-ratio 1] [--src-len 5 60] [--static 8 32]
      [--static-wait-ms 50] [--rows 128] [--engine-rows N] [--ct2-batch-tokens 1024] [--limit 300]
      [--rounds 1] [--engines fifo static engine ct2] [--capacity REQ_PER_S] [--no-stream]
      [--tfc-python PY] [--tfc-pythonpath DIR] [--markdown] [--quick] [--keep]

Model: bench_translate.py's (its build_checkpoint): a MarianMTModel at opus-mt-en-de's
shape with random weights, eos and pad never chosen, so that every request of every
engine generates exactly --new-tokens tokens (the same work everywhere). tfc compiles
that directory with `--set max_batch=--rows` (tfc.compile of the tfc package that the
workers import, so compiler and runtime agree); CTranslate2 converts it with its own
ct2-transformers-converter (float32).

Output lengths: --new-tokens for every request (the default, 32), or with
--length-ratio R (greedy, streaming) round(R x the source's tokens before eos), at
least 1: translations about as long as their sources, so that requests of one batch
end at different steps, as real ones do at eos. The random model never chooses eos,
so each engine stops a request at its length through its token callback, which ends
that item as eos would: tfc's session (its row leaves the batch; the batch goes on
until its longest item is done), CTranslate2's translate_batch callback (True stops
that example), and the engine's per-request max_len.

The trace (seeded, the same for every engine): --requests sources, lengths uniform in
--src-len (eos included; ids in [2, pad)), arrivals a Poisson process: unit-rate
exponential gaps, the first at 0, divided by the arrival rate. The rates are
--rates x the capacity (requests/s), measured first for each (beam, threads) as
--requests / the time the engine takes with every request submitted at once (the
"burst" row; without the engine: static batching's largest B, or the first engine
that ran; --capacity sets it instead).

Engines, each in its own worker process (bench/jobs_common.py's Worker; the tfc ones
run --tfc-python, which must import tfc, with --tfc-pythonpath on PYTHONPATH if given),
threads T in every one of them; a request is [1, n] input_ids + attention_mask:
  fifo      tfc one request at a time: a tfc.Session(threads=T) serves the queue in
            arrival order, one generate call per request
  static-B  tfc static batches: a dispatcher waits until B requests are queued or the
            oldest has waited --static-wait-ms, takes up to B, right-pads them (pad,
            attention_mask 0) into one batch and calls session.generate; every
            request of the batch ends with the batch
  engine    tfc.Engine(model, threads=T, max_queue=max(256, --requests)): each request is
            submitted at its arrival (continuous batching; its rows per step are
            --engine-rows, default the model's max_batch, --rows)
  ct2       CTranslate2 Translator(intra_threads=T, inter_threads=1): a dispatcher
            submits every queued request in one translate_batch(asynchronous=True,
            max_batch_size=--ct2-batch-tokens, batch_type="tokens", beam_size,
            min/max_decoding_length=n) whenever the previous call's results are all
            in (CTranslate2 sorts and splits that call itself; separate calls are
            separate jobs, never merged)
Greedy runs stream: time to first token (TTFT) = the request's first token minus its
arrival, seen by session.generate's native token callback on the serving thread
(generate_first below: not Session.generate_tokens, whose consumer thread costs up
to 2x at 2 threads on 2 cores), by iterating the engine's Request (its public
streaming: a queue fed by the same callback), by CTranslate2's callback. Beam search
has no first token before the end (tfc streams the winner at the end; CTranslate2
calls no callback), so with beam > 1 TTFT = latency (completion); and with
--no-stream (session.generate, Request.result(), no CTranslate2 callback) for all.
Measures per (rate, engine): tokens/s = the tokens of the finished requests / the
time from the first arrival to the last completion (to --limit when cut); latency (completion minus
arrival) p50 and p95; TTFT p50 and p95; requests finished; mean batch: requests per
generate call (static) or per translate_batch call (ct2), tokens generated per engine
step (engine, from Engine.stats()). A configuration is cut at
--limit seconds after its first arrival (no new work starts; the engine's requests
are cancelled): it reports its finished requests only, flagged "cut", and its worker
is restarted. Rounds (--rounds) repeat every rate with the engines in an order that
rotates; each figure is the median over the rounds.
Checks: every engine's tokens against fifo's, request by request (greedy: tfc's
engine equals a lone session's; static batches and CTranslate2 may differ where
random weights give near-ties).
The targets printed (issue 23): at the lowest rate where static batching's p95 is at
least twice its p95 at the lowest rate, the engine's tokens/s >= 1.5x static's at an
equal or lower p95; at every rate, the engine's tokens/s > CTranslate2's at an equal
or lower p95 (below saturation both equal the offered load, shown beside).

Needs: the bench venv (torch, transformers, ctranslate2: bench/peers/run.sh) for
this process and CTranslate2's worker; --tfc-python with the tfc package that has
tfc.Engine (tests/python/install.sh builds build/python-venv).
Time: the full run (2 beams x 2 thread counts x 3 rates x 5 engines + the capacity
runs, 256 requests of 32 tokens) is estimated at 1.5 hours on 2 cores (a trace at
0.5x lasts 2x the capacity run for every engine; beam 4 at 1 thread the longest);
`--requests 48 --threads 2` took 10 minutes. --quick: a smoke test (bench_translate's
tiny Marian, 32 requests of 8 tokens, 1 thread, both beams, --limit 60): under a
minute. The tiny model is all overhead: its ratios say nothing about the real shape.
"""
import argparse
import json
import os
import shutil
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jobs_common as jc  # noqa: E402
import bench_translate as bt  # noqa: E402  (its Marian directory and vocabulary)

ENGINES = ["fifo", "static", "engine", "ct2"]


# -------------------------------------------------------------------------------------
# Worker side: serves traces (no torch import; tfc or ctranslate2 only).
# -------------------------------------------------------------------------------------
class Trace:
    """One run of the trace in a worker: arrivals released at their times, a record
    per request, the deadline."""

    def __init__(self, arrivals, limit):
        self.arr = arrivals
        self.n = len(arrivals)
        self.first = [None] * self.n
        self.done = [None] * self.n
        self.ids = [None] * self.n
        self.cond = threading.Condition()
        self.queue = []                # arrived, not yet taken (indices, arrival order)
        self.released = 0              # requests released so far
        self.t0 = time.perf_counter() + 0.05
        self.deadline = self.t0 + limit
        self.cut = False
        self.arrivals_over = False     # every request released (or the deadline came)

    def now(self):
        return time.perf_counter() - self.t0

    def expired(self):
        return time.perf_counter() >= self.deadline

    def release(self, on_arrival=None):
        """Releases each request at its arrival time (the calling thread sleeps between
        them): into self.queue, or to on_arrival(i) when given."""
        for i, a in enumerate(self.arr):
            wait = self.t0 + a - time.perf_counter()
            if self.t0 + a >= self.deadline:
                self.cut = True
                break
            if wait > 0:
                time.sleep(wait)
            if on_arrival:
                on_arrival(i)
            with self.cond:
                if not on_arrival:
                    self.queue.append(i)
                self.released += 1
                self.cond.notify_all()
        with self.cond:
            self.arrivals_over = True
            self.cond.notify_all()

    def take(self, want, wait_s):
        """Dispatcher side: waits until |want| requests are queued, or the oldest has
        waited |wait_s| (None: forever), or no more will arrive; returns up to |want|
        indices ([] when the trace is over or cut)."""
        with self.cond:
            while True:
                if self.expired():
                    self.cut = self.cut or bool(self.queue) or self.released < self.n
                    return []
                over = self.arrivals_over
                if len(self.queue) >= want or (self.queue and over):
                    break
                timeout = self.deadline - time.perf_counter()
                if self.queue and wait_s is not None:
                    due = self.t0 + self.arr[self.queue[0]] + wait_s
                    if time.perf_counter() >= due:
                        break
                    timeout = min(timeout, due - time.perf_counter())
                if not self.queue and over:
                    return []
                self.cond.wait(max(1e-4, timeout))
            got, self.queue = self.queue[:want], self.queue[want:]
            return got

    def record(self):
        return dict(first=self.first, done=self.done, ids=self.ids, cut=self.cut)


def batch_inputs(src, lens, idx, pad):
    """Rows idx of the trace, right-padded to their longest (pad, attention_mask 0)."""
    s = int(max(lens[i] for i in idx))
    ids = np.full((len(idx), s), pad, np.int64)
    mask = np.zeros((len(idx), s), np.int64)
    for r, i in enumerate(idx):
        ids[r, :lens[i]] = src[i, :lens[i]]
        mask[r, :lens[i]] = 1
    return {"input_ids": ids, "attention_mask": mask}


def generate_first(session, inputs, beam, n, on_first, stop=lambda: False, limits=None):
    """session.generate's ids per batch item, calling on_first(b) (when given) at item
    b's first token; stop() is asked at every token (True ends the generation: the
    items are shorter than n then). limits (greedy): item b stops after limits[b]
    tokens, as a row that chose eos there would: it leaves the batch, which goes on
    until its longest item is done. Streams through the native token callback on this thread
    (what Session.generate_tokens wraps): generate_tokens' consumer thread, woken at
    every token, costs up to 2x on 2 cores at 2 threads (Marian, batch 1: 523 vs 271
    ms), which would charge a baseline for its measuring."""
    if on_first is None and limits is None:
        return [g.ids for g in session.generate(inputs, beam=beam, max_len=n)]
    try:
        from tfc._model import Session, _inputs
        opts = Session._options(beam, n, 1.0, False, 1.0, 0, 1.0, 0)
        native = session._native.generate
    except (ImportError, AttributeError, TypeError):    # the private API moved
        native = None
    seen = set()

    def cb(b, step, token, log_prob):
        if b not in seen:
            seen.add(b)
            if on_first is not None:
                on_first(b)
        return bool(stop()) or (limits is not None and step + 1 >= limits[b])
    if native is not None:
        return [list(ids) for ids, _ in native(_inputs(inputs), *opts, cb)]
    toks = {}
    for st in session.generate_tokens(inputs, beam=beam, max_len=n):
        toks.setdefault(st.batch_index, []).append(st.token_id)
        if cb(st.batch_index, st.step, st.token_id, st.log_prob):
            break
    return [toks.get(b, []) for b in range(len(inputs["input_ids"]))]


def serve_tfc(s, st, tr, beam):
    """fifo / static-B / engine over one trace (see the docstring)."""
    src, lens, news, pad = st["src"], st["lens"], st["news"], s["pad"]
    if s["mode"] == "engine":
        import tfc
        waiters = []

        def wait(i, req):
            try:
                if beam == 1 and s["stream"]:
                    ids = []
                    for step in req:
                        if not ids:
                            tr.first[i] = tr.now()
                        ids.append(step.token_id)
                else:
                    ids = req.result()[0].ids
                tr.ids[i] = ids
                tr.done[i] = tr.now()
                if tr.first[i] is None:
                    tr.first[i] = tr.done[i]
            except Exception:  # noqa: BLE001 - cancelled at the deadline
                pass

        def arrive(i):
            while True:
                try:
                    req = st["engine"].submit(batch_inputs(src, lens, [i], pad), beam=beam,
                                              max_len=news[i])
                    break
                except tfc.Busy:
                    if tr.expired():
                        return
                    time.sleep(0.002)
            t = threading.Thread(target=wait, args=(i, req), daemon=True)
            t.start()
            waiters.append((t, req))

        tr.release(arrive)
        for t, req in waiters:
            t.join(max(0.0, tr.deadline - time.perf_counter()))
            if t.is_alive():
                tr.cut = True
                req.cancel()
                t.join(10)
        return []
    session = st["session"]
    want = 1 if s["mode"] == "fifo" else s["batch"]
    wait_s = None if s["mode"] == "fifo" else s["wait_ms"] / 1e3
    arrivals = threading.Thread(target=tr.release, daemon=True)
    arrivals.start()
    sizes = []
    while True:
        idx = tr.take(want, wait_s)
        if not idx:
            break
        sizes.append(len(idx))
        inputs = batch_inputs(src, lens, idx, pad)
        stream = beam == 1 and s["stream"]

        def on_first(b, idx=idx):
            tr.first[idx[b]] = tr.now()
        n = max(news[i] for i in idx)
        varied = any(news[i] != n for i in idx)
        ids = generate_first(session, inputs, beam, n, on_first if stream else None,
                             tr.expired, [news[i] for i in idx] if varied else None)
        t = tr.now()
        for b, i in enumerate(idx):
            if len(ids[b]) == news[i]:
                tr.done[i], tr.ids[i] = t, ids[b]
                if tr.first[i] is None:
                    tr.first[i] = t
            else:                                 # stopped at the deadline
                tr.first[i], tr.cut = None, True
    arrivals.join()
    return sizes


def serve_ct2(s, st, tr, beam):
    """CTranslate2 behind a dispatcher that submits what is queued when it is idle."""
    tr_, vocab, index = st["translator"], st["vocab"], st["index"]
    src, lens, news = st["src"], st["lens"], st["news"]
    arrivals = threading.Thread(target=tr.release, daemon=True)
    arrivals.start()
    sizes = []
    while True:
        idx = tr.take(1, 0.0)              # whatever is queued, as soon as one is
        with tr.cond:                      # and everything else that has arrived
            idx += tr.queue
            tr.queue = []
        if not idx:
            break
        sizes.append(len(idx))
        batch = [[vocab[t] for t in src[i, :lens[i]]] for i in idx]

        n = max(news[i] for i in idx)
        varied = any(news[i] != n for i in idx)

        def on_step(r, idx=idx):
            i = idx[r.batch_id]
            if tr.first[i] is None:
                tr.first[i] = tr.now()
            return varied and r.step + 1 >= news[i]   # True: this example stops here
        res = tr_.translate_batch(batch, asynchronous=True, beam_size=beam,
                                  max_batch_size=s["ct2_batch_tokens"], batch_type="tokens",
                                  min_decoding_length=min(news[i] for i in idx),
                                  max_decoding_length=n,
                                  callback=on_step if beam == 1 and (s["stream"] or varied)
                                  else None)
        waiters = []

        def wait(i, r):
            hyp = r.result().hypotheses[0]
            tr.done[i] = tr.now()
            tr.ids[i] = [index[t] for t in hyp]
            if tr.first[i] is None:
                tr.first[i] = tr.done[i]
        for i, r in zip(idx, res):
            t = threading.Thread(target=wait, args=(i, r), daemon=True)
            t.start()
            waiters.append(t)
        for t in waiters:
            t.join(max(0.0, tr.deadline - time.perf_counter()))
            if t.is_alive():
                tr.cut = True
                break
        if tr.cut:
            break
    arrivals.join(max(0.0, tr.deadline - time.perf_counter()) + 1)
    return sizes


def setup_worker(s):
    st = {"src": np.load(s["src"]), "lens": np.load(s["lens"]).tolist(),
          "news": np.load(s["news"]).tolist()}
    if s["mode"] == "ct2":
        import ctranslate2
        st["translator"] = ctranslate2.Translator(s["ct2_dir"], device="cpu",
                                                  compute_type="float32", inter_threads=1,
                                                  intra_threads=s["threads"])
        st["vocab"] = bt.vocab_tokens(s["vocab"])
        st["index"] = {t: i for i, t in enumerate(st["vocab"])}
        st["serve"] = serve_ct2
        st["version"] = f"ctranslate2 {ctranslate2.__version__}"
        return st
    import tfc
    model = tfc.load(s["model"])
    if s["mode"] == "engine":
        if not hasattr(tfc, "Engine"):
            raise RuntimeError(f"this tfc package ({tfc.__file__}) has no tfc.Engine")
        st["engine"] = tfc.Engine(model, threads=s["threads"], max_queue=max(256, s["n"]),
                                  max_rows=s.get("engine_rows"))
    else:
        st["session"] = model.session(threads=s["threads"])
    st["serve"] = serve_tfc
    st["version"] = f"tfc {tfc.__version__} (API {tfc.API_VERSION}) from " \
                    f"{os.path.dirname(tfc.__file__)}"
    return st


def worker(s):
    """Protocol: 'serve ARRIVALS.npy BEAM LIMIT_S OUT.json' -> '@@done' (or '@@cut',
    then this process exits: work it could not cancel may still be running)."""
    out = sys.stdout
    sys.stdout = sys.stderr            # library chatter must not reach the protocol
    try:
        st = setup_worker(s)
        for beam in s["beams"]:        # warm-up: the first 8 requests at once, each beam
            st["serve"](s, st, Trace(np.zeros(min(8, s["n"])), 120.0), beam)
    except Exception as e:  # noqa: BLE001 - the parent reports it and goes on
        out.write(f"@@error {type(e).__name__}: {jc.first_line(str(e))}\n")
        out.flush()
        sys.exit(1)
    out.write(f"@@ready {st['version']}\n")
    out.flush()
    for ln in sys.stdin:
        cmd = ln.split()
        if not cmd or cmd[0] == "quit":
            break
        arr, beam, limit, path = np.load(cmd[1]), int(cmd[2]), float(cmd[3]), cmd[4]
        tr = Trace(arr, limit)
        before = st["engine"].stats() if s["mode"] == "engine" else None
        try:
            sizes = st["serve"](s, st, tr, beam)
        except Exception as e:  # noqa: BLE001
            out.write(f"@@error {type(e).__name__}: {jc.first_line(str(e))}\n")
            out.flush()
            os._exit(1)
        rec = tr.record()
        rec["batches"] = sizes
        if before is not None:         # tokens per engine step, as "mean batch"
            after = st["engine"].stats()
            steps = after["steps"] - before["steps"]
            rec["batches"] = [(after["tokens_generated"] - before["tokens_generated"]) /
                              steps] if steps else []
        json.dump(rec, open(path, "w"))
        out.write("@@cut\n" if tr.cut else "@@done\n")
        out.flush()
        if tr.cut:
            os._exit(0)


# -------------------------------------------------------------------------------------
# Parent side.
# -------------------------------------------------------------------------------------
class Engine:
    """A worker process for one engine at one thread count, restarted after a cut."""

    def __init__(self, name, spec, python, env):
        self.name, self.spec, self.python, self.env = name, spec, python, env
        self.w, self.version, self.error = None, None, None

    def start(self):
        if self.w is None and self.error is None:
            self.w = jc.Worker(self.name, os.path.abspath(__file__), self.spec,
                               self.spec["threads"], self.env, self.python)
            try:
                self.version = self.w.wait_ready()
            except RuntimeError as err:
                self.error = jc.first_line(str(err))
                self.close()
        return self.error is None

    def serve(self, arrivals, beam, limit, out):
        """Runs the trace; returns its record (dict) or raises RuntimeError."""
        if not self.start():
            raise RuntimeError(self.error)
        killer = threading.Timer(limit + 180, self.w.p.kill)   # a hung worker
        killer.start()
        try:
            r = self.w.ask(f"serve {arrivals} {beam} {limit} {out}")
        except RuntimeError:
            self.close()
            raise
        finally:
            killer.cancel()
        if r == "cut":
            self.close()
        return json.load(open(out))

    def close(self):
        if self.w is not None:
            self.w.close()
            self.w = None


def summarize(rec, arr, n, limit):
    """tokens/s, latency and TTFT percentiles (ms) of one record."""
    fin = [i for i, d in enumerate(rec["done"])
           if d is not None and (not rec["cut"] or d <= limit)]
    if not fin:
        return dict(tps=0.0, p50=None, p95=None, t50=None, t95=None, done=0, cut=rec["cut"],
                    odd=0)
    end = max(rec["done"][i] for i in fin)
    span = limit if rec["cut"] else max(end, 1e-9)
    lat = np.array([rec["done"][i] - arr[i] for i in fin]) * 1e3
    ttft = np.array([rec["first"][i] - arr[i] for i in fin]) * 1e3
    toks = sum(len(rec["ids"][i]) for i in fin)
    b = rec.get("batches") or []
    odd = int((ttft > lat + 1e-3).sum())     # a first token after the completion: a bug
    return dict(tps=toks / span, odd=odd, p50=float(np.percentile(lat, 50)),
                p95=float(np.percentile(lat, 95)), t50=float(np.percentile(ttft, 50)),
                t95=float(np.percentile(ttft, 95)), done=len(fin), cut=rec["cut"],
                batch=float(np.mean(b)) if b else None, tokens=toks)


def median_summary(ss):
    """The median of each figure over rounds."""
    if len(ss) == 1:
        return ss[0]
    out = dict(ss[0])
    for k in ("tps", "p50", "p95", "t50", "t95", "done", "batch"):
        xs = [x[k] for x in ss if x.get(k) is not None]
        out[k] = jc.median(xs) if xs else None
    out["cut"] = any(x["cut"] for x in ss)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, nargs="+", help="default 1 2 (--quick: 1)")
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--requests", type=int, help="default 256 (--quick: 32)")
    ap.add_argument("--rates", type=float, nargs="+", default=[0.5, 1, 2],
                    help="arrival rates, as multiples of the capacity")
    ap.add_argument("--capacity", type=float, help="requests/s (skips its measurement)")
    ap.add_argument("--new-tokens", type=int, help="tokens per request (default 32; "
                    "--quick: 8)")
    ap.add_argument("--length-ratio", type=float, default=0.0,
                    help="new tokens per request = round(RATIO x its source's tokens before "
                    "eos), at least 1, instead of --new-tokens for all (greedy only): "
                    "outputs as long as their sources, as translations are")
    ap.add_argument("--src-len", type=int, nargs=2, default=[5, 60], metavar=("MIN", "MAX"))
    ap.add_argument("--static", type=int, nargs="+", default=[8, 32], help="static batch sizes")
    ap.add_argument("--static-wait-ms", type=float, default=50.0)
    ap.add_argument("--rows", type=int, default=128, help="tfc compile --set max_batch=ROWS")
    ap.add_argument("--engine-rows", type=int,
                    help="the engine's rows per step (tfc.Engine max_rows; default --rows)")
    ap.add_argument("--ct2-batch-tokens", type=int, default=1024)
    ap.add_argument("--limit", type=float, help="seconds per configuration (default 300; "
                    "--quick: 60)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-stream", action="store_true",
                    help="no token streaming anywhere (greedy TTFT = latency then)")
    ap.add_argument("--tfc-python", default=os.path.join(jc.ROOT, "build", "python-venv",
                                                         "bin", "python"),
                    help="a Python that imports tfc (default build/python-venv's)")
    ap.add_argument("--tfc-pythonpath", help="prepended to PYTHONPATH for the tfc workers")
    ap.add_argument("--quick", action="store_true", help="smoke test: tiny model")
    ap.add_argument("--markdown", action="store_true", help="also print Markdown tables")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    if a.worker:
        return worker(json.loads(a.worker))
    dims = dict(bt.QUICK if a.quick else bt.FULL)
    a.threads = a.threads or ([1] if a.quick else [1, 2])
    a.requests = a.requests or (32 if a.quick else 256)
    n = a.new_tokens = a.new_tokens or (8 if a.quick else 32)
    if a.length_ratio < 0 or (a.length_ratio and (a.beams != [1] or a.no_stream)):
        raise SystemExit("--length-ratio takes a ratio > 0, with --beams 1 and streaming "
                         "(each engine stops a request at its length through its token "
                         "callback)")
    a.limit = a.limit or (60.0 if a.quick else 300.0)
    if max(a.static) * max(a.beams) > a.rows:
        raise SystemExit(f"static batches of {max(a.static)} x beam {max(a.beams)} need "
                         f"--rows >= {max(a.static) * max(a.beams)}")
    tmp = jc.work_dir("tfc-bench-service-", a.keep)
    t0 = time.time()
    log = lambda s: print(f"[{time.time() - t0:5.0f} s] {s}", flush=True)  # noqa: E731
    tfc_env = {"PYTHONPATH": a.tfc_pythonpath + (
        os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")} \
        if a.tfc_pythonpath else {}

    # The model, the trace -----------------------------------------------------------
    d = os.path.join(tmp, "marian")
    bt.build_checkpoint(d, dims)
    pad = dims["vocab"] - 1
    g = np.random.default_rng(a.seed)
    lens = g.integers(a.src_len[0], a.src_len[1] + 1, size=a.requests)
    src = np.full((a.requests, int(lens.max())), pad, np.int64)
    for i, ln in enumerate(lens):
        src[i, :ln - 1] = g.integers(2, pad, size=ln - 1)
        src[i, ln - 1] = bt.EOS
    unit = np.cumsum(g.exponential(1.0, size=a.requests))
    unit -= unit[0]                                   # the first arrival at 0
    news = np.full(a.requests, n, np.int64)
    if a.length_ratio:
        news = np.maximum(1, np.rint(a.length_ratio * (lens - 1))).astype(np.int64)
        n = a.new_tokens = float(news.mean())   # for the tokens/s of a capacity
    paths = {k: os.path.join(tmp, f"{k}.npy") for k in ("src", "lens", "news")}
    np.save(paths["src"], src)
    np.save(paths["lens"], lens)
    np.save(paths["news"], news)
    errors = []
    binp = os.path.join(tmp, "marian.bin")
    tfc_modes = [e for e in ("fifo", "static", "engine") if e in a.engines]
    if tfc_modes:
        r = jc.run_measured([a.tfc_python, "-c", "import sys, tfc; tfc.compile(sys.argv[1], "
                             "set={'max_batch': int(sys.argv[3])}).save(sys.argv[2])",
                             d, binp, str(a.rows)], env=dict(os.environ, **tfc_env))
        if r[0] != 0:
            errors.append(("tfc", "-", "compile failed: " + jc.first_line(r[1])))
            tfc_modes = []
        else:
            log(f"tfc compiled the directory (max_batch={a.rows}) with {a.tfc_python}")
    ct2_dir = os.path.join(tmp, "ct2")
    if "ct2" in a.engines:
        conv = shutil.which("ct2-transformers-converter") or os.path.join(
            os.path.dirname(sys.executable), "ct2-transformers-converter")
        rc, out, _ = jc.run_measured([conv, "--model", d, "--output_dir", ct2_dir],
                                     env=dict(os.environ, HF_HUB_OFFLINE="1"))
        if rc != 0:
            errors.append(("ct2", "-", "converter failed: " + jc.first_line(out)))
        else:
            log("ct2-transformers-converter done")
    log(f"Marian {dims}, random weights; {a.requests} requests, sources of {lens.min()}-"
        f"{lens.max()} tokens (mean {lens.mean():.1f}), " + (
            f"{news.min()}-{news.max()} new tokens ({a.length_ratio:g} x the source's, mean "
            f"{n:.1f})" if a.length_ratio else f"{n} new tokens each") + ", Poisson "
        f"arrivals at {a.rates} x capacity; beams {a.beams}; static batches {a.static} "
        f"(wait {a.static_wait_ms:g} ms); {jc.cpu_summary()}; limit {a.limit:g} s per "
        f"configuration; {a.rounds} round(s); threads {a.threads}")

    # Engines per thread count ---------------------------------------------------------
    names = []
    for e in a.engines:
        if e == "static":
            names += [f"static-{b}" for b in a.static] if "static" in tfc_modes else []
        elif e in tfc_modes or (e == "ct2" and os.path.exists(ct2_dir)):
            names.append(e)
    spec0 = dict(tmp=tmp, src=paths["src"], lens=paths["lens"], news=paths["news"], pad=pad,
                 model=binp, ct2_dir=ct2_dir, vocab=dims["vocab"], n=a.requests,
                 beams=a.beams, wait_ms=a.static_wait_ms, ct2_batch_tokens=a.ct2_batch_tokens,
                 stream=not a.no_stream, engine_rows=a.engine_rows)
    results, caps, versions, checks = {}, {}, {}, []
    for th in a.threads:
        engines = {}
        for nm in names:
            mode = nm.split("-")[0] if nm.startswith("static") else nm
            spec = dict(spec0, mode=mode, threads=th,
                        batch=int(nm.split("-")[1]) if mode == "static" else 1)
            eng = Engine(nm, spec, None if mode == "ct2" else a.tfc_python,
                         None if mode == "ct2" else tfc_env)
            if eng.start():
                engines[nm] = eng
                versions[nm.split("-")[0] if nm != "ct2" else "ct2"] = eng.version
            else:
                errors.append((nm, th, eng.error))
        log(f"{th} thread(s): workers ready: {', '.join(engines)}; " + "; ".join(
            sorted(set(v for v in versions.values() if v))))
        for beam in a.beams:
            key = (beam, th)
            # Capacity: every request at once.
            if a.capacity:
                caps[key] = (a.capacity, "--capacity")
            else:
                order = ["engine"] + [f"static-{b}" for b in sorted(a.static, reverse=True)] \
                    + ["ct2", "fifo"]
                for nm in [x for x in order if x in engines]:
                    p = os.path.join(tmp, f"burst-{nm}-{beam}-{th}.json")
                    arr = os.path.join(tmp, "burst.npy")
                    np.save(arr, np.zeros(a.requests))
                    try:
                        rec = engines[nm].serve(arr, beam, a.limit, p)
                    except RuntimeError as err:
                        errors.append((nm, f"beam {beam}, {th} thr, burst", jc.first_line(
                            str(err))))
                        continue
                    sm = summarize(rec, np.zeros(a.requests), n, a.limit)
                    results[(beam, th, "burst", nm)] = [sm]
                    if sm["done"]:
                        span = a.limit if sm["cut"] else max(
                            x for x in rec["done"] if x is not None)
                        caps[key] = (sm["done"] / span, nm)
                        break
            if key not in caps:
                errors.append(("-", f"beam {beam}, {th} thr", "no capacity: nothing ran"))
                continue
            cap = caps[key][0]
            log(f"beam {beam}, {th} thread(s): capacity {cap:.2f} requests/s "
                f"({cap * n:.0f} tokens/s, {caps[key][1]})")
            for r in range(a.rounds):
                for rate in a.rates:
                    arr = unit / (rate * cap)
                    ap_ = os.path.join(tmp, f"arr-{rate}.npy")
                    np.save(ap_, arr)
                    live = [e for e in names if e in engines]
                    k = r % max(1, len(live))
                    for nm in live[k:] + live[:k]:
                        p = os.path.join(tmp, f"rec-{nm}-{beam}-{th}-{rate}-{r}.json")
                        try:
                            rec = engines[nm].serve(ap_, beam, a.limit, p)
                        except RuntimeError as err:
                            errors.append((nm, f"beam {beam}, {th} thr, rate {rate:g}x",
                                           jc.first_line(str(err))))
                            continue
                        sm = summarize(rec, arr, n, a.limit)
                        results.setdefault((beam, th, rate, nm), []).append(sm)
                        if sm["odd"]:
                            errors.append((nm, f"beam {beam}, {th} thr, rate {rate:g}x",
                                           f"{sm['odd']} requests' first token after their "
                                           "completion (a timing bug)"))
                        if r == 0 and rate == a.rates[0]:
                            results[(beam, th, "ids", nm)] = rec["ids"]
                        log(f"  beam {beam}, {th} thr, rate {rate:g}x, {nm}: "
                            f"{sm['tps']:.0f} tok/s, p95 {sm['p95'] or 0:.0f} ms, "
                            f"{sm['done']}/{a.requests} done" + (" (cut)" if sm["cut"] else ""))
                        time.sleep(jc.SETTLE_S)
            # Tokens against fifo's
            ref = results.get((beam, th, "ids", "fifo"))
            for nm in names:
                got = results.get((beam, th, "ids", nm))
                if nm == "fifo" or ref is None or got is None:
                    continue
                both = [i for i in range(a.requests) if ref[i] is not None and got[i] is not None]
                eq = sum(ref[i] == got[i] for i in both)
                agree = np.mean([np.mean(np.array(ref[i]) == np.array(got[i]))
                                 if len(ref[i]) == len(got[i]) else 0.0 for i in both]) \
                    if both else 0.0
                checks.append((f"beam {beam}, {th} thr", nm, f"{eq}/{len(both)} requests equal "
                               f"to fifo's, {100 * agree:.1f}% of tokens"))
        for e in engines.values():
            e.close()
        log(f"{th} thread(s) done")
    names = [nm for nm in names if any(k[3] == nm for k in results)]
    report(a, n, names, results, caps, checks, errors)


def fmt(x, p=0):
    return "-" if x is None else f"{x:.{p}f}"


def report(a, n, names, results, caps, checks, errors):
    sections = []
    for beam in a.beams:
        for th in a.threads:
            if (beam, th) not in caps:
                continue
            cap, by = caps[(beam, th)]
            ttft = "TTFT" if beam == 1 and not a.no_stream else "TTFT (= latency)"
            heads = ["rate", "req/s", "offered tok/s", "engine", "tok/s", "p50 ms", "p95 ms",
                     f"{ttft} p50", f"{ttft} p95", "done", "mean batch"]
            rows = []
            for rate in ["burst"] + a.rates:
                for nm in names:
                    ss = results.get((beam, th, rate, nm))
                    if not ss:
                        continue
                    sm = median_summary(ss)
                    rows.append(["all at once" if rate == "burst" else f"{rate:g}x",
                                 "-" if rate == "burst" else f"{rate * cap:.2f}",
                                 "-" if rate == "burst" else f"{rate * cap * n:.0f}", nm,
                                 fmt(sm["tps"]), fmt(sm["p50"]), fmt(sm["p95"]), fmt(sm["t50"]),
                                 fmt(sm["t95"]),
                                 f"{sm['done']:g}/{a.requests}" + (" cut" if sm["cut"] else ""),
                                 fmt(sm.get("batch"), 1)])
            sections.append((f"beam {beam}, {th} thread{'s' if th > 1 else ''}: capacity "
                             f"{cap:.2f} requests/s ({by}); {a.requests} requests x " +
                             (f"{n:.1f} tokens on average (--length-ratio "
                              f"{a.length_ratio:g}); " if a.length_ratio else f"{n} tokens; ") +
                             f"median over {a.rounds} round(s)", heads, rows))
            # Ratios: the engine against each other engine
            if "engine" in names:
                rh = ["rate"] + [f"tok/s engine/{nm}" for nm in names if nm != "engine"] + \
                     [f"p95 engine/{nm}" for nm in names if nm != "engine"]
                rr = []
                for rate in a.rates:
                    e = results.get((beam, th, rate, "engine"))
                    if not e:
                        continue
                    e = median_summary(e)
                    row = [f"{rate:g}x"]
                    for k in ("tps", "p95"):
                        for nm in names:
                            if nm == "engine":
                                continue
                            o = results.get((beam, th, rate, nm))
                            o = median_summary(o) if o else None
                            row.append(f"{e[k] / o[k]:.2f}" if o and o[k] and e[k] is not None
                                       else "-")
                    rr.append(row)
                sections.append((f"beam {beam}, {th} thread{'s' if th > 1 else ''}: ratios "
                                 "(tok/s > 1 and p95 <= 1: the engine is better)", rh, rr))
    sections.append(("issue 23's targets", ["case", "target", "result"], targets(a, names,
                                                                                  results, caps)))
    if checks:
        sections.append(("tokens against fifo's (first rate, first round)",
                         ["case", "engine", "check"], checks))
    if errors:
        sections.append(("errors", ["engine", "where", "error"], errors))
    jc.print_sections(sections, a.markdown,
                      lambda h: (0, 1, 2) if h[-1] in ("check", "error", "result") else (0, 3))


def targets(a, names, results, caps):
    rows = []
    get = lambda b, th, rate, nm: median_summary(results[(b, th, rate, nm)]) \
        if results.get((b, th, rate, nm)) else None  # noqa: E731
    for beam in a.beams:
        for th in a.threads:
            if (beam, th) not in caps or "engine" not in names:
                continue
            case = f"beam {beam}, {th} thr"
            for nm in [x for x in names if x.startswith("static")]:
                base = get(beam, th, a.rates[0], nm)
                if not base or base["p95"] is None:
                    continue
                hit = next((r for r in a.rates[1:] if get(beam, th, r, nm) and
                            (get(beam, th, r, nm)["p95"] or 0) >= 2 * base["p95"]), None)
                if hit is None:
                    top = a.rates[-1]
                    s, e = get(beam, th, top, nm), get(beam, th, top, "engine")
                    txt = f"its p95 never doubled over rates {a.rates} (from " \
                        f"{base['p95']:.0f} ms at {a.rates[0]:g}x)"
                    if s and e and s["tps"] and s["p95"] is not None:
                        txt += f"; at {top:g}x: {e['tps'] / s['tps']:.2f}x tok/s, p95 " \
                            f"{fmt(e['p95'])} vs {s['p95']:.0f} ms"
                    rows.append((case, f"engine vs {nm} where its p95 doubles", txt))
                    continue
                s, e = get(beam, th, hit, nm), get(beam, th, hit, "engine")
                if not e:
                    continue
                ok = e["tps"] >= 1.5 * s["tps"] and (e["p95"] or 1e30) <= s["p95"]
                rows.append((case, f"engine >= 1.5x {nm}'s tok/s at <= p95, at {hit:g}x "
                             f"(its p95 {base['p95']:.0f} -> {s['p95']:.0f} ms)",
                             f"{'MET' if ok else 'NOT MET'}: {e['tps'] / s['tps']:.2f}x tok/s, "
                             f"p95 {e['p95']:.0f} vs {s['p95']:.0f} ms"))
            if "ct2" in names:
                for rate in a.rates:
                    c, e = get(beam, th, rate, "ct2"), get(beam, th, rate, "engine")
                    if not c or not e or not c["tps"]:
                        continue
                    ok = e["tps"] > c["tps"] and (e["p95"] or 1e30) <= (c["p95"] or 0)
                    rows.append((case, f"engine > ct2's tok/s at <= p95, at {rate:g}x",
                                 f"{'MET' if ok else 'NOT MET'}: {e['tps'] / c['tps']:.2f}x "
                                 f"tok/s, p95 {fmt(e['p95'])} vs {fmt(c['p95'])} ms"))
    return rows or [("-", "-", "no engine results")]


if __name__ == "__main__":
    main()
