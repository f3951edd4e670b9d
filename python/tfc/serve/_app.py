"""The HTTP side of `tfc serve`: OpenAI's routes on Starlette.

Why Starlette and not FastAPI: FastAPI is Starlette plus pydantic models, and its
value is validation into 422 responses of its own shape. OpenAI's clients expect
400s in OpenAI's error shape that name the field, and refuse nothing silently, so
the bodies are checked by hand (_protocol.py) either way; Starlette alone is the
same ASGI stack (routing, streaming with disconnect detection) with one dependency
less. uvicorn serves it (__main__.py).
"""
from __future__ import annotations

import asyncio
import base64
import json
import math
import time
import uuid
from typing import Any, Dict, List, Optional

import numpy as np

from .._errors import Busy, Cancelled, Error, InvalidArgument
from ._backend import Backend
from ._metrics import Metrics
from ._protocol import (APIError, Sampling, bad, parse_chat, parse_completion,
                        parse_embedding)

#: Retry-After, in seconds, of a 429.
RETRY_AFTER = 1


class Detokenizer:
    """Text from a stream of token ids, as the tokenizer decodes the whole sequence
    (no piece is decoded alone, so multi-token characters and a tokenizer's spacing
    rules come out as in tfc.Generator), with the stop strings cut: text that could
    still turn into a stop string is held back until it cannot."""

    def __init__(self, tokenizer, stop: List[str]) -> None:
        self.tokenizer = tokenizer
        self.stop = stop
        self.hold = max((len(s) for s in stop), default=1) - 1
        self.ids: List[int] = []
        self.text = ""
        self.sent = 0
        self.stopped = False

    def add(self, token_id: int) -> str:
        """The text that can be sent now that ``token_id`` came."""
        self.ids.append(token_id)
        text = self.tokenizer.decode(self.ids)
        if text.endswith("\ufffd"):  # the middle of a character: wait for its next bytes
            return ""
        self.text = text
        if self.stop:
            start = max(0, self.sent - self.hold)
            cut = [i for i in (text.find(s, start) for s in self.stop) if i >= 0]
            if cut:
                self.text = text[:min(cut)]
                self.stopped = True
                return self.flush()
        ready = max(self.sent, len(text) - self.hold)
        out = text[self.sent:ready]
        self.sent = ready
        return out

    def flush(self) -> str:
        out = self.text[self.sent:]
        self.sent = len(self.text)
        return out

    def finish(self) -> str:
        """The rest, once the sequence has ended: held-back text, and a last character
        whose bytes never completed (decoded as tfc.Generator decodes it)."""
        if not self.stopped and self.ids:
            self.text = self.tokenizer.decode(self.ids)
        return self.flush()


class Choice:
    """One generated choice: its engine request, its text as it comes, and why it ended."""

    def __init__(self, index: int, request, tokenizer, stop: List[str], max_new: int,
                 logprobs: bool) -> None:
        self.index = index
        self.request = request
        self.detok = Detokenizer(tokenizer, stop)
        self.tokenizer = tokenizer
        self.max_new = max_new
        self.want_logprobs = logprobs
        self.logprobs: List[Dict[str, Any]] = []
        self.tokens = 0
        self.finish_reason: Optional[str] = None
        self.first_token: Optional[float] = None
        self.last_token: Optional[float] = None

    async def deltas(self):
        """Yields (text, logprob entries) as tokens come; sets finish_reason at the end."""
        ids_done = None
        try:
            async for step in self.request:
                now = time.perf_counter()
                self.first_token = self.first_token or now
                self.last_token = now
                self.tokens += 1
                text = self.detok.add(step.token_id)
                entries = []
                if self.want_logprobs:
                    token = self.tokenizer.decode([step.token_id])
                    lp = float(step.log_prob)  # NaN under beam search: not per token
                    entries = [{"token": token, "logprob": None if math.isnan(lp) else lp,
                                "bytes": list(token.encode("utf-8")), "top_logprobs": []}]
                    self.logprobs.extend(entries)
                if text or entries:
                    yield text, entries
                if self.detok.stopped:
                    self.request.cancel()
                    break
            if not self.detok.stopped:
                ids_done = self.request.result(timeout=0)[0].ids
        except Cancelled:
            if not self.detok.stopped:
                raise
        tail = self.detok.finish()
        if tail:
            yield tail, []
        if self.detok.stopped or (ids_done is not None and len(ids_done) < self.max_new):
            self.finish_reason = "stop"
        else:
            self.finish_reason = "length"


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


class Server:
    """The routes' shared state: the backend, its defaults, the metrics and limits."""

    def __init__(self, backend: Backend, api_key: Optional[str] = None,
                 max_queue: int = 256) -> None:
        self.backend = backend
        self.api_key = api_key
        self.max_queue = max_queue
        self.created = int(time.time())
        self.embed_waiting = 0
        self.embed_lock = asyncio.Lock()
        self.draining = False
        stats = backend.engine.stats if backend.engine is not None else dict
        self.metrics = Metrics(stats, lambda: self.embed_waiting)

    # --- request plumbing ---------------------------------------------------------------

    def check_model(self, name: str) -> None:
        if name != self.backend.name:
            raise APIError(404, f"The model '{name}' does not exist (this server serves "
                                f"'{self.backend.name}')", param="model",
                           code="model_not_found")

    def check_kind(self, route: str, kinds: tuple) -> None:
        if self.backend.kind not in kinds:
            serves = {"generate": "/v1/completions and /v1/chat/completions",
                      "translate": "/v1/completions", "embed": "/v1/embeddings"}
            raise APIError(400, f"model '{self.backend.name}' is an "
                                f"{'encoder' if self.backend.kind == 'embed' else 'encoder-decoder' if self.backend.kind == 'translate' else 'decoder'}: "
                                f"it serves {serves[self.backend.kind]}, not {route}",
                           param="model")

    def options(self, s: Sampling) -> Dict[str, Any]:
        """The engine options of a request: its fields over the model's defaults.
        Temperature 0 is greedy search."""
        d = self.backend.defaults()
        sample = d["sample"] if s.temperature is None else s.temperature > 0
        opts = {"sample": sample, "beam": s.beam or (1 if sample else d["beam"])}
        if s.cache_salt is not None:
            opts["cache_salt"] = s.cache_salt
        if s.repetition_penalty != 1.0:
            opts["repetition_penalty"] = s.repetition_penalty
            if not s.beam:
                opts["beam"] = 1  # the penalty is for greedy search and sampling
        if sample:
            opts.update(min_p=s.min_p,
                        temperature=s.temperature if s.temperature is not None
                        else d["temperature"],
                        top_k=s.top_k if s.top_k is not None else d["top_k"],
                        top_p=s.top_p if s.top_p is not None else d["top_p"])
        return opts

    def max_new(self, prompt_len: int, s: Sampling, where: str) -> int:
        """max_tokens checked against the model's limits (400 naming them)."""
        b = self.backend
        if b.kind == "generate":
            if prompt_len >= b.max_len:
                raise APIError(400, f"This model's maximum context length is {b.max_len} "
                                    f"tokens. However, your {where} has {prompt_len} tokens, "
                                    f"which leaves none to generate.", param=where,
                               code="context_length_exceeded")
            room = b.max_len - prompt_len
            if s.max_tokens is not None and s.max_tokens > room:
                raise APIError(400, f"This model's maximum context length is {b.max_len} "
                                    f"tokens. However, you requested {prompt_len + s.max_tokens}"
                                    f" tokens ({prompt_len} in the {where}, {s.max_tokens} in "
                                    f"the completion). Please reduce the length of the "
                                    f"{where} or max_tokens.", param="max_tokens",
                               code="context_length_exceeded")
            return s.max_tokens or room
        if prompt_len > b.max_input:
            raise APIError(400, f"This model's maximum source length is {b.max_input} tokens. "
                                f"However, your {where} has {prompt_len} tokens.", param=where,
                           code="context_length_exceeded")
        if s.max_tokens is not None and s.max_tokens > b.max_len:
            raise APIError(400, f"This model generates at most {b.max_len} tokens. However, "
                                f"you requested {s.max_tokens} (max_tokens).",
                           param="max_tokens", code="context_length_exceeded")
        return s.max_tokens or b.max_len

    def submit(self, prompts: List[List[int]], s: Sampling, max_news: List[int]) -> List[Choice]:
        """One engine request per choice (prompt x n), all or none: a full queue cancels
        the ones already queued and answers 429."""
        if self.draining:
            raise APIError(503, "the server is shutting down", type="server_error",
                           code="shutting_down")
        opts = self.options(s)
        choices: List[Choice] = []
        try:
            for p, (ids, max_new) in enumerate(zip(prompts, max_news)):
                for k in range(s.n):
                    extra = dict(opts, max_len=max_new)
                    if opts["sample"]:
                        extra["seed"] = ((s.seed if s.seed is not None else
                                          uuid.uuid4().int & 0x7FFFFFFF) + k) & 0x7FFFFFFFFFFFFFFF
                    req = self.backend.engine.submit_async(self.backend.feed(ids), **extra)
                    choices.append(Choice(len(choices), req, self.backend.tokenizer, s.stop,
                                          max_new, s.logprobs))
        except Busy:
            for c in choices:
                c.request.cancel()
            raise APIError(429, f"the server's queue is full ({self.max_queue} requests "
                                f"waiting); retry after {RETRY_AFTER} s", type="rate_limit_error",
                           code="queue_full", headers={"Retry-After": str(RETRY_AFTER)})
        except InvalidArgument as e:
            for c in choices:
                c.request.cancel()
            raise bad(None, str(e)) from None
        return choices

    def observe(self, choices: List[Choice], arrived: float, prompt_tokens: int) -> None:
        m = self.metrics
        m.prompt_tokens.inc(prompt_tokens)
        for c in choices:
            m.generation_tokens.inc(c.tokens)
            if c.first_token is not None:
                m.ttft.observe(c.first_token - arrived)
                if c.tokens > 1:
                    m.tpot.observe((c.last_token - c.first_token) / (c.tokens - 1))

    # --- generation, whole or streamed ---------------------------------------------------

    async def complete(self, choices: List[Choice], disconnected) -> None:
        """Runs every choice to its end; a client that leaves cancels them all."""
        async def drain(c: Choice) -> None:
            async for _ in c.deltas():
                pass

        work = asyncio.ensure_future(asyncio.gather(*(drain(c) for c in choices)))
        gone = asyncio.ensure_future(disconnected())
        try:
            done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if work not in done:
                raise asyncio.CancelledError()
            work.result()
        finally:
            gone.cancel()
            for c in choices:
                c.request.cancel()
            if not work.done():
                work.cancel()

    async def stream(self, choices: List[Choice], chunk, usage, s: Sampling):
        """The SSE body: each choice's deltas as they come (chunk(choice, text,
        logprobs, finish_reason) makes one), usage on the last, then [DONE]. Leaving
        early (a client that disconnects) cancels every choice's request at once."""
        q: asyncio.Queue = asyncio.Queue()

        async def pump(c: Choice) -> None:
            try:
                first = True
                async for text, entries in c.deltas():
                    q.put_nowait(chunk(c, text, entries, None, first))
                    first = False
                q.put_nowait(chunk(c, "", [], c.finish_reason, first))
            except BaseException as e:  # handed to the stream
                q.put_nowait(e)
            finally:
                q.put_nowait(None)

        tasks = [asyncio.ensure_future(pump(c)) for c in choices]
        try:
            left = len(tasks)
            unfinished = len(choices)
            last = None
            while left:
                item = await q.get()
                if item is None:
                    left -= 1
                    continue
                if isinstance(item, BaseException):
                    raise item
                if item["choices"][0]["finish_reason"] is not None:
                    unfinished -= 1
                    if unfinished == 0:  # the last choice's last chunk carries the usage
                        item["usage"] = usage()
                last = item
                yield _sse(item)  # at once: holding a chunk back would delay the first token
            if s.include_usage:
                final = dict(last or {}, choices=[], usage=usage())
                yield _sse(final)
            yield "data: [DONE]\n\n"
        except Error as e:  # cancelled at shutdown, non-finite logits, ...: said in-band
            message = "the request was cancelled" if isinstance(e, Cancelled) else str(e)
            yield _sse(APIError(500, message, type="server_error").body())
            yield "data: [DONE]\n\n"
        finally:
            for c in choices:
                c.request.cancel()
            for t in tasks:
                t.cancel()


def usage_of(prompt_tokens: int, choices: List[Choice]) -> Dict[str, Any]:
    """OpenAI's usage: with the prompt tokens that came from the engine's prefix
    cache (the first choice's: each choice is a request of its own on the same
    prompt), as vLLM reports them."""
    out = sum(c.tokens for c in choices)
    usage: Dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": out,
                             "total_tokens": prompt_tokens + out}
    if choices:
        usage["prompt_tokens_details"] = {"cached_tokens": choices[0].request.cached_tokens}
    return usage


def embeddings_body(server: Server, req, vectors: np.ndarray, tokens: int) -> Dict[str, Any]:
    data = []
    for i, v in enumerate(vectors):
        v = np.asarray(v, dtype=np.float32)
        emb: Any = (base64.b64encode(v.astype("<f4").tobytes()).decode()
                    if req.encoding_format == "base64" else [float(x) for x in v])
        data.append({"object": "embedding", "index": i, "embedding": emb})
    return {"object": "list", "data": data, "model": server.backend.name,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


__all__ = ["Server", "Choice", "Detokenizer", "usage_of", "embeddings_body", "parse_chat",
           "parse_completion", "parse_embedding", "APIError"]
