#!/usr/bin/env python3
"""Serving under load: `tfc serve` against llama.cpp's server (llama-cpp-python's
`python -m llama_cpp.server`), int8 against Q8_0, on the same random-weight model.

  PYTHONPATH=build/python-text-site build/bench-venv/bin/with-libs \\
      build/bench-venv/bin/python bench/bench_serve.py --shape qwen2.5-0.5b \\
      --clients 1 4 16 64 --seconds 60 --markdown     (--shape tiny: a smoke test)
Needs the bench venv (bench/peers/setup_venv.sh, bench/peers/setup_llama.sh) plus the
llama.cpp server's extras: build/bench-venv/bin/pip install 'llama-cpp-python[server]'.
The tfc package must be importable by the venv's python: PYTHONPATH=SITE, a `pip install
--target SITE` of this tree, as tests/python/run_text.sh uses build/python-text-site
(ctest python-text-install makes it; --tfc-site, default that folder, is used when tfc
is not importable otherwise).

The model: a Qwen2ForCausalLM at Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14 heads
over 2 key/value heads, intermediate 4864, vocabulary 151936, tied embeddings, q/k/v
biases, rope_theta 1e6; max_position_embeddings 2048), random weights (seed 0), with a
byte-level BPE tokenizer built here: Qwen2's pre-tokenizer regex, 256 byte tokens,
merges of lowercase letters up to the full vocabulary (so every id the random model
emits decodes to text in both engines), <|endoftext|> <|im_start|> <|im_end|> last, eos
<|im_end|>, and a ChatML chat template. llama.cpp's converter (--outtype q8_0) names the
pre-tokenizer 'qwen2' (it cannot recognise a tokenizer it has not seen; see to_gguf), so
both engines tokenize every prompt alike. --shape tiny: hidden 64, 2 layers, 2048 tokens.
Servers, both started once on free loopback ports with --threads T each:
  tfc     python -m tfc.serve DIR --precision int8 --threads T (cache: a temporary folder)
  llama   python -m llama_cpp.server --model Q8_0.gguf --n_threads T --n_threads_batch T
          --n_ctx 2048 --chat_format chatml --interrupt_requests False (it runs one request
          at a time; by default a new request cuts the running stream short)
  tfc-nocache  tfc's command with --no-prefix-caching (--engines tfc tfc-nocache llama)
Prefix caching: --system-prompt N puts one system message of random words, about N
tokens, before every request's user message (a shared system prompt, as chat services
have). tfc's engine starts each prompt from the KV blocks of the longest cached prefix
(whole blocks of 16); llama.cpp's server keeps the last prompt's KV and reuses its
longest common prefix with the next one (llama-cpp-python's Llama.generate).
Load: a fixed trace (seed 0) of 256 one-message chat requests with prompts of 16 to 256
tokens of random words, replayed in order by N concurrent streaming clients (asyncio,
HTTP/1.1 over loopback, no client library) for --seconds each, greedy (temperature 0),
--max-tokens new tokens at most (a request may end early on eos). Clients send no new
request after --seconds; requests still running get --drain more seconds, then are cut
(counted as "cut"; their TTFT, when they had no token yet, enters the percentiles as a
lower bound, shown as ">X"). Levels are interleaved (tfc at 1 client, llama at 1, tfc at
4, ...), after one untimed warm-up request each; after each level one untimed 1-token
request waits until the server is idle.
Report per engine and level: output tokens/s = all completion tokens received / the
level's wall time (first request to the last end); TTFT = request sent to the first
content chunk; TPOT = (last content chunk - first) / (tokens - 1) per request; p50 and
p95 over the level's requests; errors = HTTP errors, error chunks, broken streams.
Tokens: tfc's `usage` (on its last chunk); llama.cpp's server sends no usage when
streaming, so its content chunks are counted (one per token here: every token is
plain ASCII text). The issue's target: tfc ahead on throughput at 16 and 64 clients, at
an equal or lower p95 TTFT, with zero failed requests. Exits 1 only when setup fails.
"""
import argparse
import asyncio
import itertools
import json
import math
import os
import socket
import subprocess
import sys
import time

import numpy as np

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import jobs_common as jc  # noqa: E402

SHAPES = {
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2, vocab_size=151936),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=2048),
}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# Qwen2's pre-tokenizer (its tokenizer.json), which llama.cpp knows as 'qwen2'.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
N_CTX = 2048
TRACE_LEN = 256
MAX_REQUESTS = 10000  # per engine and level
MODEL_ID = "bench"


def tokenizer(d, vocab_size):
    """A byte-level BPE of exactly |vocab_size| tokens, built (not trained): the 256
    byte tokens, then merges of lowercase letters ('Ġ' is the space before a word) in
    order: Ġa, ab, Ġab, abc, Ġabc, abcd (as ab + cd), as many as fit; the specials last."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
    from tokenizers import pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    pairs2 = [x + y for x in letters for y in letters]
    pairs3 = [p + z for p in pairs2 for z in letters]
    gen = itertools.chain(
        (("Ġ", x) for x in letters), ((x, y) for x in letters for y in letters),
        (("Ġ" + p[0], p[1]) for p in pairs2), ((p, z) for p in pairs2 for z in letters),
        (("Ġ" + p[:2], p[2]) for p in pairs3), ((p, q) for p in pairs2 for q in pairs2))
    merges = list(itertools.islice(gen, vocab_size - len(vocab) - len(SPECIALS)))
    for a, b in merges:
        vocab[a + b] = len(vocab)
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    t.post_processor = processors.ByteLevel(trim_offsets=False)
    t.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    assert t.get_vocab_size() == vocab_size, t.get_vocab_size()
    tok = PreTrainedTokenizerFast(tokenizer_object=t, eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>")
    tok.chat_template = CHATML
    tok.save_pretrained(d)
    return tok


def checkpoint(d, dims):
    """The random Qwen2 and its tokenizer in |d|; returns the tokenizer."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging
    logging.disable_progress_bar()
    tok = tokenizer(d, dims["vocab_size"])
    ids = tok.convert_tokens_to_ids(SPECIALS)
    cfg = Qwen2Config(**dims, max_position_embeddings=N_CTX, rope_theta=1e6, rms_norm_eps=1e-6,
                      tie_word_embeddings=True, use_sliding_window=False,
                      bos_token_id=ids[0], eos_token_id=ids[2])
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).eval().save_pretrained(d)
    return tok


def to_gguf(d, out, log):
    """bench_llama.to_gguf's converter run (--outtype q8_0), with the pre-tokenizer
    named: the converter identifies a BPE pre-tokenizer by hashing its tokens of a test
    text, which only published tokenizers match; ours splits text with Qwen2's regex."""
    conv = os.path.join(os.path.dirname(sys.executable), "..", "llama.cpp-convert")
    code = ("import runpy, sys; c = sys.argv[1]; sys.path[:0] = [os.path.join(c, 'gguf-py'), c]; "
            "import conversion.base as b; b.TextModel.get_vocab_base_pre = lambda s, t: 'qwen2'; "
            "sys.argv = [os.path.join(c, 'convert_hf_to_gguf.py')] + sys.argv[2:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", "import os; " + code, conv, d, "--outfile", out,
                        "--outtype", "q8_0"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("convert_hf_to_gguf --outtype q8_0 failed: "
                           + (r.stderr or r.stdout)[-1500:])
    log(f"GGUF q8_0: {os.path.getsize(out) / 1e6:.0f} MB")


def make_trace(tok, n, lo=16, hi=256, seed=0):
    """|n| chat requests' message texts, each of a length drawn from [lo, hi] tokens
    (the rendered ChatML prompt), made of random words; and their token counts."""
    g = np.random.default_rng(seed)
    def count(text):
        chat = tok.apply_chat_template([{"role": "user", "content": text}],
                                       add_generation_prompt=True, tokenize=False)
        return len(tok.encode(chat, add_special_tokens=False))
    overhead = count("")
    texts, lengths = [], []
    for _ in range(n):
        target, words, n = int(g.integers(lo, hi + 1)), [], overhead
        while n < target:
            w = "".join(chr(97 + c) for c in g.integers(0, 26, size=int(g.integers(2, 9))))
            n += len(tok.encode(("" if not words else " ") + w, add_special_tokens=False))
            words.append(w)
        texts.append(" ".join(words))
        lengths.append(count(texts[-1]))
    return texts, lengths


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process on a loopback port, its output in a log file."""

    def __init__(self, name, cmd, port, ready_path, log_path, env=None):
        self.name, self.port, self.ready_path, self.log_path = name, port, ready_path, log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def wait_ready(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode}:\n" + self.tail())
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
                    s.sendall(f"GET {self.ready_path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Connection: close\r\n\r\n".encode())
                    if s.recv(64).startswith(b"HTTP/1.1 200"):
                        return
            except OSError:
                pass
            time.sleep(1)
        raise RuntimeError(f"{self.name} not ready after {timeout} s:\n" + self.tail())

    def tail(self, n=20):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # both servers drain and exit on SIGTERM
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def tfc_env(site):
    """The environment for `python -m tfc.serve`: os.environ, with |site| first on
    PYTHONPATH unless tfc imports without it; raises when it imports with neither."""
    env = dict(os.environ)
    for path in (None, site):
        if path:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (path, env.get("PYTHONPATH"))))
        r = subprocess.run([sys.executable, "-c", "import tfc.serve, uvicorn, starlette"],
                           env=env, capture_output=True, text=True, cwd="/")
        if r.returncode == 0:
            return env
    raise RuntimeError(
        "the tfc package (or its serving extras) is not importable: put a `pip install "
        "--target SITE .` of this tree first on PYTHONPATH (ctest python-text-install "
        "makes build/python-text-site) or pass --tfc-site SITE\n" + jc.first_line(r.stderr))


async def body_pieces(reader, chunked):
    """The response body as it comes, chunked transfer encoding or read to EOF."""
    if not chunked:
        while data := await reader.read(65536):
            yield data
        return
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


async def post_json(port, path, body, stream=False):
    """POSTs |body| to 127.0.0.1:|port||path| over HTTP/1.1 and reads the response's
    head: (reader, writer, status, chunked). The caller reads the body and closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    accept = b"Accept: text/event-stream\r\n" if stream else b""
    writer.write(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % path.encode()
                 + b"Content-Type: application/json\r\n" + accept
                 + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip().lower()
    return reader, writer, status, "chunked" in headers.get("transfer-encoding", "")


async def request(port, body, rec):
    """Sends one streaming chat request and fills |rec|: first/last content chunk
    times, content chunks, usage's completion tokens, done ([DONE] seen), err."""
    writer = None
    try:
        reader, writer, status, chunked = await post_json(port, "/v1/chat/completions", body,
                                                          stream=True)
        if status != 200:
            text = b"".join([p async for p in body_pieces(reader, chunked)])
            rec["err"] = f"HTTP {status}: {text[:200].decode(errors='replace')}"
            return
        buf = b""
        async for piece in body_pieces(reader, chunked):
            buf += piece
            *lines, buf = buf.split(b"\n")
            for line in lines:
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue  # blank separators, ': ping' comments
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    rec["done"] = True
                    return
                obj = json.loads(payload)
                if "error" in obj:
                    rec["err"] = "error chunk: " + json.dumps(obj["error"])[:200]
                    return
                if obj.get("usage"):
                    rec["usage"] = obj["usage"].get("completion_tokens")
                for ch in obj.get("choices") or ():
                    if (ch.get("delta") or {}).get("content"):
                        t = time.perf_counter()
                        rec["first"] = rec["first"] or t
                        rec["last"] = t
                        rec["chunks"] += 1
        rec["err"] = "the stream ended without [DONE]"
    except (OSError, EOFError, ValueError, IndexError, asyncio.IncompleteReadError) as e:
        rec["err"] = f"{type(e).__name__}: {e}"[:200]
    finally:
        if writer is not None:
            writer.close()


async def run_level(port, bodies, clients, seconds, drain):
    """|clients| clients replaying |bodies| in order (a shared cursor) for |seconds|;
    requests still running |drain| s later are cut. Returns (records, wall seconds)."""
    recs, cursor = [], itertools.count()
    t0 = time.perf_counter()
    stop_at = t0 + seconds

    async def client():
        while time.perf_counter() < stop_at and len(recs) < MAX_REQUESTS:
            rec = dict(start=time.perf_counter(), first=None, last=None, chunks=0, usage=None,
                       done=False, err=None, end=None)
            recs.append(rec)
            try:
                await request(port, bodies[next(cursor) % len(bodies)], rec)
            finally:
                rec["end"] = time.perf_counter()

    tasks = [asyncio.ensure_future(client()) for _ in range(clients)]
    _, pending = await asyncio.wait(tasks, timeout=seconds + drain)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return recs, time.perf_counter() - t0


def percentile(samples, p):
    """Nearest-rank percentile of (value, lower_bound) pairs: 'X' or '>X' in ms."""
    if not samples:
        return "-"
    v, bound = sorted(samples)[max(0, math.ceil(p / 100 * len(samples)) - 1)]
    return f"{'>' if bound else ''}{v * 1e3:.{1 if v < 0.01 else 0}f}"


def summarize(recs, wall):
    """The level's figures from its request records."""
    tokens, ttft, tpot = 0, [], []
    errors = [r["err"] for r in recs if r["err"]]
    cut = [r for r in recs if not r["err"] and not r["done"]]
    for r in recs:
        n = r["usage"] if r["usage"] is not None else r["chunks"]
        tokens += n
        if r["err"]:
            continue
        if r["first"] is not None:
            ttft.append((r["first"] - r["start"], False))
            if n > 1 and r["done"]:
                tpot.append(((r["last"] - r["first"]) / (n - 1), False))
        elif not r["done"]:  # cut before its first token: a lower bound
            ttft.append((r["end"] - r["start"], True))
    done = sum(1 for r in recs if r["done"] and not r["err"])
    return dict(tps=tokens / wall, tokens=tokens, wall=wall, done=done, cut=len(cut),
                errors=len(errors), first_error=errors[0] if errors else "",
                ttft50=percentile(ttft, 50), ttft95=percentile(ttft, 95),
                tpot50=percentile(tpot, 50), tpot95=percentile(tpot, 95),
                p50=sorted(ttft)[max(0, math.ceil(0.5 * len(ttft)) - 1)][0] if ttft else None,
                p95=sorted(ttft)[max(0, math.ceil(0.95 * len(ttft)) - 1)][0] if ttft else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="qwen2.5-0.5b", choices=sorted(SHAPES))
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--seconds", type=float, default=60, help="load time per level")
    ap.add_argument("--drain", type=float, help="seconds running requests may take after "
                    "--seconds before they are cut (default: --seconds)")
    ap.add_argument("--threads", type=int, default=2, help="threads of each server")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--engines", nargs="+", default=["tfc", "llama"],
                    choices=["tfc", "tfc-nocache", "llama"])
    ap.add_argument("--system-prompt", type=int, default=0, metavar="N",
                    help="a shared system message of about N tokens in every request")
    ap.add_argument("--tfc-site", default=os.path.join(jc.ROOT, "build", "python-text-site"),
                    help="put on PYTHONPATH when tfc is not importable otherwise")
    ap.add_argument("--start-timeout", type=float, default=1800,
                    help="seconds a server may take to start (tfc compiles first)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    drain = a.seconds if a.drain is None else a.drain
    t0 = time.time()
    log = lambda s: print(f"[{time.time() - t0:5.0f} s] {s}", flush=True)  # noqa: E731

    try:
        if "tfc" in a.engines or "tfc-nocache" in a.engines:
            env = tfc_env(a.tfc_site)
        if "llama" in a.engines:
            r = subprocess.run([sys.executable, "-c", "import llama_cpp.server.app"],
                               capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError(
                    "llama_cpp.server is not importable (" + jc.first_line(r.stderr) + "): run "
                    f"{sys.executable} -m pip install 'llama-cpp-python[server]' (and "
                    "bench/peers/setup_llama.sh first), or pass --engines tfc")
    except RuntimeError as e:
        print(f"bench_serve: {e}", file=sys.stderr)
        return 1

    tmp = jc.work_dir("tfc-bench-serve-", a.keep)
    d = os.path.join(tmp, "qwen2")
    dims = SHAPES[a.shape]
    tok = checkpoint(d, dims)
    texts, lengths = make_trace(tok, TRACE_LEN)
    system = make_trace(tok, 1, a.system_prompt, a.system_prompt, seed=1)[0][0] \
        if a.system_prompt else None
    if system:
        lengths = [len(tok.encode(tok.apply_chat_template(
            [{"role": "system", "content": system}, {"role": "user", "content": t}],
            add_generation_prompt=True, tokenize=False), add_special_tokens=False))
            for t in texts]
    from importlib.metadata import version
    log(f"Qwen2 {a.shape} {dims}, random weights; trace: {TRACE_LEN} chat requests, prompts "
        f"{min(lengths)}-{max(lengths)} tokens (mean {np.mean(lengths):.0f}), at most "
        f"{a.max_tokens} new, greedy; {jc.cpu_summary()}; {a.threads} threads per server; "
        + ", ".join(f"{p} {version(p)}" for p in ("llama-cpp-python", "transformers")
                    if p != "llama-cpp-python" or "llama" in a.engines))

    servers = {}
    try:
        if "llama" in a.engines:
            gguf = os.path.join(tmp, "qwen2-q8_0.gguf")
            to_gguf(d, gguf, log)
            port = free_port()
            servers["llama"] = Server("llama", [
                sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1",
                "--port", str(port), "--n_threads", str(a.threads), "--n_threads_batch",
                str(a.threads), "--n_ctx", str(N_CTX), "--chat_format", "chatml",
                "--model_alias", MODEL_ID, "--interrupt_requests", "False", "--verbose", "False"],
                port, "/v1/models", os.path.join(tmp, "llama.log"))
        for name in [e for e in a.engines if e.startswith("tfc")]:
            port = free_port()
            env["TFC_CACHE_DIR"] = os.path.join(tmp, "cache")
            servers[name] = Server(name, [
                sys.executable, "-m", "tfc.serve", d, "--host", "127.0.0.1", "--port", str(port),
                "--precision", "int8", "--threads", str(a.threads), "--served-model-name",
                MODEL_ID, "--log-level", "warning"]
                + (["--no-prefix-caching"] if name == "tfc-nocache" else []), port, "/health",
                os.path.join(tmp, f"{name}.log"), env=env)
        for name in a.engines:
            servers[name].wait_ready(a.start_timeout)
            log(f"{name} ready on port {servers[name].port}")
    except RuntimeError as e:
        print(f"bench_serve: setup failed: {e}", file=sys.stderr)
        for s in servers.values():
            s.close()
        return 1

    def bodies(name):
        extra = {"repeat_penalty": 1.0} if name == "llama" else {}  # llama's default: 1.1
        head = [{"role": "system", "content": system}] if system else []
        return [dict(model=MODEL_ID, messages=head + [{"role": "user", "content": t}],
                     stream=True, max_tokens=a.max_tokens, temperature=0, **extra)
                for t in texts]

    def single(name, max_tokens):
        """One untimed request, awaited (at most 600 s): the warm-up, and after each
        level the wait until the server is idle (llama.cpp's server still prefills the
        queued requests of cut clients before it notices they left)."""
        rec = dict(first=None, last=None, chunks=0, usage=None, done=False, err=None)
        body = dict(bodies(name)[0], max_tokens=max_tokens)
        try:
            asyncio.run(asyncio.wait_for(request(servers[name].port, body, rec), 600))
        except asyncio.TimeoutError:
            rec["err"] = "no answer in 600 s"
        return rec["err"] or f"{rec['usage'] or rec['chunks']} tokens"

    results = {}
    try:
        for name in a.engines:
            log(f"{name} warm-up: {single(name, a.max_tokens)}")
        for c in a.clients:
            for name in a.engines:
                recs, wall = asyncio.run(run_level(servers[name].port, bodies(name), c,
                                                   a.seconds, drain))
                s = results[(name, c)] = summarize(recs, wall)
                log(f"{name} x{c}: {s['tps']:.1f} tokens/s, {s['done']} done, {s['cut']} cut, "
                    f"{s['errors']} errors, TTFT p95 {s['ttft95']} ms"
                    + (f"; first error: {s['first_error']}" if s["errors"] else ""))
                single(name, 1)
                time.sleep(1)  # let the server settle before the other one's turn
    finally:
        for s in servers.values():
            s.close()

    sections = []
    for name in a.engines:
        rows = [[c, f"{s['tps']:.1f}", s["ttft50"], s["ttft95"], s["tpot50"], s["tpot95"],
                 s["done"], s["cut"], s["errors"], f"{s['wall']:.0f}"]
                for c in a.clients for s in [results[(name, c)]]]
        sections.append((f"{name}: {a.seconds:g} s per level (+ up to {drain:g} s drain), "
                         f"{a.threads} threads; times in ms",
                         ["clients", "tokens/s", "TTFT p50", "TTFT p95", "TPOT p50", "TPOT p95",
                          "requests", "cut", "errors", "wall s"], rows))
    if "tfc" in a.engines and "llama" in a.engines:
        rows = []
        for c in a.clients:
            t, l_ = results[("tfc", c)], results[("llama", c)]
            rows.append([c, f"{t['tps'] / l_['tps']:.2f}" if l_["tps"] else "-",
                         f"{t['p95'] / l_['p95']:.2f}" if t["p95"] and l_["p95"] else "-",
                         f"{t['errors']} / {l_['errors']}", f"{t['cut']} / {l_['cut']}"])
        sections.append(("tfc / llama.cpp (the target: throughput > 1 at 16 and 64 clients, "
                         "p95 TTFT <= 1, no errors)",
                         ["clients", "tokens/s", "TTFT p95", "errors tfc / llama",
                          "cut tfc / llama"], rows))
    if "tfc" in a.engines and "tfc-nocache" in a.engines:
        rows = [[c, f"{t['tps'] / n['tps']:.2f}" if n["tps"] else "-",
                 f"{t['p50'] / n['p50']:.2f}" if t["p50"] and n["p50"] else "-",
                 f"{t['p95'] / n['p95']:.2f}" if t["p95"] and n["p95"] else "-"]
                for c in a.clients for t, n in [(results[("tfc", c)],
                                                 results[("tfc-nocache", c)])]]
        sections.append(("tfc with prefix caching / without", ["clients", "tokens/s",
                                                               "TTFT p50", "TTFT p95"], rows))
    errs = [[n, c, results[(n, c)]["first_error"]] for n in a.engines for c in a.clients
            if results[(n, c)]["errors"]]
    if errs:
        sections.append(("first error per level", ["engine", "clients", "error"], errs))
    jc.print_sections(sections, a.markdown, lambda h: (0,) if h[-1] != "error" else (0, 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
