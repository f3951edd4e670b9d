"""What `tfc serve` serves: one model, compiled once and cached, behind the text
helpers (tfc.Generator, tfc.Translator, tfc.Encoder) and one tfc.Engine.

A Hugging Face directory is compiled on first use into the compile cache
(``$TFC_CACHE_DIR``, else ``$XDG_CACHE_HOME/tfc``, else ``~/.cache/tfc``). The key
covers the compiler (its size and mtime), the package version, the directory's
model files (name, size, mtime) and the compile options, so an edited checkpoint
or a new tfc compiles again. The model.bin is written under a temporary name and
renamed into place, so two servers starting at once never read half a file.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from .._compiler import compiler_path
from .._errors import InvalidArgument
from .._model import _compile
from ..text import _DECODER_TYPES, _SEQ2SEQ, _read_json, _tokenizer

#: The files of a Hugging Face directory that change what tfc compiles.
_MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors",
                "model.safetensors.index.json", "tokenizer_config.json")


def cache_dir() -> Path:
    env = os.environ.get("TFC_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tfc"


def _stat(p: Path) -> List[Any]:
    st = p.stat()
    return [p.name, st.st_size, st.st_mtime_ns]


def cached_compile(directory: Path, precision: str, compile_set: Optional[dict],
                   extra: List[str], refresh: bool = False) -> Path:
    """The model.bin of ``tfc compile DIRECTORY`` with these options, from the cache
    or compiled into it now (``refresh``: compiled now whatever the cache holds)."""
    from .. import __version__

    directory = directory.resolve()
    files = sorted(p for p in directory.iterdir()
                   if p.name in _MODEL_FILES or p.suffix == ".safetensors")
    compiler = compiler_path()
    key = json.dumps({"tfc": __version__, "compiler": _stat(compiler) if compiler.exists()
                      else str(compiler), "dir": str(directory),
                      "files": [_stat(p) for p in files], "precision": precision,
                      "set": compile_set or {}, "extra": extra}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    root = cache_dir()
    out = root / f"{directory.name}-{precision}-{digest}.bin"
    if out.is_file() and not refresh:
        return out
    root.mkdir(parents=True, exist_ok=True)
    model = _compile(directory, precision=precision, set=compile_set, _extra=extra)
    fd, tmp = tempfile.mkstemp(prefix=out.name + ".", suffix=".tmp", dir=root)
    os.close(fd)
    try:
        model.save(tmp)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out


class Backend:
    """The served model: ``kind`` is "generate" (decoder-only), "translate"
    (encoder-decoder: the prompt is the source text) or "embed" (an encoder);
    ``helper`` the tfc text helper that tokenizes and runs it; ``engine`` the
    tfc.Engine of the generating kinds."""

    def __init__(self, model: str, *, tokenizer: Optional[str] = None, name: Optional[str] = None,
                 precision: str = "f32", threads: Optional[int] = None, device: str = "cpu",
                 engine_options: Optional[Dict[str, Any]] = None, head: Optional[str] = None,
                 src_lang: Optional[str] = None, tgt_lang: Optional[str] = None,
                 prefix: Optional[str] = None, cache: bool = True,
                 max_model_len: Optional[int] = None) -> None:
        from .. import Encoder, Generator, Translator

        path = Path(model)
        if path.is_dir():
            tok_dir = Path(tokenizer) if tokenizer else path
        elif path.is_file():
            if not tokenizer:
                raise InvalidArgument(f"'{path}' is a model.bin: give the Hugging Face directory "
                                      f"with its tokenizer and config.json as --tokenizer DIR")
            tok_dir = Path(tokenizer)
        else:
            raise InvalidArgument(f"'{path}' is neither a Hugging Face model directory nor a "
                                  f"model.bin")
        if not (tok_dir / "config.json").is_file():
            raise InvalidArgument(f"'{tok_dir}' has no config.json")
        config = _read_json(tok_dir / "config.json")
        family = config.get("model_type")
        self.kind = ("generate" if family in _DECODER_TYPES else
                     "translate" if family in _SEQ2SEQ else "embed")
        self.name = name or (path.name if path.is_dir() else path.stem)
        self.generation_config = _read_json(tok_dir / "generation_config.json")

        compile_set: Dict[str, Any] = {}
        extra: List[str] = []
        if self.kind == "translate" and family == "mbart":
            if not src_lang or not tgt_lang:
                raise InvalidArgument("mBART needs --src-lang and --tgt-lang, e.g. en_XX de_DE")
            code = _tokenizer(tok_dir).token_id(tgt_lang)
            if code is None:
                raise InvalidArgument(f"--tgt-lang {tgt_lang!r} is not a token of the tokenizer")
            compile_set["forced_bos_id"] = code
        if self.kind == "embed" and head:
            extra.append(f"--head={head}")
        if max_model_len is not None:
            if not path.is_dir():
                raise InvalidArgument(f"--max-model-len sets the context a directory is "
                                      f"compiled for; '{path}' is a model.bin, compiled "
                                      f"already (tfc compile DIR --set max_len=N)")
            if isinstance(max_model_len, bool) or not isinstance(max_model_len, int) or \
                    max_model_len < 1:
                raise InvalidArgument(f"--max-model-len must be a positive integer, got "
                                      f"{max_model_len!r}")
            compile_set["max_len"] = max_model_len
        if path.is_dir() and (cache or compile_set):
            # Without the cache, a directory with --set values is compiled afresh into it.
            source: Path = cached_compile(path, precision, compile_set, extra, refresh=not cache)
        else:
            source = path  # a model.bin, or a directory compiled afresh by the helper
        engine = dict(engine_options or {})
        common = dict(threads=threads, device=device)
        if source.is_dir():  # compiled by the helper, afresh (--no-cache)
            common["precision"] = precision
        tok = None if source.is_dir() else str(tok_dir)
        if self.kind == "generate":
            self.helper = Generator(source, tokenizer=tok, engine=engine or True, **common)
        elif self.kind == "translate":
            self.helper = Translator(source, tokenizer=tok, engine=engine or True,
                                     src_lang=src_lang, tgt_lang=tgt_lang, prefix=prefix,
                                     **common)
        else:
            self.helper = Encoder(source, tokenizer=tok, head=None if source != path else head,
                                  **common)
        self.model = self.helper.model
        self.engine = getattr(self.helper, "engine", None)
        self.tokenizer = self.helper.tokenizer
        self.chat_template = getattr(self.helper, "chat_template", None)
        self.input_name = self.model.inputs[0].name
        self.input_names = [i.name for i in self.model.inputs]
        #: The longest source (translate, embed) or prompt + completion (generate).
        self.max_input = self.model.inputs[0].max_shape[1]
        info = self.model.generation_info if self.model.can_generate else {}
        self.max_len = int(info.get("max_len", -1))
        self.eos_id = int(info.get("eos_id", -1))
        #: The context of /v1/models' max_model_len: the KV cache for decoders.
        self.context = self.max_len if self.kind == "generate" else self.max_input

    def defaults(self) -> Dict[str, Any]:
        """The generation options a request leaves out, from generation_config.json as
        transformers' generate() reads them: greedy unless ``do_sample``, and the
        model's num_beams for translation."""
        g = self.generation_config
        out: Dict[str, Any] = {"sample": bool(g.get("do_sample", False)),
                               "temperature": float(g.get("temperature") or 1.0),
                               "top_k": int(g.get("top_k") or 0),
                               "top_p": float(g.get("top_p") or 1.0), "beam": 1}
        if self.kind == "translate":
            out["beam"] = int(g.get("num_beams") or 1)
        return out

    def encode_prompt(self, text: str) -> List[int]:
        """A completion prompt's ids: the text with the tokenizer's special tokens (a
        decoder's bos), or for translation the source as tfc.Translator encodes it."""
        if self.kind == "translate":
            return self.helper._encode([text])[0]
        return self.tokenizer.encode([text])[0][0]

    def feed(self, ids: List[int]) -> Dict[str, Any]:
        import numpy as np

        row = np.asarray([ids], dtype=np.int64)
        feed = {self.input_name: row}
        if "attention_mask" in self.input_names:
            feed["attention_mask"] = np.ones_like(row)
        return feed

    def embed(self, texts: List[str]):
        """Normalized sentence embeddings, as tfc.Encoder.embed gives them."""
        return self.helper.embed(texts, normalize=True)

    def close(self) -> None:
        """Cancels every request the engine still runs."""
        if self.engine is not None:
            for r in list(self.engine._live):
                try:
                    r.cancel()
                except Exception:
                    pass
