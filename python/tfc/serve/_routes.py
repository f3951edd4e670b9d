"""The routes of `tfc serve` (docs/serving.md) and the Starlette app around them."""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
import uuid
from typing import Any, Dict, Optional

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .._errors import Error, InvalidArgument
from ._app import Server, embeddings_body, usage_of
from ._backend import Backend
from ._protocol import APIError, bad, parse_chat, parse_completion, parse_embedding

#: The largest request body read, in bytes (a 413 past it).
MAX_BODY = 8 << 20
#: The most inputs one /v1/embeddings request may hold (OpenAI's limit).
MAX_EMBED_INPUTS = 2048


def _error(e: APIError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status, headers=e.headers)


async def _json(request: Request) -> Dict[str, Any]:
    size = 0
    chunks = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise APIError(413, f"the request body is over {MAX_BODY} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise APIError(400, f"the request body is not valid JSON: {e}") from None
    except RecursionError:
        raise APIError(400, "the request body is not valid JSON: it nests arrays or objects "
                            "too deeply") from None
    if not isinstance(body, dict):
        raise APIError(400, "the request body must be a JSON object")
    _check_text(body)
    return body


def _check_text(body: Dict[str, Any]) -> None:
    """JSON's \\uD800-\\uDFFF escapes can spell a lone surrogate, which json.loads
    accepts and no tokenizer (nor the error response naming it) can encode: a 400
    naming the field, not a 500 later."""
    def text(s: str) -> bool:
        try:
            s.encode("utf-8")
            return True
        except UnicodeEncodeError:
            return False

    def fail(where: str, key: bool = False) -> APIError:
        what = (f"a key of '{where}'" if where else "a key of the request body") if key \
            else f"'{where}'"
        return APIError(400, f"{what} holds a lone UTF-16 surrogate (\\uD800-\\uDFFF), "
                             "which is not text",
                        param=where.split(".")[0].split("[")[0] or None)

    todo = [(body, "")]
    while todo:
        value, where = todo.pop()
        if isinstance(value, str) and not text(value):
            raise fail(where)
        if isinstance(value, dict):
            for k, v in value.items():
                if not text(k):
                    raise fail(where, key=True)
                todo.append((v, f"{where}.{k}" if where else k))
        elif isinstance(value, list):
            todo.extend((v, f"{where}[{i}]") for i, v in enumerate(value))


def _disconnected(request: Request):
    async def wait() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return
    return wait


def create_app(backend: Backend, *, api_key: Optional[str] = None, max_queue: int = 256):
    """The ASGI app of `tfc serve` on ``backend``: OpenAI's /v1 routes, /health and
    /metrics. ``api_key``: required as ``Authorization: Bearer KEY`` on every route
    but /health."""
    server = Server(backend, api_key=api_key, max_queue=max_queue)

    def handler(route: str):
        """Wraps a route: errors in OpenAI's shape, the request counter."""
        def wrap(fn):
            async def endpoint(request: Request) -> Response:
                try:
                    response = await fn(request)
                except APIError as e:
                    response = _error(e)
                except InvalidArgument as e:
                    response = _error(bad(None, str(e)))
                except Error as e:
                    response = _error(APIError(500, str(e), type="server_error"))
                server.metrics.requests.labels(route, str(response.status_code)).inc()
                return response
            return endpoint
        return wrap

    def sse_response(choices, chunk, sampling, n_prompt: int, arrived: float) -> Response:
        """The streamed answer (Server.stream), observed in the metrics when it ends."""
        async def body():
            try:
                async for part in server.stream(choices, chunk,
                                                lambda: usage_of(n_prompt, choices), sampling):
                    yield part
            finally:
                server.observe(choices, arrived, n_prompt)

        return StreamingResponse(body(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    @handler("/health")
    async def health(request: Request) -> Response:
        if server.draining:
            return JSONResponse({"status": "shutting down"}, status_code=503)
        return JSONResponse({"status": "ok", "model": backend.name})

    @handler("/metrics")
    async def metrics(request: Request) -> Response:
        return Response(server.metrics.render(),
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    def model_card() -> Dict[str, Any]:
        return {"id": backend.name, "object": "model", "created": server.created,
                "owned_by": "tfc", "max_model_len": backend.context}

    @handler("/v1/models")
    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [model_card()]})

    @handler("/v1/models/{model}")
    async def model(request: Request) -> Response:
        server.check_model(request.path_params["model"])
        return JSONResponse(model_card())

    @handler("/v1/completions")
    async def completions(request: Request) -> Response:
        arrived = time.perf_counter()
        body = await _json(request)
        req = parse_completion(body)
        server.check_model(req.model)
        server.check_kind("/v1/completions", ("generate", "translate"))
        prompts = [backend.encode_prompt(p) if isinstance(p, str) else list(p)
                   for p in req.prompts]
        logits = [o for o in backend.model.outputs if o.name == "logits"]
        vocab = logits[0].shape[-1] if logits and backend.kind == "generate" else None
        for i, ids in enumerate(prompts):
            if isinstance(vocab, int) and any(not 0 <= t < vocab for t in ids):
                raise bad("prompt", f"prompt {i} holds a token id outside [0, {vocab})")
        max_news = [server.max_new(len(ids), req.sampling, "prompt") for ids in prompts]
        choices = server.submit(prompts, req.sampling, max_news)
        n_prompt = sum(len(p) for p in prompts)
        rid, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())

        def logprobs(entries):
            return {"tokens": [e["token"] for e in entries],
                    "token_logprobs": [e["logprob"] for e in entries],
                    "top_logprobs": None, "text_offset": []}

        if req.sampling.stream:
            def chunk(c, text, entries, finish, first):
                return {"id": rid, "object": "text_completion", "created": created,
                        "model": backend.name,
                        "choices": [{"index": c.index, "text": text,
                                     "logprobs": logprobs(entries) if req.sampling.logprobs
                                     else None, "finish_reason": finish}]}

            return sse_response(choices, chunk, req.sampling, n_prompt, arrived)
        try:
            await server.complete(choices, _disconnected(request))
        finally:
            server.observe(choices, arrived, n_prompt)
        return JSONResponse({
            "id": rid, "object": "text_completion", "created": created, "model": backend.name,
            "choices": [{"index": c.index, "text": c.detok.text,
                         "logprobs": logprobs(c.logprobs) if req.sampling.logprobs else None,
                         "finish_reason": c.finish_reason} for c in choices],
            "usage": usage_of(n_prompt, choices)})

    @handler("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        arrived = time.perf_counter()
        body = await _json(request)
        req = parse_chat(body)
        server.check_model(req.model)
        server.check_kind("/v1/chat/completions", ("generate",))
        if backend.chat_template is None:
            raise bad("messages", f"model '{backend.name}' has no chat template "
                                  f"(tokenizer_config.json's chat_template): use "
                                  f"/v1/completions")
        try:
            ids = backend.helper.chat_ids(req.messages)
        except InvalidArgument as e:
            raise bad("messages", str(e)) from None
        max_new = server.max_new(len(ids), req.sampling, "messages")
        choices = server.submit([ids], req.sampling, [max_new])
        rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

        if req.sampling.stream:
            def chunk(c, text, entries, finish, first):
                delta: Dict[str, Any] = {"role": "assistant"} if first else {}
                if text or (first and not finish):
                    delta["content"] = text
                return {"id": rid, "object": "chat.completion.chunk", "created": created,
                        "model": backend.name,
                        "choices": [{"index": c.index, "delta": delta,
                                     "logprobs": {"content": entries}
                                     if req.sampling.logprobs else None,
                                     "finish_reason": finish}]}

            return sse_response(choices, chunk, req.sampling, len(ids), arrived)
        try:
            await server.complete(choices, _disconnected(request))
        finally:
            server.observe(choices, arrived, len(ids))
        return JSONResponse({
            "id": rid, "object": "chat.completion", "created": created, "model": backend.name,
            "choices": [{"index": c.index,
                         "message": {"role": "assistant", "content": c.detok.text},
                         "logprobs": {"content": c.logprobs} if req.sampling.logprobs else None,
                         "finish_reason": c.finish_reason} for c in choices],
            "usage": usage_of(len(ids), choices)})

    @handler("/v1/embeddings")
    async def embeddings(request: Request) -> Response:
        body = await _json(request)
        req = parse_embedding(body)
        server.check_model(req.model)
        server.check_kind("/v1/embeddings", ("embed",))
        if len(req.inputs) > MAX_EMBED_INPUTS:
            raise bad("input", f"'input' holds {len(req.inputs)} texts; at most "
                               f"{MAX_EMBED_INPUTS} per request")
        dims = body.get("dimensions")
        width = backend.model.outputs[0].shape[-1]
        if dims is not None and dims != width:
            raise bad("dimensions", f"'dimensions' must be this model's {width} (tfc does not "
                                    f"shorten embeddings), got {dims!r}")
        rows = backend.tokenizer.encode(req.inputs)
        for i, (ids, _) in enumerate(rows):
            if len(ids) > backend.max_input:
                raise APIError(400, f"This model's maximum input length is {backend.max_input}"
                                    f" tokens. However, input {i} has {len(ids)} tokens.",
                               param="input", code="context_length_exceeded")
        if server.draining:
            raise APIError(503, "the server is shutting down", type="server_error")
        if server.embed_waiting >= server.max_queue:
            raise APIError(429, f"the server's queue is full ({server.max_queue} requests "
                                f"waiting); retry after 1 s", type="rate_limit_error",
                           code="queue_full", headers={"Retry-After": "1"})
        server.embed_waiting += 1
        entered = False
        try:
            async with server.embed_lock:  # one encoder session: one batch at a time
                server.embed_waiting -= 1
                entered = True
                vectors = await asyncio.get_running_loop().run_in_executor(
                    None, backend.embed, req.inputs)
        finally:
            if not entered:  # cancelled while waiting
                server.embed_waiting -= 1
        tokens = sum(len(ids) for ids, _ in rows)
        server.metrics.prompt_tokens.inc(tokens)
        return JSONResponse(embeddings_body(server, req, vectors, tokens))

    async def not_found(request: Request, exc: HTTPException) -> Response:
        status = exc.status_code
        message = (f"no route {request.method} {request.url.path}" if status in (404, 405)
                   else str(exc.detail))
        return _error(APIError(status, message))

    async def auth(scope, receive, send, app):
        if scope["type"] == "http" and api_key and scope["path"] != "/health":
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
                response = _error(APIError(401, "Incorrect API key provided: send "
                                                "'Authorization: Bearer KEY'",
                                           type="authentication_error",
                                           code="invalid_api_key"))
                server.metrics.requests.labels(scope["path"], "401").inc()
                await response(scope, receive, send)
                return
        await app(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        server.draining = True  # uvicorn has stopped accepting: cancel what still runs
        backend.close()

    routes = [Route("/health", health), Route("/metrics", metrics), Route("/v1/models", models),
              Route("/v1/models/{model:path}", model),
              Route("/v1/completions", completions, methods=["POST"]),
              Route("/v1/chat/completions", chat, methods=["POST"]),
              Route("/v1/embeddings", embeddings, methods=["POST"])]
    app = Starlette(routes=routes, exception_handlers={HTTPException: not_found},
                    lifespan=lifespan)

    async def asgi(scope, receive, send):  # the API key check, in front of every route
        await auth(scope, receive, send, app)

    asgi.server = server  # type: ignore[attr-defined]
    return asgi  # type: ignore[return-value]
