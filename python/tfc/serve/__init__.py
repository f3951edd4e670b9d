"""`tfc serve`: an OpenAI-compatible HTTP server on one tfc.Engine (docs/serving.md).

    tfc serve MODEL_DIR --host 127.0.0.1 --port 8000       # pip install tfc[serve]

``create_app(Backend(...))`` gives the ASGI app itself, for embedding in another
ASGI server or a Ray Serve deployment (tfc.ray).
"""
from ._backend import Backend, cache_dir, cached_compile

__all__ = ["Backend", "create_app", "cache_dir", "cached_compile", "main"]


def create_app(backend, **options):
    """The ASGI app of `tfc serve` on a Backend (``api_key``, ``max_queue``). Imported
    here on first use, so that `import tfc.serve` works without the [serve] extra."""
    from ._routes import create_app as _create_app
    return _create_app(backend, **options)


def main(argv=None) -> int:
    from .__main__ import main as _main
    return _main(argv)
