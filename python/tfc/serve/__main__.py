"""The command line of `tfc serve` (``python -m tfc.serve``; the `tfc` command of
the package and of the CMake build both hand `tfc serve ...` to it)."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import List, Optional


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tfc serve",
        description="Serve a model over HTTP with OpenAI's API: /v1/chat/completions, "
                    "/v1/completions, /v1/embeddings, /v1/models, plus /health and "
                    "/metrics (docs/serving.md).")
    p.add_argument("model", metavar="MODEL",
                   help="a Hugging Face model directory (compiled once, then cached) or a "
                        "model.bin (with --tokenizer DIR)")
    p.add_argument("--tokenizer", metavar="DIR",
                   help="the Hugging Face directory with the tokenizer and config.json "
                        "(default: MODEL when it is a directory)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--api-key", default=None,
                   help="require 'Authorization: Bearer KEY' on every route but /health "
                        "(default: $TFC_API_KEY; none when unset)")
    p.add_argument("--served-model-name", default=None,
                   help="the model's id in the API (default: MODEL's folder or file name)")
    p.add_argument("--precision", default="f32", choices=("f32", "bf16", "int8", "int4"),
                   help="compile a directory at this precision (default f32)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all)")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    p.add_argument("--max-model-len", type=int, default=None, metavar="N",
                   help="the context a directory is compiled for: prompt plus completion "
                        "tokens (tfc compile --set max_len=N; vLLM's flag). Default: "
                        "config.json's max_position_embeddings (a LongRoPE model's "
                        "original_max_position_embeddings)")
    p.add_argument("--max-queue", type=int, default=256,
                   help="requests that may wait before new ones get 429 (default 256)")
    p.add_argument("--max-rows", type=int, default=None,
                   help="rows the engine runs per step (default: the model's max_batch)")
    p.add_argument("--kv-cache-mb", type=float, default=None,
                   help="the paged KV cache's size in MiB (default: every row at max_len, "
                        "at most 1 GiB)")
    p.add_argument("--kv-block-size", type=int, default=None,
                   help="positions per KV block (default 16)")
    p.add_argument("--max-batch-tokens", type=int, default=None,
                   help="prompt tokens prefilled per step (default 2048)")
    p.add_argument("--no-prefix-caching", action="store_true",
                   help="prefill every prompt in full (default: a decoder-only model's "
                        "prompt starts from the KV blocks of an earlier prompt's same "
                        "leading tokens)")
    p.add_argument("--head", default=None,
                   help="an encoder's output head (docs/hf.md), e.g. mean_pooling")
    p.add_argument("--src-lang", default=None, help="mBART's source language code")
    p.add_argument("--tgt-lang", default=None, help="mBART's target language code")
    p.add_argument("--prefix", default=None, help="T5's task prefix")
    p.add_argument("--no-cache", action="store_true",
                   help="compile a directory afresh instead of through the compile cache "
                        "($TFC_CACHE_DIR, default ~/.cache/tfc)")
    p.add_argument("--shutdown-timeout", type=float, default=30.0,
                   help="on SIGTERM, seconds to let running requests finish before they "
                        "are cancelled (default 30)")
    p.add_argument("--log-level", default="info",
                   choices=("critical", "error", "warning", "info", "debug"))
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        import uvicorn
        import starlette  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError as e:
        print(f"tfc serve: {e.name} is missing: pip install 'tfc[serve]'", file=sys.stderr)
        return 1
    from .._errors import Error
    from ._backend import Backend
    from ._routes import create_app

    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s: %(message)s")
    for name, value in (("--port", args.port), ("--max-queue", args.max_queue)):
        if value is not None and value < (0 if name == "--port" else 1):
            print(f"tfc serve: {name} must be positive, got {value}", file=sys.stderr)
            return 1
    engine = {k: v for k, v in (("max_queue", args.max_queue), ("max_rows", args.max_rows),
                                ("kv_cache_mb", args.kv_cache_mb),
                                ("kv_block_size", args.kv_block_size),
                                ("max_batch_tokens", args.max_batch_tokens))
              if v is not None}
    if args.no_prefix_caching:
        engine["prefix_caching"] = False
    try:
        backend = Backend(args.model, tokenizer=args.tokenizer, name=args.served_model_name,
                          precision=args.precision, threads=args.threads, device=args.device,
                          engine_options=engine, head=args.head, src_lang=args.src_lang,
                          tgt_lang=args.tgt_lang, prefix=args.prefix, cache=not args.no_cache,
                          max_model_len=args.max_model_len)
    except (Error, OSError) as e:
        print(f"tfc serve: {e}", file=sys.stderr)
        return 1
    api_key = args.api_key if args.api_key is not None else os.environ.get("TFC_API_KEY") or None
    app = create_app(backend, api_key=api_key, max_queue=args.max_queue)
    logging.getLogger("tfc.serve").info(
        "serving '%s' (%s) on http://%s:%d%s", backend.name, backend.kind, args.host, args.port,
        " with an API key" if api_key else "")
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=args.shutdown_timeout, lifespan="on")
    server = uvicorn.Server(config)
    # uvicorn drains on SIGTERM / SIGINT, then raises the signal again once it has
    # restored the handlers it found: with these no-op ones there, a drained server
    # exits 0 (a supervisor reads a signal death as a crash).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.run()
    backend.close()
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main())
