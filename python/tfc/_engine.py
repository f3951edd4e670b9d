"""The generation engine: many requests on one model, batched continuously
(docs/generation.md, "The engine"; docs/python.md).

    engine = tfc.Engine(tfc.load("gpt2.bin"), threads=2)
    request = engine.submit({"tokens": [[464, 2068, 7586]]}, max_len=20)
    for step in request:            # each token as it comes
        print(step.token_id)
    print(request.result())         # [Generation(ids=[...], score=...)]

    async def handler():            # in an asyncio server
        gens = await engine.generate({"tokens": ids}, max_len=20)
        async for step in engine.stream({"tokens": ids}, max_len=20):
            ...

Each request runs on the engine's threads beside the others; its results equal
``Session.generate`` of the same inputs and options.
"""
from __future__ import annotations

import asyncio
import atexit
import hashlib
import queue
import threading
import weakref
from typing import AsyncIterator, Dict, Iterator, List, Mapping, Optional

from . import _tfc
from ._errors import Error, InvalidArgument, warn_non_finite
from ._model import (ArrayLike, Generation, GenerationStep, Model, Session, _inputs,
                     _parse_device)

_DONE = object()

#: The live engines, for the exit handler below.
_ENGINES: "weakref.WeakSet[Engine]" = weakref.WeakSet()


@atexit.register
def _cancel_at_exit() -> None:
    # The engine's threads call into Python (token callbacks) and its watcher
    # threads wait in native code: at interpreter exit every request still in
    # flight is cancelled and collected first, so no engine thread touches an
    # interpreter that is shutting down.
    requests = [r for e in list(_ENGINES) for r in list(e._live)]
    for r in requests:
        try:
            r.cancel()
        except Exception:
            pass
    for r in requests:
        try:
            r.result(timeout=30)
        except Exception:
            pass


class Request:
    """One submitted request (``Engine.submit``): ``result()`` waits for its
    Generations, iterating yields its tokens as they come (GenerationStep; beam
    search yields each item's tokens when the item is finished), ``cancel()`` stops
    it. A cancelled request's ``result()`` raises ``tfc.Cancelled``."""

    def __init__(self, engine: "Engine", rid: int, tokens: "queue.Queue") -> None:
        self._engine = engine
        self.id = rid
        self._tokens = tokens
        self._lock = threading.Lock()
        self._result: Optional[List[Generation]] = None
        self._error: Optional[BaseException] = None
        self._ended = False
        self._cached = 0
        self._put = tokens.put if tokens is not None else None

    @property
    def cached_tokens(self) -> int:
        """Its prompt tokens whose KV blocks came from the engine's prefix cache when
        it was admitted, over its batch items (0 while queued, or without prefix
        caching): OpenAI's ``usage.prompt_tokens_details.cached_tokens``."""
        if not self._ended:  # no lock: the watcher holds it while it waits for the end
            try:
                return int(self._engine._native.cached_tokens(self.id))
            except Error:  # released meanwhile: _cached was set first
                pass
        return self._cached

    def done(self) -> bool:
        """Whether the request has ended (finished, failed or cancelled)."""
        return self._ended

    def _wait(self, timeout_ms: int) -> None:
        with self._lock:
            if self._ended:
                return
            native = self._engine._native
            try:
                if not native.wait(self.id, timeout_ms):
                    return
                self._result = [Generation(list(ids), float(score))
                                for ids, score in native.results(self.id)]
                warn_non_finite("scores", [g.score for g in self._result])
            except BaseException as e:  # the request's own error (Cancelled, ...)
                self._error = e
            self._cached = int(native.cached_tokens(self.id))
            self._ended = True
            native.release(self.id)
            self._engine._live.discard(self)
            self._put(_DONE)

    def result(self, timeout: Optional[float] = None) -> List[Generation]:
        """The request's Generations, one per batch item, once it ends (at most
        ``timeout`` seconds: TimeoutError after that). Raises the request's error."""
        self._wait(-1 if timeout is None else max(0, int(timeout * 1000)))
        if not self._ended:
            raise TimeoutError(f"request {self.id} has not ended after {timeout} s")
        if self._error is not None:
            raise self._error
        return list(self._result or [])

    def cancel(self) -> None:
        """Cancels the request if it has not ended: it ends with tfc.Cancelled at its
        next step, and its KV cache rows return to the pool."""
        if self._ended:
            return
        try:
            self._engine._native.cancel(self.id)
        except InvalidArgument:  # it ended (and was collected) meanwhile
            if not self._ended:
                raise

    def __iter__(self) -> Iterator[GenerationStep]:
        while True:
            item = self._tokens.get()
            if item is _DONE:
                self._tokens.put(_DONE)  # later iterations end at once too
                if self._error is not None:
                    raise self._error
                return
            yield item

    def __repr__(self) -> str:
        state = "ended" if self._ended else "running"
        return f"tfc.Request({self.id}, {state})"


class AsyncRequest(Request):
    """A Request whose tokens arrive on an asyncio loop (``Engine.submit_async``):
    ``async for step in request`` yields its GenerationSteps and then raises the
    request's error, if any (tfc.Cancelled after ``cancel()``); once the loop ends,
    ``result(timeout=0)`` gives its Generations without waiting."""

    def __aiter__(self) -> "AsyncRequest":
        return self

    async def __anext__(self) -> GenerationStep:
        item = await self._tokens.get()
        if item is _DONE:
            self._tokens.put_nowait(_DONE)  # later iterations end at once too
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        return item

    def __iter__(self):
        raise TypeError("an AsyncRequest's tokens come with 'async for'")


def _salt(cache_salt: Optional[str]) -> int:
    """A prefix-cache salt as the engine takes it: 64 bits of the string's BLAKE2b
    (hashlib's), never 0 (the unsalted cache); 0 for None."""
    if cache_salt is None:
        return 0
    if not isinstance(cache_salt, str) or not cache_salt:
        raise InvalidArgument(f"cache_salt must be a non-empty string or None, got "
                              f"{cache_salt!r}")
    digest = hashlib.blake2b(cache_salt.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") or 1


class Engine:
    """Generation for many requests at once on one model (continuous batching).

    ``threads``: CPU threads (None: the OpenMP default); ``device``: "cpu", "cuda" or
    "cuda:N"; ``max_rows``: rows per step (None: the model's max_batch; a request of
    batch B takes B rows, with beam K B x K); ``kv_cache_mb``: the paged KV cache's
    size in MiB (None: every row at max_len, at most 1 GiB; a smaller pool preempts
    and recomputes requests when it runs out); ``kv_block_size``: positions per KV
    block (None: 16); ``prefix_caching``: a decoder-only model's prompt starts from
    the KV blocks that earlier requests computed for the same leading tokens (whole
    blocks: a shared system prompt or chat history is prefilled once; ``stats()``
    counts ``prefix_cache_hits`` of ``prefix_cache_queries`` prompt tokens);
    ``max_batch_tokens``: prompt tokens prefilled per step (None: 2048);
    ``max_queue``: requests waiting for rows (None: 256) before ``submit`` raises
    ``tfc.Busy``. Thread-safe: submit and cancel from any thread."""

    def __init__(self, model: Model, threads: Optional[int] = None,
                 max_batch_tokens: Optional[int] = None, kv_cache_mb: Optional[float] = None,
                 max_queue: Optional[int] = None, max_rows: Optional[int] = None,
                 device: str = "cpu", kv_block_size: Optional[int] = None,
                 prefix_caching: bool = True) -> None:
        if not isinstance(model, Model):
            raise InvalidArgument(f"model must be a tfc.Model, got {type(model).__name__}")
        for name, value in (("threads", threads), ("max_batch_tokens", max_batch_tokens),
                            ("max_queue", max_queue), ("max_rows", max_rows),
                            ("kv_block_size", kv_block_size)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InvalidArgument(f"{name} must be a positive int or None, got {value!r}")
        if kv_cache_mb is not None and not (isinstance(kv_cache_mb, (int, float))
                                            and kv_cache_mb > 0):
            raise InvalidArgument(f"kv_cache_mb must be a positive number or None, "
                                  f"got {kv_cache_mb!r}")
        if not isinstance(prefix_caching, bool):
            raise InvalidArgument(f"prefix_caching must be True or False, got "
                                  f"{prefix_caching!r}")
        dev, dev_id = _parse_device(device)
        self.model = model
        self._native = _tfc.Engine(model._native, threads or 0, dev, dev_id, max_rows or 0,
                                   max_queue or 0, max_batch_tokens or 0,
                                   int(kv_cache_mb * (1 << 20)) if kv_cache_mb else 0,
                                   kv_block_size or 0, prefix_caching)
        self._live: "set[Request]" = set()  # requests not yet collected
        _ENGINES.add(self)

    def submit(self, inputs: Mapping[str, ArrayLike], beam: int = 1,
               max_len: Optional[int] = None, length_penalty: float = 1.0,
               sample: bool = False, temperature: float = 1.0, top_k: int = 0,
               top_p: float = 1.0, seed: int = 0, repetition_penalty: float = 1.0,
               min_p: float = 0.0, cache_salt: Optional[str] = None) -> Request:
        """Queues a request (the arguments of ``Session.generate``) and returns its
        Request at once. ``cache_salt``: the request shares prefix-cache blocks only
        with requests of the same salt (vLLM's ``cache_salt``: one per tenant keeps
        a client from learning by timing what others sent). Raises InvalidArgument
        for bad inputs or options, and ``tfc.Busy`` when the queue is full (nothing
        is queued then)."""
        tokens: "queue.Queue" = queue.Queue()
        return self._submit(inputs, tokens.put, Request, tokens,
                            beam=beam, max_len=max_len, length_penalty=length_penalty,
                            sample=sample, temperature=temperature, top_k=top_k,
                            top_p=top_p, seed=seed, repetition_penalty=repetition_penalty,
                            min_p=min_p, cache_salt=cache_salt)

    def _submit(self, inputs: Mapping[str, ArrayLike], put, cls, tokens, beam: int = 1,
                max_len: Optional[int] = None, length_penalty: float = 1.0,
                sample: bool = False, temperature: float = 1.0, top_k: int = 0,
                top_p: float = 1.0, seed: int = 0, repetition_penalty: float = 1.0,
                min_p: float = 0.0, cache_salt: Optional[str] = None):
        """submit(), with each GenerationStep (then _DONE) handed to ``put`` from the
        engine's threads, and the request made as ``cls(self, id, tokens)``."""
        opts = Session._options(beam, max_len, length_penalty, sample, temperature, top_k,
                                top_p, seed, repetition_penalty, min_p)
        salt = _salt(cache_salt)

        def on_token(batch_index, step, token_id, log_prob):
            put(GenerationStep(batch_index, step, token_id, log_prob))
            return False

        rid = self._native.submit(_inputs(inputs), *opts, on_token, cache_salt=salt)
        request = cls(self, rid, tokens)
        request._put = put
        self._live.add(request)
        # A watcher ends the token stream when the request ends, for iteration.
        threading.Thread(target=request._wait, args=(-1,), name=f"tfc-request-{rid}",
                         daemon=True).start()
        return request

    def submit_async(self, inputs: Mapping[str, ArrayLike], **options) -> "AsyncRequest":
        """``submit`` for asyncio code (call it from the event loop's thread): the
        AsyncRequest's tokens arrive on the running loop (``async for``), with no
        thread per waiting consumer, so thousands of streams can wait at once.
        Raises as ``submit`` does."""
        loop = asyncio.get_running_loop()
        tokens: "asyncio.Queue" = asyncio.Queue()

        def put(item) -> None:
            try:
                loop.call_soon_threadsafe(tokens.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                pass

        return self._submit(inputs, put, AsyncRequest, tokens, **options)

    async def generate(self, inputs: Mapping[str, ArrayLike], **options) -> List[Generation]:
        """``submit`` then the request's result, awaited without blocking the event loop.
        Cancelling the awaiting task cancels the request."""
        request = self.submit_async(inputs, **options)
        try:
            async for _ in request:
                pass
        except asyncio.CancelledError:
            request.cancel()
            raise
        return request.result(timeout=0)

    async def stream(self, inputs: Mapping[str, ArrayLike],
                     **options) -> AsyncIterator[GenerationStep]:
        """``submit``, then each token as it comes (an async iterator of
        GenerationStep). Leaving the loop early cancels the request."""
        request = self.submit_async(inputs, **options)
        finished = False
        try:
            async for step in request:
                yield step
            finished = True
        finally:
            if not finished:
                request.cancel()

    def stats(self) -> Dict[str, float]:
        """Requests queued and running, KV blocks used and free (kv_blocks_*, of
        kv_block_positions positions and kv_block_bytes bytes each), encoder-decoder
        models' encoder memory blocks used and free (memory_blocks_*, of
        memory_block_positions source positions and memory_block_bytes bytes each; one
        sequence per batch item of the running requests, shared by its beams), requests
        finished / cancelled / failed / preempted, tokens generated, steps, and tokens
        per second of steps run."""
        return self._native.stats()

    def __repr__(self) -> str:
        return f"tfc.Engine({self.model.name!r})"
