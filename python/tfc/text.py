"""Text in, text out: tfc.Translator, tfc.Encoder and tfc.Generator.

A Hugging Face model directory brings its tokenizer; these helpers put it in front
of a compiled model and give the strings transformers gives for the same model and
settings (tests/python/text_test.py checks it on random-weight models):

- ``tokenizer.json`` is read with ``tokenizers`` (BERT, RoBERTa, DistilBERT, BART,
  mBART, T5, GPT-2), Marian's ``source.spm``/``target.spm`` + ``vocab.json`` and
  T5's ``spiece.model`` (when there is no tokenizer.json) with ``sentencepiece``;
- decoding follows transformers' ``batch_decode(ids, skip_special_tokens=True)``,
  its ``clean_up_tokenization_spaces`` setting included.

Inputs are batched: sorted by token length, padded with the pad id, at most
``batch_size`` texts a batch (and what the model's declared maximum batch allows),
with a tqdm progress bar when ``progress=True``; results come back in input order.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import (Any, Dict, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import numpy as np

from ._compiler import PathLike
from ._chat import ChatTemplate
from ._errors import InvalidArgument
from ._model import Model, Session, _compile as compile, load


# --- tokenizers ---------------------------------------------------------------------

def _read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _clean_up_tokenization(text: str) -> str:
    """transformers' PreTrainedTokenizerBase.clean_up_tokenization."""
    return (text.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",")
            .replace(" ' ", "'").replace(" n't", "n't").replace(" 'm", "'m")
            .replace(" 's", "'s").replace(" 've", "'ve").replace(" 're", "'re"))


class _JsonTokenizer:
    """tokenizer.json through `tokenizers`, as transformers' fast tokenizers use it."""

    def __init__(self, directory: Path) -> None:
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        # transformers sets truncation and padding per call; a call without them
        # turns off what tokenizer.json may have saved.
        self.tok.no_truncation()
        self.tok.no_padding()
        cfg = _read_json(directory / "tokenizer_config.json")
        cleanup = bool(cfg.get("clean_up_tokenization_spaces", False))
        if cleanup and type(self.tok.model).__name__ == "BPE" and not cfg.get(
                "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"):
            cleanup = False  # transformers skips it for BPE models
        self.cleanup = cleanup
        self.config = cfg

    def token_id(self, token: Optional[str]) -> Optional[int]:
        return None if token is None else self.tok.token_to_id(token)

    def language_codes(self) -> set:
        """The ids of the special tokens shaped like mBART's language codes (en_XX)."""
        return {i for i, t in self.tok.get_added_tokens_decoder().items()
                if t.special and re.fullmatch(r"[a-z]{2,3}_[A-Z]{2}", t.content)}

    def encode(self, texts: Sequence[str], add_special_tokens: bool = True
               ) -> List[Tuple[List[int], List[int]]]:
        """(ids, token type ids) per text, with the special tokens unless told not."""
        return [(e.ids, e.type_ids)
                for e in self.tok.encode_batch(list(texts), add_special_tokens=add_special_tokens)]

    def decode(self, ids: Sequence[int]) -> str:
        text = self.tok.decode(list(ids), skip_special_tokens=True)
        return _clean_up_tokenization(text) if self.cleanup else text


class _MarianTokenizer:
    """transformers' MarianTokenizer: sentencepiece pieces mapped through vocab.json,
    `</s>` appended; decoding skips the special tokens and joins the pieces with the
    source spm (the target one when the vocabularies are separate)."""

    def __init__(self, directory: Path) -> None:
        import sentencepiece as spm

        cfg = _read_json(directory / "tokenizer_config.json")
        self.separate = bool(cfg.get("separate_vocabs", False))
        self.encoder: Dict[str, int] = _read_json(directory / "vocab.json")
        if self.separate:
            target = _read_json(directory / "target_vocab.json")
            self.decoder = {v: k for k, v in target.items()}
        else:
            self.decoder = {v: k for k, v in self.encoder.items()}
        self.src = spm.SentencePieceProcessor(model_file=str(directory / "source.spm"))
        self.tgt = spm.SentencePieceProcessor(model_file=str(directory / "target.spm"))
        self.unk, self.eos, self.pad = (cfg.get("unk_token", "<unk>"), cfg.get("eos_token", "</s>"),
                                        cfg.get("pad_token", "<pad>"))
        if self.unk not in self.encoder:
            raise InvalidArgument(f"{directory / 'vocab.json'} has no '{self.unk}' token")
        self.special = {self.unk, self.eos, self.pad}
        self.special_ids = {self.encoder[t] for t in self.special if t in self.encoder}
        self.cleanup = bool(cfg.get("clean_up_tokenization_spaces", False))
        self.config = cfg

    def token_id(self, token: Optional[str]) -> Optional[int]:
        return None if token is None else self.encoder.get(token)

    def _tokenize(self, text: str) -> List[str]:
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:  # a >>lang<< code
            code, text = [text[:end + 2]], text[end + 2:]
        return code + self.src.encode(text, out_type=str)

    def encode(self, texts: Sequence[str]) -> List[Tuple[List[int], List[int]]]:
        unk = self.encoder[self.unk]
        out = []
        for t in texts:
            ids = [self.encoder.get(p, unk) for p in self._tokenize(t)] + [self.encoder[self.eos]]
            out.append((ids, [0] * len(ids)))
        return out

    def decode(self, ids: Sequence[int]) -> str:
        sp = self.tgt if self.separate else self.src
        pieces = []
        for i in ids:
            if i in self.special_ids:
                continue
            piece = self.decoder.get(i) or sp.IdToPiece(int(i)) or self.unk
            pieces.append(piece)
        text = sp.decode_pieces(pieces).replace("\u2581", " ").strip()
        return _clean_up_tokenization(text) if self.cleanup else text


class _SpmTokenizer:
    """T5's spiece.model without a tokenizer.json: sentencepiece ids, `</s>` appended."""

    def __init__(self, directory: Path) -> None:
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=str(directory / "spiece.model"))
        self.config = _read_json(directory / "tokenizer_config.json")
        self.cleanup = bool(self.config.get("clean_up_tokenization_spaces", False))
        self.special_ids = {i for i in (self.sp.pad_id(), self.sp.eos_id(), self.sp.unk_id())
                            if i >= 0}

    def token_id(self, token: Optional[str]) -> Optional[int]:
        if token is None:
            return None
        i = self.sp.PieceToId(token)
        return None if i == self.sp.unk_id() and token != self.sp.IdToPiece(i) else i

    def encode(self, texts: Sequence[str], add_special_tokens: bool = True
               ) -> List[Tuple[List[int], List[int]]]:
        eos = [self.sp.eos_id()] if add_special_tokens else []
        return [(ids + eos, [0] * (len(ids) + len(eos))) for ids in self.sp.encode(list(texts))]

    def decode(self, ids: Sequence[int]) -> str:
        text = self.sp.decode([int(i) for i in ids if i not in self.special_ids])
        return _clean_up_tokenization(text) if self.cleanup else text


def _tokenizer(directory: Path):
    """The tokenizer of a Hugging Face directory, by the files it has."""
    if (directory / "tokenizer.json").exists():
        return _JsonTokenizer(directory)
    if (directory / "source.spm").exists():
        return _MarianTokenizer(directory)
    if (directory / "spiece.model").exists():
        return _SpmTokenizer(directory)
    raise InvalidArgument(f"'{directory}' has no tokenizer: expected tokenizer.json, Marian's "
                          f"source.spm/target.spm + vocab.json, or spiece.model")


# --- shared plumbing -------------------------------------------------------------------

def _tokenizer_dir(dir_or_bin: PathLike, tokenizer: Optional[PathLike]) -> Path:
    """The directory with the tokenizer files and config.json: |tokenizer|, else the
    model directory itself."""
    path = Path(os.fspath(dir_or_bin))
    if path.is_dir():
        return Path(os.fspath(tokenizer)) if tokenizer is not None else path
    if path.suffix == ".bin" and path.is_file():
        if tokenizer is None:
            raise InvalidArgument(f"'{path}' is a model.bin: give the Hugging Face directory "
                                  f"with its tokenizer and config.json as tokenizer=DIR")
        return Path(os.fspath(tokenizer))
    raise InvalidArgument(f"'{path}' is neither a Hugging Face model directory nor a model.bin")


def _open(dir_or_bin: PathLike, tokenizer: Optional[PathLike], threads: Optional[int],
          device: str, compile_args: dict) -> Tuple[Model, Session, Path, dict]:
    """Compiles a Hugging Face directory (or loads a model.bin) and finds its tokenizer
    directory and config.json."""
    tok_dir = _tokenizer_dir(dir_or_bin, tokenizer)
    path = Path(os.fspath(dir_or_bin))
    model = compile(path, **compile_args) if path.is_dir() else load(path)
    config = _read_json(tok_dir / "config.json")
    return model, model.session(threads=threads, device=device), tok_dir, config


def _texts(texts: Union[str, Sequence[str]]) -> Tuple[List[str], bool]:
    if isinstance(texts, str):
        return [texts], True
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidArgument(f"text {i} is a {type(t).__name__}, not a str")
    return texts, False


def _batches(lengths: Sequence[int], batch_size: int) -> List[List[int]]:
    """Indices sorted by length (longest first), in chunks of batch_size."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="text")


def _pad(rows: Sequence[Sequence[int]], pad: int) -> Tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = r
        mask[b, :len(r)] = 1
    return ids, mask


def _engine(model: Model, engine: Union[bool, dict, None], threads: Optional[int],
            device: str):
    """``engine=True`` (or a dict of tfc.Engine's options): a continuous-batching
    engine on the helper's model; None/False: batches on a session."""
    if not engine:
        return None
    from ._engine import Engine
    options = dict(engine) if isinstance(engine, dict) else {}
    options.setdefault("threads", threads)
    options.setdefault("device", device)
    return Engine(model, **options)


def _through_engine(engine, rows: List[List[int]], progress: bool, desc: str, feed, decode,
                    options: dict) -> List[str]:
    """Every row as its own engine request, submitted at once (the engine batches
    them continuously; more than its queue holds wait for a free slot); the decoded
    texts in input order."""
    from ._errors import Busy

    bar = _progress(len(rows), progress, desc)
    requests = []
    oldest = 0  # on a full queue, wait for the oldest request still in flight
    for r in rows:
        ids = np.asarray([r], dtype=np.int64)
        while True:
            try:
                requests.append(engine.submit(feed(ids, np.ones_like(ids)), **options))
                break
            except Busy:
                if oldest >= len(requests):
                    raise
                requests[oldest].result()
                oldest += 1
    out = []
    for req in requests:
        out.append(decode(req.result()[0].ids))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return out


def _max_batch(model: Model) -> int:
    return min(i.max_shape[0] for i in model.inputs)


# --- Translator ------------------------------------------------------------------------

class _Family:
    """How a seq2seq family turns texts into source ids: the tokenizer's own special
    tokens, plus (mBART) the source language code and (T5) a task prefix. The target
    language token of mBART is the compile-time forced bos (``forced_bos_id``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def source_texts(self, texts: List[str], prefix: Optional[str]) -> List[str]:
        return [prefix + t for t in texts] if prefix else texts


_SEQ2SEQ = ("marian", "bart", "mbart", "t5")


class Translator:
    """Translates (or summarizes) with an encoder-decoder model: Marian, BART, mBART, T5.

    ``dir_or_bin``: a Hugging Face directory (compiled here) or a model.bin compiled
    from one, with that directory as ``tokenizer``. ``src_lang``/``tgt_lang``: mBART's
    language codes (e.g. "en_XX", "de_DE"; the target becomes the forced first token);
    ``prefix``: T5's task prefix (e.g. "translate English to German: ").
    """

    def __init__(self, dir_or_bin: PathLike, *, tokenizer: Optional[PathLike] = None,
                 src_lang: Optional[str] = None, tgt_lang: Optional[str] = None,
                 prefix: Optional[str] = None, threads: Optional[int] = None,
                 device: str = "cpu", batch_size: int = 16, precision: str = "f32",
                 engine: Union[bool, dict, None] = None) -> None:
        tok_dir = _tokenizer_dir(dir_or_bin, tokenizer)
        config = _read_json(tok_dir / "config.json")
        family = config.get("model_type")
        if family not in _SEQ2SEQ:
            raise InvalidArgument(f"Translator is for the model types {', '.join(_SEQ2SEQ)}; "
                                  f"'{tok_dir / 'config.json'}' has model_type {family!r}")
        self.tokenizer = _tokenizer(tok_dir)
        compile_set = {}
        if family == "mbart":
            if not src_lang or not tgt_lang:
                raise InvalidArgument("mBART needs src_lang and tgt_lang, e.g. 'en_XX', 'de_DE'")
            code = self.tokenizer.token_id(tgt_lang)
            if code is None:
                raise InvalidArgument(f"tgt_lang {tgt_lang!r} is not a token of the tokenizer")
            compile_set["forced_bos_id"] = code
            if self.tokenizer.token_id(src_lang) is None:
                raise InvalidArgument(f"src_lang {src_lang!r} is not a token of the tokenizer")
        self.src_lang, self.tgt_lang, self.prefix = src_lang, tgt_lang, prefix
        self.family = _Family(family)
        self.model, self.session, _, self.config = _open(
            dir_or_bin, tokenizer, threads, device,
            {"precision": precision, "set": compile_set or None})
        if not self.model.can_generate:
            raise InvalidArgument(f"model '{self.model.name}' cannot generate")
        self.pad_id = self.model.generation_info["pad_id"]
        self.batch_size = batch_size
        self.engine = _engine(self.model, engine, threads, device)

    def _encode(self, texts: List[str]) -> List[List[int]]:
        rows = [ids for ids, _ in self.tokenizer.encode(self.family.source_texts(texts,
                                                                                  self.prefix))]
        if self.family.name == "mbart":
            # transformers' MBartTokenizer: tokens, </s>, the source language code. A
            # saved tokenizer.json appends the code it was saved with: replace it.
            code = self.tokenizer.token_id(self.src_lang)
            codes = self.tokenizer.language_codes()
            rows = [r[:-1] + [code] if r and r[-1] in codes else r + [code] for r in rows]
        return rows

    def translate(self, texts: Union[str, Sequence[str]], beam: int = 4,
                  max_len: Optional[int] = None, length_penalty: float = 1.0,
                  batch_size: Optional[int] = None, progress: bool = False
                  ) -> Union[str, List[str]]:
        """Translates each text; returns the translations in input order (a str for a
        str). Beam search with ``beam`` hypotheses stops as the model's generation config
        says (transformers' ``early_stopping``); ``max_len`` counts new tokens (None: the
        model's ``max_length``)."""
        texts, single = _texts(texts)
        rows = self._encode(texts)
        names = [i.name for i in self.model.inputs]
        if self.engine is not None:
            out = _through_engine(
                self.engine, rows, progress, "translate",
                lambda ids, mask: {names[0]: ids, **({"attention_mask": mask}
                                                     if "attention_mask" in names else {})},
                self.tokenizer.decode,
                dict(beam=beam, max_len=max_len, length_penalty=length_penalty))
            return out[0] if single else out
        size = max(1, min(batch_size or self.batch_size, _max_batch(self.model) // max(beam, 1)))
        out: List[Optional[str]] = [None] * len(texts)
        bar = _progress(len(texts), progress, "translate")
        for idx in _batches([len(r) for r in rows], size):
            ids, mask = _pad([rows[i] for i in idx], self.pad_id)
            feed = {names[0]: ids}
            if "attention_mask" in names:
                feed["attention_mask"] = mask
            gens = self.session.generate(feed, beam=beam, max_len=max_len,
                                         length_penalty=length_penalty)
            for i, g in zip(idx, gens):
                out[i] = self.tokenizer.decode(g.ids)
            if bar is not None:
                bar.update(len(idx))
        if bar is not None:
            bar.close()
        return out[0] if single else out  # type: ignore[return-value]


# --- Encoder ---------------------------------------------------------------------------

class Encoder:
    """Sentence embeddings and sequence classification with an encoder (BERT, RoBERTa,
    XLM-RoBERTa, DistilBERT).

    ``head``: the output head tfc compiles (docs/hf.md, "Output heads"); by default
    the directory's own: ``classifier`` for a *ForSequenceClassification checkpoint, a
    sentence-transformers pooling, else ``last_hidden_state`` (which ``embed`` mean-pools
    over the attention mask).
    """

    def __init__(self, dir_or_bin: PathLike, *, tokenizer: Optional[PathLike] = None,
                 head: Optional[str] = None, threads: Optional[int] = None,
                 device: str = "cpu", batch_size: int = 32, precision: str = "f32") -> None:
        args = {"precision": precision}
        if head is not None:
            args["_extra"] = [f"--head={head}"]
        self.model, self.session, tok_dir, self.config = _open(dir_or_bin, tokenizer, threads,
                                                               device, args)
        self.tokenizer = _tokenizer(tok_dir)
        self.output = self.model.outputs[0].name
        self.input_names = [i.name for i in self.model.inputs]
        pad = self.config.get("pad_token_id")
        self.pad_id = int(pad) if pad is not None else 0
        self.batch_size = batch_size
        id2label = self.config.get("id2label") or {}
        self.labels = {int(k): v for k, v in id2label.items()}

    def _run(self, texts: List[str], batch_size: Optional[int], progress: bool,
             desc: str) -> List[np.ndarray]:
        enc = self.tokenizer.encode(texts)
        size = max(1, min(batch_size or self.batch_size, _max_batch(self.model)))
        out: List[Optional[np.ndarray]] = [None] * len(texts)
        bar = _progress(len(texts), progress, desc)
        for idx in _batches([len(e[0]) for e in enc], size):
            ids, mask = _pad([enc[i][0] for i in idx], self.pad_id)
            types, _ = _pad([enc[i][1] for i in idx], 0)
            feed = {"input_ids": ids}
            if "attention_mask" in self.input_names:
                feed["attention_mask"] = mask
            if "token_type_ids" in self.input_names:
                feed["token_type_ids"] = types
            y = self.session.run(feed)[self.output]
            if self.output == "last_hidden_state":  # mean pooling over the real tokens
                m = mask[:, :, None].astype(np.float32)
                y = (y * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            for b, i in enumerate(idx):
                out[i] = y[b]
            if bar is not None:
                bar.update(len(idx))
        if bar is not None:
            bar.close()
        return out  # type: ignore[return-value]

    def embed(self, texts: Union[str, Sequence[str]], normalize: bool = True,
              batch_size: Optional[int] = None, progress: bool = False) -> np.ndarray:
        """Sentence embeddings, float32 ``[len(texts), hidden]`` (``[hidden]`` for a str),
        L2-normalized when ``normalize``."""
        if self.output == "logits":
            raise InvalidArgument("this model computes classification logits (its head is "
                                  "'classifier'): use classify(), or Encoder(..., "
                                  "head='mean_pooling') for embeddings")
        texts, single = _texts(texts)
        if not texts:
            return np.zeros((0, self.model.outputs[0].shape[-1]), dtype=np.float32)
        e = np.stack(self._run(texts, batch_size, progress, "embed")).astype(np.float32)
        if normalize:
            e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
        return e[0] if single else e

    def classify(self, texts: Union[str, Sequence[str]], top_k: Optional[int] = 1,
                 batch_size: Optional[int] = None, progress: bool = False):
        """Labels from a sequence-classification head, as transformers'
        text-classification pipeline gives them: ``{"label", "score"}`` per text with
        ``top_k=1``, else a list of the ``top_k`` best (all with None), best first.
        Scores are the softmax of the logits (a sigmoid for a single logit)."""
        if self.output != "logits":
            raise InvalidArgument(f"this model's output is '{self.output}', not a "
                                  f"classification head's 'logits'")
        texts, single = _texts(texts)
        results = []
        for logits in self._run(texts, batch_size, progress, "classify"):
            logits = logits.astype(np.float64)
            if logits.shape[0] == 1:
                scores = 1.0 / (1.0 + np.exp(-logits))
            else:
                z = np.exp(logits - logits.max())
                scores = z / z.sum()
            order = sorted(range(len(scores)), key=lambda i: -scores[i])
            k = len(order) if top_k is None else top_k
            best = [{"label": self.labels.get(i, f"LABEL_{i}"), "score": float(scores[i])}
                    for i in order[:k]]
            results.append(best[0] if top_k == 1 else best)
        return results[0] if single else results


# --- Generator -------------------------------------------------------------------------

#: The decoder-only families `tfc compile DIR` describes (docs/hf.md).
#: gemma3 (Gemma 3's image-text checkpoints) compiles as its text model.
_DECODER_TYPES = {"gpt2", "llama", "mistral", "qwen2", "qwen3", "phi", "phi3", "smollm3",
                  "olmo2", "granite", "starcoder2", "stablelm", "gpt_neox", "cohere",
                  "gpt_bigcode", "gemma", "gemma2", "gemma3_text", "gemma3"}


class Generator:
    """Text generation with a decoder-only model: GPT-2, Llama, Mistral, Qwen2, Qwen3,
    Phi-2, Phi-3, SmolLM3, OLMo 2, Granite 3, StarCoder2, StableLM, GPT-NeoX (Pythia),
    Cohere (Command R, Aya), GPT-BigCode (StarCoder), Gemma, Gemma 2 and Gemma 3 (an
    image-text Gemma 3 as its text model).

    ``dir_or_bin``: a Hugging Face directory (compiled as ``tfc compile DIR`` does:
    docs/hf.md) or a model.bin with ``tokenizer`` the directory that has
    tokenizer.json.
    """

    def __init__(self, dir_or_bin: PathLike, *, tokenizer: Optional[PathLike] = None,
                 threads: Optional[int] = None, device: str = "cpu", batch_size: int = 8,
                 precision: str = "f32", engine: Union[bool, dict, None] = None) -> None:
        path = Path(os.fspath(dir_or_bin))
        if path.is_dir():
            config = _read_json(path / "config.json")
            if config.get("model_type") not in _DECODER_TYPES:
                raise InvalidArgument(f"Generator compiles decoder-only directories "
                                      f"({', '.join(sorted(_DECODER_TYPES))}); "
                                      f"'{path / 'config.json'}' has model_type "
                                      f"{config.get('model_type')!r}")
        self.model, self.session, tok_dir, config = _open(
            dir_or_bin, tokenizer, threads, device,
            {"precision": precision} if path.is_dir() else {})
        self.config = config
        self.tokenizer = _tokenizer(tok_dir)
        #: The directory's chat template (tfc._chat.ChatTemplate), None without one.
        self.chat_template = ChatTemplate.from_dir(tok_dir)
        self.pad_id = self.model.generation_info["pad_id"]
        self.batch_size = batch_size
        self.engine = _engine(self.model, engine, threads, device)

    def generate_text(self, prompt: Union[str, Sequence[str]], max_len: Optional[int] = None,
                      beam: int = 1, sample: bool = False, temperature: float = 1.0,
                      top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                      batch_size: Optional[int] = None, progress: bool = False,
                      return_full_text: bool = True, repetition_penalty: float = 1.0,
                      min_p: float = 0.0) -> Union[str, List[str]]:
        """Continues each prompt; returns the prompt + the decoded new tokens (transformers'
        text-generation pipeline's ``generated_text``), or the new text alone with
        ``return_full_text=False``. ``max_len`` counts new tokens, eos included."""
        prompts, single = _texts(prompt)
        rows = [ids for ids, _ in self.tokenizer.encode(prompts)]
        for i, r in enumerate(rows):
            if not r:
                raise InvalidArgument(f"prompt {i} is empty")
        if self.engine is not None:
            name = self.model.inputs[0].name
            new = _through_engine(self.engine, rows, progress, "generate",
                                  lambda ids, mask: {name: ids}, self.tokenizer.decode,
                                  dict(beam=beam, max_len=max_len, sample=sample,
                                       temperature=temperature, top_k=top_k, top_p=top_p,
                                       seed=seed, repetition_penalty=repetition_penalty,
                                       min_p=min_p))
            out = [p + n if return_full_text else n for p, n in zip(prompts, new)]
            return out[0] if single else out
        size = max(1, min(batch_size or self.batch_size, _max_batch(self.model) // max(beam, 1)))
        out: List[Optional[str]] = [None] * len(prompts)
        bar = _progress(len(prompts), progress, "generate")
        name = self.model.inputs[0].name
        for idx in _batches([len(r) for r in rows], size):
            ids, _ = _pad([rows[i] for i in idx], self.pad_id)
            gens = self.session.generate({name: ids}, beam=beam, max_len=max_len, sample=sample,
                                         temperature=temperature, top_k=top_k, top_p=top_p,
                                         seed=seed, repetition_penalty=repetition_penalty,
                                         min_p=min_p)
            for i, g in zip(idx, gens):
                new = self.tokenizer.decode(g.ids)
                out[i] = prompts[i] + new if return_full_text else new
            if bar is not None:
                bar.update(len(idx))
        if bar is not None:
            bar.close()
        return out[0] if single else out  # type: ignore[return-value]

    def chat_ids(self, messages: Sequence[Mapping[str, Any]]) -> List[int]:
        """The prompt ids of a conversation: ``messages`` (``{"role", "content"}`` dicts)
        rendered with the directory's chat template, ending with the assistant's turn,
        tokenized without adding special tokens (transformers'
        ``apply_chat_template(messages, add_generation_prompt=True, tokenize=True)``)."""
        if self.chat_template is None:
            raise InvalidArgument("this model has no chat template (tokenizer_config.json's "
                                  "chat_template, or chat_template.jinja)")
        text = self.chat_template.render(messages, add_generation_prompt=True)
        return self.tokenizer.encode([text], add_special_tokens=False)[0][0]

    def chat(self, messages: Sequence[Mapping[str, Any]], max_len: Optional[int] = None,
             sample: bool = False, temperature: float = 1.0, top_k: int = 0,
             top_p: float = 1.0, seed: int = 0, repetition_penalty: float = 1.0,
             min_p: float = 0.0) -> str:
        """The assistant's reply to a conversation (``chat_ids``), decoded without special
        tokens. ``max_len`` counts new tokens, eos included."""
        ids = np.asarray([self.chat_ids(messages)], dtype=np.int64)
        name = self.model.inputs[0].name
        options = dict(max_len=max_len, sample=sample, temperature=temperature, top_k=top_k,
                       top_p=top_p, seed=seed, repetition_penalty=repetition_penalty,
                       min_p=min_p)
        if self.engine is not None:
            gen = self.engine.submit({name: ids}, **options).result()[0]
        else:
            gen = self.session.generate({name: ids}, **options)[0]
        return self.tokenizer.decode(gen.ids)
