"""tfc.Model and tfc.Session: compiling, loading, running and generating.

The names follow ONNX Runtime and CTranslate2: a Model is an immutable compiled
model (model.bin, memory-mapped), shared by any number of Sessions on any number of
threads; a Session holds the arena and KV cache one caller uses (``run`` for the
outputs, ``generate`` for the decoding loop, ``generate_tokens`` to stream it).
The native module (tfc._tfc) releases the GIL while libtfrun works.
"""
from __future__ import annotations

import dataclasses
import math
import os
import queue
import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _tfc
from ._compiler import PathLike, run_compiler
from ._errors import BY_CODE, InvalidArgument, warn_non_finite

_tfc._set_error_classes(BY_CODE)

ArrayLike = Union[np.ndarray, Sequence]


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """An input's or output's signature, like ONNX Runtime's NodeArg.

    ``shape`` holds an int for a constant dim and the dim's name (``"batch"``,
    ``"src_len"``) for a symbolic one; ``max_shape`` the declared maxima. ``default``
    says how the runtime makes an optional input that is not given (``"zeros like
    input_ids"``), and is None for a required input and for outputs.
    """

    name: str
    dtype: np.dtype
    shape: Tuple[Union[int, str], ...]
    max_shape: Tuple[int, ...]
    default: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Generation:
    """One generated sequence: its new token ids (no bos or prompt, no eos) and its
    score (docs/generation.md: the sum of log-probabilities; beam search, the
    length-normalized one)."""

    ids: List[int]
    score: float


@dataclasses.dataclass(frozen=True)
class GenerationStep:
    """One streamed token (Session.generate_tokens): batch item ``batch_index``'s
    ``step``-th new token and its log-probability (NaN with beam search, which streams
    each item's final tokens once the item is finished)."""

    batch_index: int
    step: int
    token_id: int
    log_prob: float


def _info(raw, dtype) -> TensorInfo:
    name, dims, max_dims, dim_names, default = raw
    shape = tuple(dim_names[i] if dims[i] < 0 else int(dims[i]) for i in range(len(dims)))
    return TensorInfo(name, np.dtype(dtype), shape, tuple(int(d) for d in max_dims),
                      default or None)


def _parse_device(device: str) -> Tuple[int, int]:
    if not isinstance(device, str):
        raise InvalidArgument(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if device == "cpu":
        return 0, 0
    if device == "cuda":
        return 1, 0
    if device.startswith("cuda:") and device[5:].isdigit():
        return 1, int(device[5:])
    raise InvalidArgument(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")


class Model:
    """A compiled model: ``tfc.compile(...)`` or ``tfc.load("model.bin")``.

    Immutable and thread-safe: one Model may back many Sessions on many threads.
    """

    def __init__(self, native: "_tfc.Model", path: Path, report: Optional[str] = None,
                 warnings: Optional[list] = None) -> None:
        self._native = native
        self._path = path
        self._report = report
        #: The compiler's warnings ({file, line, column, kind, message}), when compiled here.
        self.warnings = list(warnings or [])

    @property
    def name(self) -> str:
        """The model's name (the description's ``name:``)."""
        return self._native.name

    @property
    def path(self) -> Path:
        """The model.bin this model maps (a temporary file for a model compiled here)."""
        return self._path

    @property
    def inputs(self) -> List[TensorInfo]:
        """The inputs: token ids, int64 (int32 is accepted too)."""
        return [_info(r, np.int64) for r in self._native.inputs]

    @property
    def outputs(self) -> List[TensorInfo]:
        """The outputs, float32."""
        return [_info(r, np.float32) for r in self._native.outputs]

    @property
    def can_generate(self) -> bool:
        """Whether the model has generation entry points (a decoder)."""
        return self._native.can_generate

    @property
    def generation_info(self) -> Dict[str, int]:
        """The special ids and KV-cache length compiled in: bos_id, eos_id, pad_id,
        max_len (-1 where none)."""
        bos, eos, pad, max_len = self._native.generation_info
        return {"bos_id": bos, "eos_id": eos, "pad_id": pad, "max_len": max_len}

    def save(self, path: PathLike) -> None:
        """Writes the model.bin to |path| (load it back with tfc.load)."""
        dst = Path(os.fspath(path))
        if dst.resolve() != self._path.resolve():
            shutil.copyfile(self._path, dst)

    def report(self) -> str:
        """The fusion and memory report: ``tfc compile --report``'s text for a model
        compiled in this process; for a loaded model.bin (which does not keep the fusion
        report) the memory figures the runtime knows."""
        if self._report is not None:
            return self._report
        mem = self.session(threads=1)._native.memory_info()
        return (f"== tfc memory report ({self.name}) ==\n"
                f"  fusion: not recorded in model.bin (tfc compile --report, or tfc.compile)\n"
                f"  weights: {mem['weights_bytes']} bytes\n"
                f"  arena at the declared maximum dims: {mem['declared_arena_bytes']} bytes\n"
                f"  kv cache at the declared maxima: {mem['declared_kv_cache_bytes']} bytes\n")

    def session(self, threads: Optional[int] = None, device: str = "cpu") -> "Session":
        """A new Session on this model. ``threads``: CPU threads (None: the OpenMP
        default); ``device``: "cpu", "cuda" or "cuda:N"."""
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise InvalidArgument(f"threads must be a positive int or None, got {threads!r}")
        dev, dev_id = _parse_device(device)
        return Session(self, _tfc.Session(self._native, threads or 0, dev, dev_id))

    def __repr__(self) -> str:
        return (f"tfc.Model({self.name!r}, inputs={[i.name for i in self.inputs]}, "
                f"outputs={[o.name for o in self.outputs]})")


def _inputs(inputs: Mapping[str, ArrayLike]) -> list:
    """Checks and converts the inputs; int64/int32 C-contiguous arrays pass without a copy."""
    if not isinstance(inputs, Mapping):
        raise InvalidArgument(f"inputs must be a dict of input names to arrays, "
                              f"got {type(inputs).__name__}")
    out = []
    for name, value in inputs.items():
        a = np.asarray(value)
        if a.dtype not in (np.int64, np.int32):
            if a.dtype.kind not in "iu":
                raise InvalidArgument(f"input '{name}': token ids must be integers, "
                                      f"got {a.dtype}")
            a = a.astype(np.int64)  # other integer types; the runtime checks the range
        out.append((str(name), np.ascontiguousarray(a)))
    return out


class Session:
    """Runs a Model: ``run`` for its outputs, ``generate`` / ``generate_tokens`` for
    decoding. A session may be called from several threads (calls take turns); for
    parallel work give each thread its own session on the shared Model."""

    def __init__(self, model: Model, native: "_tfc.Session") -> None:
        self.model = model
        self._native = native

    @property
    def device(self) -> str:
        """The device and its kernel paths, e.g. "cpu (avx2, fma; ...)"."""
        return self._native.device

    def memory_info(self) -> Dict[str, int]:
        """Bytes: weights, largest arena and KV cache so far, both at the declared maxima."""
        return self._native.memory_info()

    def run(self, inputs: Mapping[str, ArrayLike]) -> Dict[str, np.ndarray]:
        """Runs the model: ``{"src": ids, ...}`` (int64 or int32 ``[batch, seq]``) to
        ``{output name: float32 array}``. Optional inputs may be left out (see
        ``TensorInfo.default``). The GIL is released while the model runs."""
        outputs = self._native.run(_inputs(inputs))
        for name, value in outputs.items():
            warn_non_finite(name, value)
        return outputs

    @staticmethod
    def _options(beam, max_len, length_penalty, sample, temperature, top_k, top_p, seed,
                 repetition_penalty=1.0, min_p=0.0):
        if max_len is not None and (not isinstance(max_len, int) or max_len < 1):
            raise InvalidArgument(f"max_len must be a positive int or None, got {max_len!r}")
        if not isinstance(beam, int) or beam < 1:
            # (The C API's 0, "the model's num_beams", is not exposed: beam=1 is greedy.)
            raise InvalidArgument(f"beam must be an int of at least 1, got {beam!r}")
        if not isinstance(seed, int) or seed < 0:
            raise InvalidArgument(f"seed must be a non-negative int, got {seed!r}")
        # The C API reads -1 and NaN as "the model's"; Python passes its own values.
        if int(top_k) < 0:
            raise InvalidArgument(f"top_k must be at least 0 (0 = off), got {int(top_k)}")
        if math.isnan(float(top_p)):
            raise InvalidArgument(f"top_p must be in (0, 1], got {float(top_p)}")
        if math.isnan(float(temperature)):
            raise InvalidArgument(f"temperature must be a number, got {float(temperature)}")
        if math.isnan(float(min_p)):
            raise InvalidArgument(f"min_p must be in [0, 1], got {float(min_p)}")
        if math.isnan(float(length_penalty)):
            raise InvalidArgument(f"length_penalty must be finite, got {float(length_penalty)}")
        if math.isnan(float(repetition_penalty)):
            raise InvalidArgument(f"repetition_penalty must be positive, got "
                                  f"{float(repetition_penalty)}")
        return (beam, max_len or 0, float(length_penalty), bool(sample), float(temperature),
                int(top_k), float(top_p), seed, float(repetition_penalty), float(min_p))

    def generate(self, inputs: Mapping[str, ArrayLike], beam: int = 1,
                 max_len: Optional[int] = None, length_penalty: float = 1.0,
                 sample: bool = False, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0, repetition_penalty: float = 1.0,
                 min_p: float = 0.0) -> List[Generation]:
        """Runs the decoding loop (docs/generation.md) on ``inputs``: the source ids
        (encoder-decoder) or the prompts (decoder-only), ``[batch, len]`` padded with
        pad_id. Returns one Generation per batch item. ``beam`` 1 is greedy search (or
        sampling with ``sample``); ``max_len`` counts new tokens, eos included (None: the
        model's, docs/generation.md "The model's defaults"). ``repetition_penalty``
        (transformers', > 0, 1 off; greedy and sampling) divides the logits of the
        tokens already in the sequence; ``min_p`` (sampling, [0, 1], 0 off) keeps the
        tokens at least that fraction as likely as the best. The GIL is released while
        it runs."""
        opts = self._options(beam, max_len, length_penalty, sample, temperature, top_k,
                             top_p, seed, repetition_penalty, min_p)
        out = [Generation(list(ids), float(score))
               for ids, score in self._native.generate(_inputs(inputs), *opts)]
        warn_non_finite("scores", [g.score for g in out])  # -inf: nothing left to choose
        return out

    def generate_tokens(self, inputs: Mapping[str, ArrayLike], beam: int = 1,
                        max_len: Optional[int] = None, length_penalty: float = 1.0,
                        sample: bool = False, temperature: float = 1.0, top_k: int = 0,
                        top_p: float = 1.0, seed: int = 0, repetition_penalty: float = 1.0,
                        min_p: float = 0.0) -> Iterator[GenerationStep]:
        """``generate`` as an iterator of GenerationStep, yielding each token as the
        decoding loop in libtfrun produces it (greedy search and sampling; beam search
        yields each item's tokens once the item is finished). The loop runs on a
        worker thread and feeds the iterator through the C API's token callback
        (tfrun_session_generate_stream); closing the iterator early (``break``) stops
        the generation."""
        opts = self._options(beam, max_len, length_penalty, sample, temperature, top_k,
                             top_p, seed, repetition_penalty, min_p)
        converted = _inputs(inputs)
        q: "queue.Queue" = queue.Queue()
        stop = threading.Event()
        done = object()

        def on_token(batch_index, step, token_id, log_prob):
            q.put(GenerationStep(batch_index, step, token_id, log_prob))
            return stop.is_set()

        def work():
            try:
                self._native.generate(converted, *opts, on_token)
                q.put(done)
            except BaseException as e:  # handed to the consumer, raised there
                q.put(e)

        worker = threading.Thread(target=work, name="tfc-generate", daemon=True)
        worker.start()
        try:
            while True:
                item = q.get()
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            worker.join()

    def __repr__(self) -> str:
        return f"tfc.Session({self.model.name!r}, device={self.device!r})"


def load(path: PathLike) -> Model:
    """Loads a model.bin (memory-mapped and fully validated)."""
    p = Path(os.fspath(path))
    return Model(_tfc.Model.load(str(p)), p)


def compile(source: PathLike, *, weights: Optional[PathLike] = None,
            set: Optional[Mapping[str, object]] = None, precision: str = "f32",
            fusion: bool = True, nonfinite_weights: str = "warn",
            activation_bits: Optional[int] = None) -> Model:
    """Compiles a model description (YAML) or a Hugging Face model directory.

    ``weights``: a safetensors file (overrides the description's ``weights:``);
    ``set``: parameter overrides, e.g. ``{"d_model": 64}`` (``tfc compile --set``);
    ``precision``: "f32", "bf16", "int8" or "int4"; ``fusion``: False compiles the unfused
    model; ``nonfinite_weights``: "warn" (a warning per weight holding NaN or inf, in
    ``Model.warnings``) or "error" (a CompileError; ``tfc compile --nonfinite-weights``);
    ``activation_bits``: 16 (the default) or 8, the bits each block of 32 linear inputs is
    quantized to at run time for "int8" with groups of scales (decoder-only models):
    8 is llama.cpp Q8_0's arithmetic, faster prefill on CPUs with AVX512_VNNI
    (``tfc compile --activation-bits``, docs/precision.md).
    Raises tfc.CompileError with the diagnostic's file, line and column.
    """
    if nonfinite_weights not in ("warn", "error"):
        raise InvalidArgument(f"nonfinite_weights must be 'warn' or 'error', "
                              f"got {nonfinite_weights!r}")
    extra = [f"--nonfinite-weights={nonfinite_weights}"]
    if activation_bits is not None:
        if activation_bits not in (8, 16) or isinstance(activation_bits, bool):
            raise InvalidArgument(f"activation_bits must be 8 or 16, got {activation_bits!r}")
        extra.append(f"--activation-bits={activation_bits}")
    return _compile(source, weights=weights, set=set, precision=precision, fusion=fusion,
                    _extra=extra)


def _compile(source: PathLike, *, weights: Optional[PathLike] = None,
             set: Optional[Mapping[str, object]] = None, precision: str = "f32",
             fusion: bool = True, _extra: Sequence[str] = ()) -> Model:
    """compile() with more compiler flags (_extra, e.g. the text helpers' --head)."""
    tmp = Path(tempfile.mkdtemp(prefix="tfc-"))
    try:
        out = tmp / "model.bin"
        report, warnings = run_compiler(source, out, weights=weights, set=set,
                                        precision=precision, fusion=fusion, extra=_extra)
        model = Model(_tfc.Model.load(str(out)), out, report, warnings)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # The model.bin lives as long as the Model (Model.save copies it).
    weakref.finalize(model, shutil.rmtree, str(tmp), True)
    return model
