"""tfc: a compiler for Transformer inference, from Python (docs/python.md).

    import tfc
    model = tfc.compile("models/tutorial-simple.yaml", set={"d_model": 32})
    session = model.session(threads=2)
    logits = session.run({"tokens": ids})["logits"]

``tfc.compile`` runs the tfc compiler bundled with the package; ``tfc.load`` maps a
model.bin; ``Model.session`` gives a Session (``run``, ``generate``,
``generate_tokens``); ``Engine`` serves many generation requests at once (continuous
batching: ``submit``, ``await generate``, ``async for ... in stream``). The text helpers ``Translator``, ``Encoder`` and ``Generator``
add a Hugging Face directory's tokenizer (pip install tfc[text]).
"""
from ._errors import (Busy, Cancelled, CompileError, Error, Internal, InvalidArgument,
                      InvalidModel, IoError, NonFinite, NonFiniteWarning, OutOfMemory,
                      Unsupported)
from ._model import (Generation, GenerationStep, Model, Session, TensorInfo, compile, load)
from ._engine import AsyncRequest, Engine, Request
from . import _tfc

__all__ = [
    "compile", "load", "Model", "Session", "TensorInfo", "Generation", "GenerationStep",
    "Engine", "Request", "AsyncRequest",
    "Error", "CompileError", "InvalidArgument", "InvalidModel", "Unsupported", "IoError",
    "OutOfMemory", "Internal", "NonFinite", "NonFiniteWarning", "Cancelled", "Busy",
    "cuda_device_count", "Translator", "Encoder", "Generator",
    "API_VERSION", "__version__",
]

try:
    from importlib.metadata import version as _version

    #: The package's version: the CMake project's (CMakeLists.txt).
    __version__: str = _version("tfc")
except Exception:  # not installed as a distribution
    __version__ = "unknown"

#: The C API version of the bundled libtfrun (TFRUN_API_VERSION).
API_VERSION: int = _tfc.API_VERSION


def cuda_device_count() -> int:
    """CUDA devices the bundled libtfrun can use (0 without CUDA, a driver or a GPU)."""
    return _tfc.cuda_device_count()


def __getattr__(name):
    # The text helpers import tokenizers / sentencepiece lazily: `import tfc` needs numpy only.
    if name in ("Translator", "Encoder", "Generator"):
        from . import text
        return getattr(text, name)
    raise AttributeError(f"module 'tfc' has no attribute {name!r}")
