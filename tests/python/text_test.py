"""ctest python-text: tfc's text helpers give transformers' strings.

Random-weight models built here from configs, each with a real tokenizer trained here
on a small corpus (tokenizers' trainers, sentencepiece's trainer), saved with
save_pretrained, then:
  - tfc.Encoder.classify vs pipeline("text-classification") (labels from id2label,
    scores within 1e-5), BERT and DistilBERT;
  - tfc.Encoder.embed vs pipeline("feature-extraction"), mean-pooled and L2-normalized
    (within 1e-5);
  - tfc.Translator.translate vs what transformers 4's translation pipeline did and
    transformers 5 no longer ships as a pipeline: tokenizer -> model.generate(num_beams,
    the model's generation config otherwise) -> batch_decode(skip_special_tokens=True), for Marian
    (sentencepiece) and BART (tokenizer.json), greedy and 4 beams, strings equal;
  - tfc.Generator.generate_text vs pipeline("text-generation") on GPT-2, greedy.
Inputs are batched out of order by length (batch_size 2-3), so results must come back
in input order. And the batch-composition promise of docs/precision.md: a text alone
and inside padded batches of 2, 3, 17 and 64 (BatchComposition): the Encoder's raw
outputs within BATCH_TOL (f32, bf16, int8), the Translator's and Generator's tokens
equal where no step is a near-tie.
Runs in tests/hf/setup_venv.sh's venv, with the package that tests/python/run_text.sh
installed into TFC_TEXT_SITE (`pip install --no-deps --target`) first on PYTHONPATH.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch

import tfc

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers  # noqa: E402
from transformers import pipeline  # noqa: E402

transformers.logging.set_verbosity_error()
WORK = Path(tempfile.mkdtemp(prefix="tfc-text-"))
atexit.register(shutil.rmtree, WORK, True)
ROOT = Path(os.environ["TFC_SOURCE_DIR"])

# docs/precision.md, "Batch composition": a row's outputs inside a batch (any size,
# any padding) differ from the same row alone by at most BATCH_TOL[precision] times
# the largest |output| of that row alone, element by element over its real positions.
BATCH_TOL = {"f32": 1e-5, "bf16": 2e-2, "int8": 3e-2}

WORDS = ("the a small big red green house tree river cat dog bird runs sleeps sings "
         "quickly slowly today yesterday and but with under over near far city road "
         "book reads writes friend teacher asks answers question light dark night day").split()
rng = np.random.default_rng(0)
CORPUS = [" ".join(rng.choice(WORDS, size=rng.integers(3, 12))) + rng.choice([".", "!", "?", ""])
          for _ in range(400)]
TEXTS = ["the cat sleeps.", "a big red dog runs quickly under the tree near the river today",
         "friend asks", "the teacher reads a book with a small bird and the green house!",
         "night", "dark road, light city?"]


def wordpiece_tokenizer(d: Path):
    """A BERT WordPiece tokenizer (tokenizers' trainer), saved as BertTokenizerFast."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    t = BertWordPieceTokenizer(lowercase=True)
    t.train_from_iterator(CORPUS, vocab_size=120, min_frequency=1,
                          special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok = BertTokenizerFast(tokenizer_object=t._tokenizer, unk_token="[UNK]", sep_token="[SEP]",
                            pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]")
    tok.save_pretrained(d)
    return tok


def bpe_tokenizer(d: Path, specials, template=None, eos=None):
    """A byte-level BPE tokenizer (tokenizers' trainer) as a PreTrainedTokenizerFast."""
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    t = ByteLevelBPETokenizer()
    t.train_from_iterator(CORPUS, vocab_size=300, min_frequency=1, special_tokens=specials)
    if template:
        t._tokenizer.post_processor = TemplateProcessing(
            single=template, special_tokens=[(s, t.token_to_id(s)) for s in specials
                                             if s in template])
    kw = dict(zip(("bos_token", "pad_token", "eos_token", "unk_token"), specials))
    if eos:
        kw = {"eos_token": eos, "bos_token": eos, "unk_token": eos}
    tok = PreTrainedTokenizerFast(tokenizer_object=t._tokenizer, **kw)
    tok.save_pretrained(d)
    return tok


def marian_tokenizer(d: Path):
    """An OPUS-MT-style tokenizer: sentencepiece (its trainer) + vocab.json, eos 0, pad last."""
    from transformers import MarianTokenizer

    d.mkdir(parents=True, exist_ok=True)
    vocab = {"</s>": 0, "<unk>": 1}
    for p, _ in spm_pieces():
        vocab.setdefault(p, len(vocab))
    vocab["<pad>"] = len(vocab)
    (WORK / "vocab.json").write_text(json.dumps(vocab))
    tok = MarianTokenizer(source_spm=str(spm_model()), target_spm=str(spm_model()),
                          vocab=str(WORK / "vocab.json"))
    tok.save_pretrained(d)
    return tok


@functools.lru_cache(None)
def spm_model() -> Path:
    """A sentencepiece unigram model (its trainer) of the corpus."""
    import sentencepiece as spm

    (WORK / "corpus.txt").write_text("\n".join(CORPUS))
    spm.SentencePieceTrainer.train(input=str(WORK / "corpus.txt"), model_prefix=str(WORK / "spm"),
                                   vocab_size=60, model_type="unigram", character_coverage=1.0,
                                   bos_id=-1, eos_id=-1, unk_id=0, minloglevel=2)
    return WORK / "spm.model"


def spm_pieces():
    """The trained pieces and scores, without sentencepiece's own <unk>."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(spm_model()))
    return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(1, sp.get_piece_size())]


def perturb(m):
    """Non-trivial norms and biases (random init leaves 1s and 0s)."""
    with torch.no_grad():
        for _, p in m.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
        if hasattr(m, "final_logits_bias"):
            m.final_logits_bias.copy_(torch.randn_like(m.final_logits_bias) * 0.1)
    return m


@functools.lru_cache(None)
def bert_cls_dir() -> Path:
    from transformers import BertConfig, BertForSequenceClassification

    d = WORK / "bert-cls"
    tok = wordpiece_tokenizer(d)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                     id2label={0: "sad", 1: "happy", 2: "neutral"},
                     label2id={"sad": 0, "happy": 1, "neutral": 2}, attn_implementation="eager")
    perturb(BertForSequenceClassification(cfg).eval()).save_pretrained(d)
    return d


@functools.lru_cache(None)
def distilbert_cls_dir() -> Path:
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    d = WORK / "distilbert-cls"
    tok = wordpiece_tokenizer(d)
    torch.manual_seed(1)
    cfg = DistilBertConfig(vocab_size=tok.vocab_size, dim=32, n_layers=2, n_heads=4,
                           hidden_dim=64, max_position_embeddings=64,
                           id2label={0: "NEGATIVE", 1: "POSITIVE"},
                           label2id={"NEGATIVE": 0, "POSITIVE": 1}, attn_implementation="eager")
    perturb(DistilBertForSequenceClassification(cfg).eval()).save_pretrained(d)
    return d


@functools.lru_cache(None)
def bert_dir() -> Path:
    from transformers import BertConfig, BertModel

    d = WORK / "bert"
    tok = wordpiece_tokenizer(d)
    torch.manual_seed(2)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                     attn_implementation="eager")
    perturb(BertModel(cfg).eval()).save_pretrained(d)
    return d


@functools.lru_cache(None)
def marian():
    from transformers import MarianConfig, MarianMTModel

    d = WORK / "marian"
    tok = marian_tokenizer(d)
    V = len(tok.encoder)
    torch.manual_seed(3)
    cfg = MarianConfig(vocab_size=V, decoder_vocab_size=V, pad_token_id=V - 1,
                       eos_token_id=0, decoder_start_token_id=V - 1, d_model=32,
                       encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                       decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                       max_position_embeddings=64, scale_embedding=True,
                       activation_function="swish", attn_implementation="eager", init_std=0.5)
    m = perturb(MarianMTModel(cfg).eval())
    m.save_pretrained(d)
    return d, m, tok


class Encoders(unittest.TestCase):
    def classifier_check(self, d):
        ref = pipeline("text-classification", model=str(d), tokenizer=str(d), device="cpu")
        enc = tfc.Encoder(d, batch_size=2)
        got = enc.classify(TEXTS)
        want = ref(TEXTS)
        self.assertEqual([g["label"] for g in got], [w["label"] for w in want])
        np.testing.assert_allclose([g["score"] for g in got], [w["score"] for w in want],
                                   atol=1e-5)
        got_all = enc.classify(TEXTS, top_k=None)
        want_all = ref(TEXTS, top_k=None)
        for g, w in zip(got_all, want_all):
            self.assertEqual([x["label"] for x in g], [x["label"] for x in w])
            np.testing.assert_allclose([x["score"] for x in g], [x["score"] for x in w], atol=1e-5)
        # Alone, this text's linears have fewer rows than inside the batch (on an
        # AVX2-only CPU: oneDNN below 16 rows, OpenBLAS from 16): scores within the
        # f32 batch-composition bound (docs/precision.md), not bitwise.
        alone = enc.classify(TEXTS[1])
        self.assertEqual(alone["label"], got[1]["label"])
        self.assertAlmostEqual(alone["score"], got[1]["score"], delta=BATCH_TOL["f32"])
        with self.assertRaises(tfc.InvalidArgument):
            enc.embed(TEXTS)

    def test_bert_classify(self):
        self.classifier_check(bert_cls_dir())

    def test_distilbert_classify(self):
        self.classifier_check(distilbert_cls_dir())

    def test_roberta_classify(self):
        """Byte-level BPE, pad id 1 and positions from 2: padding must not shift anything."""
        from transformers import RobertaConfig, RobertaForSequenceClassification

        d = WORK / "roberta-cls"
        tok = bpe_tokenizer(d, ["<s>", "<pad>", "</s>", "<unk>"], template="<s> $A </s>")
        torch.manual_seed(6)
        cfg = RobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=64,
                            max_position_embeddings=66, type_vocab_size=1, pad_token_id=1,
                            bos_token_id=0, eos_token_id=2,
                            id2label={0: "a", 1: "b", 2: "c", 3: "d"},
                            label2id={"a": 0, "b": 1, "c": 2, "d": 3}, attn_implementation="eager")
        perturb(RobertaForSequenceClassification(cfg).eval()).save_pretrained(d)
        self.classifier_check(d)

    def test_head_choice(self):
        """head='mean_pooling' on a classification checkpoint: embeddings of its body."""
        d = bert_cls_dir()
        ref = pipeline("feature-extraction", model=str(d), tokenizer=str(d), device="cpu")
        want = np.stack([np.asarray(ref(t)[0]).mean(axis=0) for t in TEXTS])
        want /= np.linalg.norm(want, axis=1, keepdims=True)
        enc = tfc.Encoder(d, head="mean_pooling")
        self.assertEqual([o.name for o in enc.model.outputs], ["sentence_embedding"])
        np.testing.assert_allclose(enc.embed(TEXTS), want, atol=1e-5)
        with self.assertRaises(tfc.CompileError) as cm:
            tfc.Encoder(d, head="pool")
        self.assertIn("--head pool: the bert description has the heads:", cm.exception.message)

    def test_bert_embed(self):
        d = bert_dir()
        ref = pipeline("feature-extraction", model=str(d), tokenizer=str(d), device="cpu")
        want = np.stack([np.asarray(ref(t)[0]).mean(axis=0) for t in TEXTS])
        want /= np.linalg.norm(want, axis=1, keepdims=True)
        enc = tfc.Encoder(d, batch_size=3)
        got = enc.embed(TEXTS)
        self.assertEqual(got.shape, (len(TEXTS), 32))
        self.assertEqual(got.dtype, np.float32)
        np.testing.assert_allclose(got, want, atol=1e-5)
        raw = enc.embed(TEXTS, normalize=False)
        np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), got,
                                   atol=1e-6)
        self.assertGreater(float(np.abs(np.linalg.norm(raw, axis=1) - 1).max()), 1e-2)
        np.testing.assert_allclose(enc.embed(TEXTS[0]), got[0], atol=1e-6)
        # A progress bar when asked for, on stderr.
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            enc.embed(TEXTS, progress=True)
        self.assertIn("embed", err.getvalue())
        self.assertIn("6/6", err.getvalue())
        with self.assertRaises(tfc.InvalidArgument):
            enc.classify(TEXTS)


class Translators(unittest.TestCase):
    def seq2seq_check(self, d, model, tok, max_new):
        tr = tfc.Translator(d, batch_size=2)
        for beam in (1, 4):
            want = []
            for t in TEXTS:  # one text a call, as the translation pipeline ran
                enc = tok([t], return_tensors="pt")
                with torch.no_grad():
                    out = model.generate(**enc, num_beams=beam, do_sample=False,
                                         max_new_tokens=max_new)
                want.append(tok.batch_decode(out, skip_special_tokens=True)[0])
            got = tr.translate(TEXTS, beam=beam, max_len=max_new)
            print(f"{d.name} beam {beam}: {got}")
            self.assertEqual(got, want, f"beam {beam}")
            self.assertGreater(sum(len(g) for g in got), 10)
        self.assertEqual(tr.translate(TEXTS[3], beam=4, max_len=max_new), want[3])
        # engine=True: every text its own request, batched continuously (issue 23).
        engine = tfc.Translator(d, engine={"max_rows": 8})
        self.assertEqual(engine.translate(TEXTS, beam=4, max_len=max_new), want)
        return tr, want  # want: beam 4's

    def test_marian(self):
        d, m, tok = marian()
        tr, want = self.seq2seq_check(d, m, tok, 12)
        # A model.bin compiled from the directory, with the directory as the tokenizer
        # (batches of 4: against transformers, not against tr's batches of 2, which
        # docs/precision.md does not promise bitwise).
        tr.model.save(WORK / "marian.bin")
        from_bin = tfc.Translator(WORK / "marian.bin", tokenizer=d, batch_size=4)
        self.assertEqual(from_bin.translate(TEXTS, beam=4, max_len=12), want)
        with self.assertRaises(tfc.InvalidArgument) as cm:
            tfc.Translator(WORK / "marian.bin")
        self.assertIn("give the Hugging Face directory with its tokenizer and config.json as "
                      "tokenizer=DIR", str(cm.exception))

    def test_bart(self):
        from transformers import BartConfig, BartForConditionalGeneration

        d = WORK / "bart"
        tok = bpe_tokenizer(d, ["<s>", "<pad>", "</s>", "<unk>"], template="<s> $A </s>")
        torch.manual_seed(4)
        cfg = BartConfig(vocab_size=len(tok), pad_token_id=1, bos_token_id=0, eos_token_id=2,
                         decoder_start_token_id=2, forced_bos_token_id=0, d_model=32,
                         encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                         decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                         max_position_embeddings=64, attn_implementation="eager", init_std=0.5)
        m = perturb(BartForConditionalGeneration(cfg).eval())
        m.save_pretrained(d)
        tr, _ = self.seq2seq_check(d, m, tok, 12)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            tr.translate(TEXTS, beam=1, max_len=4, progress=True)
        self.assertIn("translate", err.getvalue())


    def test_t5(self):
        """T5: a Unigram tokenizer.json (T5Tokenizer over the trained pieces), pad 0, eos 1,
        and the task prefix before every text."""
        from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

        d = WORK / "t5"
        tok = T5Tokenizer(vocab=[("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + spm_pieces(),
                          extra_ids=0)
        tok.save_pretrained(d)
        torch.manual_seed(7)
        cfg = T5Config(vocab_size=len(tok), d_model=32, d_kv=12, d_ff=64, num_layers=2,
                       num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
                       relative_attention_max_distance=20, pad_token_id=0, eos_token_id=1,
                       decoder_start_token_id=0, feed_forward_proj="relu",
                       attn_implementation="eager", initializer_factor=4.0)
        m = perturb(T5ForConditionalGeneration(cfg).eval())
        m.save_pretrained(d)
        prefix = "translate cat to dog: "
        tr = tfc.Translator(d, prefix=prefix, batch_size=2)
        for beam in (1, 4):
            want = []
            for t in TEXTS:
                enc = tok([prefix + t], return_tensors="pt")
                with torch.no_grad():
                    out = m.generate(**enc, num_beams=beam, do_sample=False, max_new_tokens=12)
                want.append(tok.batch_decode(out, skip_special_tokens=True)[0])
            got = tr.translate(TEXTS, beam=beam, max_len=12)
            print(f"t5 beam {beam}: {got}")
            self.assertEqual(got, want, f"beam {beam}")
            self.assertGreater(sum(len(g) for g in got), 10)

    def test_t5_spiece_only(self):
        """T5 with spiece.model and no tokenizer.json: tfc reads it with sentencepiece,
        transformers converts it; the strings must agree."""
        import sentencepiece as spm
        from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

        d = WORK / "t5-spiece"
        d.mkdir(parents=True, exist_ok=True)
        spm.SentencePieceTrainer.train(input=str(spm_model().parent / "corpus.txt"),
                                       model_prefix=str(WORK / "spiece"), vocab_size=60,
                                       model_type="unigram", pad_id=0, eos_id=1, unk_id=2,
                                       bos_id=-1, minloglevel=2)
        shutil.copy(WORK / "spiece.model", d / "spiece.model")
        sp = spm.SentencePieceProcessor(model_file=str(d / "spiece.model"))
        torch.manual_seed(9)
        cfg = T5Config(vocab_size=sp.get_piece_size(), d_model=32, d_kv=8, d_ff=64,
                       num_layers=2, num_decoder_layers=2, num_heads=4,
                       relative_attention_num_buckets=8, relative_attention_max_distance=20,
                       pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                       feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                       attn_implementation="eager", initializer_factor=4.0)
        m = perturb(T5ForConditionalGeneration(cfg).eval())
        m.save_pretrained(d)
        self.assertFalse((d / "tokenizer.json").exists())
        tok = T5Tokenizer.from_pretrained(str(d), extra_ids=0)
        tr = tfc.Translator(d, batch_size=3)
        want = []
        for t in TEXTS:
            enc = tok([t], return_tensors="pt")
            with torch.no_grad():
                out = m.generate(**enc, num_beams=4, do_sample=False, max_new_tokens=12)
            want.append(tok.batch_decode(out, skip_special_tokens=True)[0])
        got = tr.translate(TEXTS, beam=4, max_len=12)
        print(f"t5 (spiece.model) beam 4: {got}")
        self.assertEqual(got, want)
        self.assertGreater(sum(len(g) for g in got), 10)

    def test_mbart(self):
        """mBART: the source language code after </s>, the target's forced first."""
        from transformers import MBartConfig, MBartForConditionalGeneration, MBartTokenizer

        d = WORK / "mbart"
        tok = MBartTokenizer(vocab=[("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
                             + spm_pieces(), src_lang="fr_XX", tgt_lang="de_DE")
        tok.save_pretrained(d)
        torch.manual_seed(8)
        cfg = MBartConfig(vocab_size=len(tok), pad_token_id=1, bos_token_id=0, eos_token_id=2,
                          decoder_start_token_id=2, d_model=32, encoder_layers=2,
                          decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                          encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                          scale_embedding=True, attn_implementation="eager", init_std=0.5)
        m = perturb(MBartForConditionalGeneration(cfg).eval())
        m.save_pretrained(d)
        tok = MBartTokenizer.from_pretrained(d, src_lang="en_XX")
        tgt = tok.convert_tokens_to_ids("ro_RO")
        tr = tfc.Translator(d, src_lang="en_XX", tgt_lang="ro_RO", batch_size=2)
        for beam in (1, 4):
            want = []
            for t in TEXTS:
                enc = tok([t], return_tensors="pt")
                self.assertEqual(enc["input_ids"][0, -1].item(), tok.convert_tokens_to_ids("en_XX"))
                with torch.no_grad():
                    out = m.generate(**enc, num_beams=beam, do_sample=False, max_new_tokens=12,
                                     forced_bos_token_id=tgt)
                want.append(tok.batch_decode(out, skip_special_tokens=True)[0])
            got = tr.translate(TEXTS, beam=beam, max_len=12)
            print(f"mbart beam {beam}: {got}")
            self.assertEqual(got, want, f"beam {beam}")
            self.assertGreater(sum(len(g) for g in got), 10)
        with self.assertRaises(tfc.InvalidArgument) as cm:
            tfc.Translator(d, src_lang="en_XX")
        self.assertEqual(str(cm.exception),
                         "mBART needs src_lang and tgt_lang, e.g. 'en_XX', 'de_DE'")


@functools.lru_cache(None)
def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    d = WORK / "gpt2"
    tok = bpe_tokenizer(d, ["<|endoftext|>"], eos="<|endoftext|>")
    torch.manual_seed(5)
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    cfg = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=64,
                     bos_token_id=eos, eos_token_id=eos, attn_implementation="eager",
                     initializer_range=0.5)
    m = perturb(GPT2LMHeadModel(cfg).eval())
    m.save_pretrained(d)
    return d, m, tok, eos


class Generators(unittest.TestCase):
    def test_gpt2(self):
        d, m, tok, eos = gpt2()
        ref = pipeline("text-generation", model=str(d), tokenizer=str(d), device="cpu")
        gen = tfc.Generator(d, batch_size=2)
        prompts = TEXTS[:4]
        want = [ref(p, do_sample=False, max_new_tokens=10, pad_token_id=eos)[0]["generated_text"]
                for p in prompts]
        got = gen.generate_text(prompts, max_len=10)
        print(f"gpt2: {got}")
        self.assertEqual(got, want)
        self.assertEqual(gen.generate_text(prompts[1], max_len=10), want[1])
        new = gen.generate_text(prompts, max_len=10, return_full_text=False)
        self.assertEqual([p + n for p, n in zip(prompts, new)], want)
        self.assertTrue(all(n for n in new))
        # engine=True: the prompts as requests of one continuous batch (issue 23).
        self.assertEqual(tfc.Generator(d, engine=True).generate_text(prompts, max_len=10), want)


LONG_TEXT = " ".join(WORDS[:24])


def batch_with(target: str, n: int, long: str = LONG_TEXT):
    """n texts, |target| at n // 2, the others from CORPUS; one of them |long|, longer
    than |target| (so that it is padded), when n > 1."""
    g = np.random.default_rng(n)
    others = [CORPUS[i] for i in g.choice(len(CORPUS), size=n - 1, replace=False)]
    if others:
        others[0] = long
    return others[:n // 2] + [target] + others[n // 2:], n // 2


def pad_rows(rows, pad):
    ids = np.full((len(rows), max(len(r) for r in rows)), pad, dtype=np.int64)
    mask = np.zeros_like(ids)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = r
        mask[b, :len(r)] = 1
    return ids, mask


class BatchComposition(unittest.TestCase):
    """docs/precision.md, "Batch composition": the same text alone and inside padded
    batches of 2, 3, 17 and 64. On an AVX2-only CPU (or TFC_CPU_ISA=AVX2) a short text
    alone runs its linears on oneDNN (fewer than 16 rows) and inside a batch on
    OpenBLAS, and its attention rows may take another path when padded: the outputs
    agree within the documented bound, not bitwise."""

    SIZES = (2, 3, 17, 64)

    def raw(self, enc, texts):
        """The session's outputs for |texts| as one padded batch, fed as Encoder feeds
        it: per text, its real positions (or its logits)."""
        en = enc.tokenizer.encode(texts)
        ids, mask = pad_rows([e[0] for e in en], enc.pad_id)
        types, _ = pad_rows([e[1] for e in en], 0)
        feed = {"input_ids": ids}
        if "attention_mask" in enc.input_names:
            feed["attention_mask"] = mask
        if "token_type_ids" in enc.input_names:
            feed["token_type_ids"] = types
        y = enc.session.run(feed)[enc.output]
        return [y[b, :len(en[b][0])] if y.ndim == 3 else y[b] for b in range(len(texts))]

    def test_encoder(self):
        checked = 0
        for precision, tol in BATCH_TOL.items():
            for d in (bert_dir(), distilbert_cls_dir()):
                enc = tfc.Encoder(d, precision=precision)
                for target in (TEXTS[0], TEXTS[4], TEXTS[1]):
                    alone = self.raw(enc, [target])[0]
                    bound = tol * float(np.abs(alone).max())
                    for n in self.SIZES:
                        texts, pos = batch_with(target, n)
                        got = self.raw(enc, texts)[pos]
                        self.assertEqual(got.shape, alone.shape)
                        err = float(np.abs(got - alone).max())
                        what = f"{d.name} {precision} {target!r} in a batch of {n}"
                        self.assertLessEqual(err, bound, what)
                        # The same through the Encoder's own batching (one batch of n).
                        if enc.output == "logits":
                            # by label: near-equal scores may swap places
                            a = {x["label"]: x["score"] for x in enc.classify(target, top_k=None)}
                            b = {x["label"]: x["score"]
                                 for x in enc.classify(texts, top_k=None, batch_size=n)[pos]}
                            self.assertEqual(sorted(a), sorted(b))
                            # softmax moves by at most half the logits' change
                            np.testing.assert_allclose([b[k] for k in sorted(a)],
                                                       [a[k] for k in sorted(a)], rtol=0,
                                                       atol=bound, err_msg=what)
                        else:
                            # a mean over real positions moves by at most the bound
                            np.testing.assert_allclose(
                                enc.embed(texts, normalize=False, batch_size=n)[pos],
                                enc.embed(target, normalize=False), rtol=0, atol=bound,
                                err_msg=what)
                        checked += 1
        self.assertEqual(checked, 3 * 2 * 3 * len(self.SIZES))

    def test_translator(self):
        """Greedy and beam-4 tokens alone and in batches. The promise lets tokens differ
        only at a near-tie; transformers' greedy top-2 logit margins on this text show
        there is none, so the strings must be equal."""
        d, m, tok = marian()
        tr = tfc.Translator(d)
        target = TEXTS[2]
        with torch.no_grad():
            out = m.generate(**tok([target], return_tensors="pt"), num_beams=1,
                             do_sample=False, max_new_tokens=12, output_scores=True,
                             return_dict_in_generate=True)
        margins = [float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in out.scores]
        self.assertGreater(min(margins), 1e-3)
        self.assertGreater(len(margins), 3)
        # Beam 4 takes 4 rows per text: the model's 64 rows hold batches of 16.
        for beam, sizes in ((1, self.SIZES), (4, (2, 3, 16))):
            alone = tr.translate(target, beam=beam, max_len=12)
            self.assertTrue(alone)
            for n in sizes:
                texts, pos = batch_with(target, n)
                got = tr.translate(texts, beam=beam, max_len=12, batch_size=n)
                self.assertEqual(got[pos], alone, f"beam {beam}, batch of {n}")

    def test_generator(self):
        d, m, tok, eos = gpt2()
        gen = tfc.Generator(d)
        target = TEXTS[0]
        with torch.no_grad():
            out = m.generate(**tok([target], return_tensors="pt"), do_sample=False,
                             max_new_tokens=10, pad_token_id=eos, output_scores=True,
                             return_dict_in_generate=True)
        margins = [float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in out.scores]
        self.assertGreater(min(margins), 1e-3)
        alone = gen.generate_text(target, max_len=10)
        self.assertGreater(len(alone), len(target))
        # gpt2.yaml's max_batch is 16; prompt and new tokens share the 64 positions
        long = " ".join(WORDS[:6])
        self.assertGreater(len(tok(long)["input_ids"]), len(tok(target)["input_ids"]))
        for n in (2, 3, 16):
            texts, pos = batch_with(target, n, long)
            self.assertEqual(gen.generate_text(texts, max_len=10, batch_size=n)[pos], alone,
                             f"batch of {n}")

    def test_cpu_isa_cap_reaches_libtfrun(self):
        """TFC_CPU_ISA, when set (ctest avx2/python-text), reaches the libtfrun that the
        nanobind module loads: the session names it and takes the AVX2 paths."""
        self.assertTrue(os.path.realpath(tfc.__file__).startswith(
            os.path.realpath(os.environ["TFC_TEXT_SITE"])), tfc.__file__)
        device = tfc.Encoder(bert_dir()).session.device
        cap = os.environ.get("TFC_CPU_ISA")
        if cap:
            self.assertIn(f"TFC_CPU_ISA={cap}", device)
        else:
            self.assertNotIn("TFC_CPU_ISA", device)
        if cap == "AVX2":
            self.assertIn("bf16 emulated", device)
            self.assertIn("int8 without vnni", device)
            self.assertIn("onednn avx2", device)


class Examples(unittest.TestCase):
    """docs/python.md's examples, run as written but for the model directories."""

    def example(self, name: str, dirs: dict) -> str:
        doc = (ROOT / "docs" / "python.md").read_text()
        m = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", doc, re.S)
        self.assertIsNotNone(m, f"docs/python.md has no example '{name}'")
        code = m.group(1)
        for old, new in dirs.items():
            self.assertIn(f'"{old}"', code)
            code = code.replace(f'"{old}"', repr(str(new)))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_translate(self):
        d, _, _ = marian()
        out = self.example("translate", {"opus-mt-en-de": d})
        want = tfc.Translator(d).translate(["The house is small.", "Where is the cat?"], beam=4,
                                           max_len=32)
        self.assertEqual(out, f"{want}\n")

    def test_embed(self):
        d = bert_dir()
        out = self.example("embed", {"all-MiniLM-L6-v2": d})
        e = tfc.Encoder(d).embed(["A cat sleeps.", "A dog runs.", "The cat is sleeping."])
        self.assertEqual(out, f"{e.shape} {np.round(e @ e.T, 3)}\n")
        self.assertIn("1.", out)

    def test_classify(self):
        d = distilbert_cls_dir()
        out = self.example("classify", {"distilbert-sst2": d})
        got = tfc.Encoder(d).classify(["What a lovely day!", "This is terrible."])
        self.assertEqual(out, "".join(f"{r['label']} {round(r['score'], 4)}\n" for r in got))


if __name__ == "__main__":
    unittest.main(verbosity=2)
