#!/usr/bin/python3
"""PyTorch reference models for tfc (the numerical ground truth).

tfc compiles a YAML description of a Transformer plus a safetensors weight file and runs
it; its outputs must reproduce PyTorch's numbers exactly, quirks included.  This file is
the PyTorch side of that contract.  It holds faithful re-implementations of the models
tfc supports:

  tutorial-codersarts  seed 000 (codersarts "Building a Transformer with PyTorch"),
                       completed with the missing pieces from seed 003
  tutorial-simple      seed 001 (simple blog "build each important part of a Transformer")
  tutorial-floydhub    seed 003 (FloydHub "How to code The Transformer in PyTorch")
  tutorial-wandb       seed 004 (W&B "Transformer Deep Dive", refactored Annotated Transformer)
  torch-transformer    PyTorch's translation tutorial Seq2SeqTransformer over nn.Transformer
  bert                 BERT encoder with HuggingFace BertModel state_dict names
  gpt2                 GPT-2 LM with HuggingFace GPT2LMHeadModel state_dict names

The tutorial code is kept as close to verbatim as Python allows: class names, attribute
names (hence state_dict keys) and the order of floating-point operations are the
tutorials' own.  Where a tutorial does something unusual (a bug that changes the numbers,
or a non-standard formula) the code keeps it and a "QUIRK" comment says which tutorial line
it reproduces.  Where a tutorial does not run as printed (syntax errors, undefined
globals, .cuda() calls) the minimal fix is made and marked "FIX".

It also contains a tiny dependency-free safetensors writer/reader (there is no
safetensors package here).  Format: 8-byte little-endian u64 header length N, then N
bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
{str: str}} padded with spaces to a multiple of 8, then the raw little-endian data.

Command line (use Debian's /usr/bin/python3, which has torch and numpy):
  torch_models.py export MODEL -o out.safetensors [--set NAME=VALUE ...] [--seed N]
  torch_models.py names  MODEL [--set NAME=VALUE ...]
  torch_models.py run    MODEL --weights W.safetensors --input NAME=FILE.npy ... -o OUTDIR
Params (--set): d_model, heads, d_ff, layers, max_len, pad_id, and src_vocab/tgt_vocab
(encoder-decoder models) or vocab (single-stack models); for encoder-decoder models
`--set vocab=V` is a shorthand that sets both src_vocab and tgt_vocab.  bert also takes
type_vocab.  Model inputs (names for --input): encoder-decoder models take src and tgt;
tutorial-simple and gpt2 take tokens; bert takes tokens and (optional) token_types.
"""

import argparse
import copy
import json
import math
import os
import struct
import sys
import types
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# =====================================================================================
# Seed 003: FloydHub, "How to code The Transformer in PyTorch" (Samuel Lynn-Evans).
# Defined first because seed 000 borrows its Embedder / Norm / Encoder / Decoder shape.
# =====================================================================================
def _seed003():
    class Embedder(nn.Module):
        def __init__(self, vocab_size, d_model):
            super().__init__()
            self.embed = nn.Embedding(vocab_size, d_model)

        def forward(self, x):
            return self.embed(x)

    class PositionalEncoder(nn.Module):
        def __init__(self, d_model, max_seq_len=80):
            super().__init__()
            self.d_model = d_model
            # create constant 'pe' matrix with values dependant on pos and i
            pe = torch.zeros(max_seq_len, d_model)
            for pos in range(max_seq_len):
                for i in range(0, d_model, 2):
                    # QUIRK (003 PositionalEncoder): `i` already steps by 2 and is doubled
                    # again (2 * i), and the cosine uses a DIFFERENT exponent,
                    # 2 * (i + 1), than the sine.  Computed in Python double precision
                    # (math.sin / math.cos) and rounded to float32 on assignment.
                    pe[pos, i] = \
                        math.sin(pos / (10000 ** ((2 * i) / d_model)))
                    pe[pos, i + 1] = \
                        math.cos(pos / (10000 ** ((2 * (i + 1)) / d_model)))
            pe = pe.unsqueeze(0)                      # [1, max_seq_len, d_model]
            self.register_buffer('pe', pe)

        def forward(self, x):
            # make embeddings relatively larger
            # QUIRK (003): x * sqrt(d_model) happens inside the positional encoder.
            x = x * math.sqrt(self.d_model)
            # add constant to embedding
            seq_len = x.size(1)
            # FIX: tutorial wraps this in Variable(..., requires_grad=False).cuda().
            x = x + self.pe[:, :seq_len]
            return x

    class MultiHeadAttention(nn.Module):
        def __init__(self, heads, d_model, dropout=0.1):
            super().__init__()
            self.d_model = d_model
            self.d_k = d_model // heads
            self.h = heads
            self.q_linear = nn.Linear(d_model, d_model)
            self.v_linear = nn.Linear(d_model, d_model)
            self.k_linear = nn.Linear(d_model, d_model)
            self.dropout = nn.Dropout(dropout)
            self.out = nn.Linear(d_model, d_model)

        def forward(self, q, k, v, mask=None):
            bs = q.size(0)
            # perform linear operation and split into h heads
            k = self.k_linear(k).view(bs, -1, self.h, self.d_k)
            q = self.q_linear(q).view(bs, -1, self.h, self.d_k)
            v = self.v_linear(v).view(bs, -1, self.h, self.d_k)
            # transpose to get dimensions bs * h * sl * d_model
            k = k.transpose(1, 2)
            q = q.transpose(1, 2)
            v = v.transpose(1, 2)
            # calculate attention using function we will define next
            scores = attention(q, k, v, self.d_k, mask, self.dropout)
            # concatenate heads and put through final linear layer
            concat = scores.transpose(1, 2).contiguous() \
                .view(bs, -1, self.d_model)
            output = self.out(concat)
            return output

    def attention(q, k, v, d_k, mask=None, dropout=None):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
        if mask is not None:
            # QUIRK (003 attention): masked scores are set to -1e9 (not -inf), so a row
            # whose keys are all masked becomes a uniform average instead of NaN.
            mask = mask.unsqueeze(1)
            scores = scores.masked_fill(mask == 0, -1e9)
        scores = F.softmax(scores, dim=-1)
        if dropout is not None:
            scores = dropout(scores)
        output = torch.matmul(scores, v)
        return output

    class FeedForward(nn.Module):
        def __init__(self, d_model, d_ff=2048, dropout=0.1):
            super().__init__()
            # We set d_ff as a default to 2048
            self.linear_1 = nn.Linear(d_model, d_ff)
            self.dropout = nn.Dropout(dropout)
            self.linear_2 = nn.Linear(d_ff, d_model)

        def forward(self, x):
            x = self.dropout(F.relu(self.linear_1(x)))
            x = self.linear_2(x)
            return x

    class Norm(nn.Module):
        def __init__(self, d_model, eps=1e-6):
            super().__init__()
            self.size = d_model
            # create two learnable parameters to calibrate normalisation
            self.alpha = nn.Parameter(torch.ones(self.size))
            self.bias = nn.Parameter(torch.zeros(self.size))
            self.eps = eps

        def forward(self, x):
            # QUIRK (003 Norm): UNBIASED std (x.std divides by d-1) and eps is added to
            # the std, not to the variance under the square root.
            norm = self.alpha * (x - x.mean(dim=-1, keepdim=True)) \
                / (x.std(dim=-1, keepdim=True) + self.eps) + self.bias
            return norm

    # build an encoder layer with one multi-head attention layer and one feed-forward layer
    class EncoderLayer(nn.Module):
        # FIX: d_ff threaded through (the tutorial calls FeedForward(d_model), i.e. 2048).
        def __init__(self, d_model, heads, dropout=0.1, d_ff=2048):
            super().__init__()
            self.norm_1 = Norm(d_model)
            self.norm_2 = Norm(d_model)
            self.attn = MultiHeadAttention(heads, d_model)
            self.ff = FeedForward(d_model, d_ff)
            self.dropout_1 = nn.Dropout(dropout)
            self.dropout_2 = nn.Dropout(dropout)

        def forward(self, x, mask):
            # pre-norm residual blocks (003 EncoderLayer.forward)
            x2 = self.norm_1(x)
            x = x + self.dropout_1(self.attn(x2, x2, x2, mask))
            x2 = self.norm_2(x)
            x = x + self.dropout_2(self.ff(x2))
            return x

    # build a decoder layer with two multi-head attention layers and one feed-forward layer
    class DecoderLayer(nn.Module):
        def __init__(self, d_model, heads, dropout=0.1, d_ff=2048):
            super().__init__()
            self.norm_1 = Norm(d_model)
            self.norm_2 = Norm(d_model)
            self.norm_3 = Norm(d_model)
            self.dropout_1 = nn.Dropout(dropout)
            self.dropout_2 = nn.Dropout(dropout)
            self.dropout_3 = nn.Dropout(dropout)
            self.attn_1 = MultiHeadAttention(heads, d_model)
            self.attn_2 = MultiHeadAttention(heads, d_model)
            # FIX: tutorial has FeedForward(d_model).cuda(); d_ff threaded through.
            self.ff = FeedForward(d_model, d_ff)

        # FIX: tutorial's `def forward` is mis-indented (outside the class).
        def forward(self, x, e_outputs, src_mask, trg_mask):
            x2 = self.norm_1(x)
            x = x + self.dropout_1(self.attn_1(x2, x2, x2, trg_mask))
            x2 = self.norm_2(x)
            # QUIRK (003): cross-attention keys/values are the encoder output as is
            # (the encoder already applied its final Norm).
            x = x + self.dropout_2(self.attn_2(x2, e_outputs, e_outputs, src_mask))
            x2 = self.norm_3(x)
            x = x + self.dropout_3(self.ff(x2))
            return x

    # We can then build a convenient cloning function that can generate multiple layers:
    def get_clones(module, N):
        return nn.ModuleList([copy.deepcopy(module) for i in range(N)])

    class Encoder(nn.Module):
        def __init__(self, vocab_size, d_model, N, heads, d_ff=2048, max_seq_len=80):
            super().__init__()
            self.N = N
            self.embed = Embedder(vocab_size, d_model)
            self.pe = PositionalEncoder(d_model, max_seq_len)
            self.layers = get_clones(EncoderLayer(d_model, heads, d_ff=d_ff), N)
            self.norm = Norm(d_model)

        def forward(self, src, mask):
            x = self.embed(src)
            x = self.pe(x)
            # FIX: tutorial loops `for i in range(N)` over an undefined global N.
            for i in range(self.N):
                x = self.layers[i](x, mask)
            return self.norm(x)

    class Decoder(nn.Module):
        def __init__(self, vocab_size, d_model, N, heads, d_ff=2048, max_seq_len=80):
            super().__init__()
            self.N = N
            self.embed = Embedder(vocab_size, d_model)
            self.pe = PositionalEncoder(d_model, max_seq_len)
            self.layers = get_clones(DecoderLayer(d_model, heads, d_ff=d_ff), N)
            self.norm = Norm(d_model)

        def forward(self, trg, e_outputs, src_mask, trg_mask):
            x = self.embed(trg)
            x = self.pe(x)
            for i in range(self.N):
                x = self.layers[i](x, e_outputs, src_mask, trg_mask)
            return self.norm(x)

    class Transformer(nn.Module):
        def __init__(self, src_vocab, trg_vocab, d_model, N, heads, d_ff=2048, max_seq_len=80):
            super().__init__()
            self.encoder = Encoder(src_vocab, d_model, N, heads, d_ff, max_seq_len)
            self.decoder = Decoder(trg_vocab, d_model, N, heads, d_ff, max_seq_len)
            self.out = nn.Linear(d_model, trg_vocab)

        def forward(self, src, trg, src_mask, trg_mask):
            e_outputs = self.encoder(src, src_mask)
            d_output = self.decoder(trg, e_outputs, src_mask, trg_mask)
            output = self.out(d_output)
            return output
        # we don't perform softmax on the output (003): output is raw logits.

    return types.SimpleNamespace(**locals())


def _masks_003(src, trg, pad_id):
    """Masks exactly as 003 builds them (also used for 000, whose post shows none)."""
    # creates mask with 0s wherever there is padding in the input
    src_mask = (src != pad_id).unsqueeze(-2)                    # [B, 1, S] bool
    trg_mask = (trg != pad_id).unsqueeze(-2)                    # [B, 1, T] bool
    size = trg.size(1)  # get seq_len for matrix
    # FIX: tutorial writes np.ones(1, size, size); its translate() uses the tuple form.
    nopeak_mask = np.triu(np.ones((1, size, size)), k=1).astype('uint8')
    nopeak_mask = torch.from_numpy(nopeak_mask) == 0            # [1, T, T] bool
    trg_mask = trg_mask & nopeak_mask                           # [B, T, T] bool
    return src_mask, trg_mask


def build_floydhub(p):
    ns = _seed003()

    class Reference(ns.Transformer):
        """003 Transformer; forward(src, tgt) builds the masks as the tutorial does."""
        def forward(self, src, tgt):
            src_mask, trg_mask = _masks_003(src, tgt, p['pad_id'])
            return super().forward(src, tgt, src_mask, trg_mask)

    return Reference(p['src_vocab'], p['tgt_vocab'], p['d_model'], p['layers'], p['heads'],
                     d_ff=p['d_ff'], max_seq_len=p['max_len'])


# =====================================================================================
# Seed 000: codersarts, "Building a Transformer with PyTorch".
# The post shows PositionalEncoding, MultiHeadedAttention, PositionwiseFeedforwardLayer,
# EncoderLayer and a Transformer that calls Encoder/Decoder, but never shows Norm,
# Embedder, DecoderLayer, Encoder or Decoder: those are completed exactly as seed 003.
# =====================================================================================
def _seed000():
    ns003 = _seed003()
    Norm = ns003.Norm            # completed from 003 (alpha/bias, unbiased std, eps 1e-6)
    Embedder = ns003.Embedder    # completed from 003 (.embed), no sqrt(d_model) scaling
    get_clones = ns003.get_clones

    # Model hyperparameters (000 "Imports and Settings")
    d_model = 512  # Embedding size
    nhead = 8  # Number of attention heads
    num_encoder_layers = 6  # Number of encoder layers
    num_decoder_layers = 6  # Number of decoder layers
    dim_feedforward = 2048  # Inner layer dimensionality in feedforward network
    dropout = 0.1

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super(PositionalEncoding, self).__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            # QUIRK (000 PositionalEncoding): pe is stored SEQ-FIRST as [max_len, 1, d_model]
            # (pe.unsqueeze(0).transpose(0, 1)) ...
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer('pe', pe)

        def forward(self, x):
            # QUIRK (000 PositionalEncoding.forward): `x + self.pe[:x.size(0), :]` on a
            # BATCH-FIRST x [B, S, d] slices pe by the BATCH size: pe[:B] is [B, 1, d], so
            # row b of the table (position b's encoding) is broadcast-added to EVERY
            # position of batch element b.  Positions get no positional signal at all and
            # the output of element b depends on its index b in the batch.  Kept as is.
            x = x + self.pe[:x.size(0), :]
            return self.dropout(x)

    class MultiHeadedAttention(nn.Module):
        def __init__(self, h, d_model, dropout=0.1):
            super(MultiHeadedAttention, self).__init__()
            assert d_model % h == 0  # We assume d_v always equals d_k
            self.d_k = d_model // h
            self.h = h
            # FIX: forward() uses self.d_model, which the tutorial's __init__ never sets.
            self.d_model = d_model
            # Layers to project input features to q, k, v vectors
            self.q_linear = nn.Linear(d_model, d_model)
            self.k_linear = nn.Linear(d_model, d_model)
            self.v_linear = nn.Linear(d_model, d_model)
            self.dropout = nn.Dropout(p=dropout)
            self.out = nn.Linear(d_model, d_model)

        def attention(self, q, k, v, d_k, mask=None, dropout=None):
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
            if mask is not None:
                # QUIRK (000): same as 003, masked scores filled with -1e9 (not -inf).
                mask = mask.unsqueeze(1)
                scores = scores.masked_fill(mask == 0, -1e9)
            scores = F.softmax(scores, dim=-1)
            if dropout is not None:
                scores = dropout(scores)
            output = torch.matmul(scores, v)
            return output

        def forward(self, q, k, v, mask=None):
            bs = q.size(0)
            # Perform linear projection
            q = self.q_linear(q).view(bs, -1, self.h, self.d_k)
            k = self.k_linear(k).view(bs, -1, self.h, self.d_k)
            v = self.v_linear(v).view(bs, -1, self.h, self.d_k)
            # Transpose to get dimensions bs * h * sl * d_model
            q = q.transpose(1, 2)
            k = k.transpose(1, 2)
            v = v.transpose(1, 2)
            # Calculate attention using function we defined above
            scores = self.attention(q, k, v, self.d_k, mask, self.dropout)
            # Concatenate heads and project back to original dimension
            concat = scores.transpose(1, 2).contiguous().view(bs, -1, self.d_model)
            output = self.out(concat)
            return output

    class PositionwiseFeedforwardLayer(nn.Module):
        def __init__(self, d_model, d_ff, dropout=0.1):
            super(PositionwiseFeedforwardLayer, self).__init__()
            self.linear1 = nn.Linear(d_model, d_ff)
            self.dropout = nn.Dropout(dropout)
            self.linear2 = nn.Linear(d_ff, d_model)

        def forward(self, x):
            x = self.dropout(F.relu(self.linear1(x)))
            x = self.linear2(x)
            return x

    class EncoderLayer(nn.Module):
        # FIX: the tutorial reads d_ff from an undefined global (it defines
        # dim_feedforward = 2048); taken as a parameter here, default 2048.
        def __init__(self, d_model, heads, dropout=0.1, d_ff=dim_feedforward):
            super(EncoderLayer, self).__init__()
            self.norm_1 = Norm(d_model)
            self.norm_2 = Norm(d_model)
            self.attn = MultiHeadedAttention(heads, d_model)
            self.ff = PositionwiseFeedforwardLayer(d_model, d_ff, dropout)
            self.dropout_1 = nn.Dropout(dropout)
            self.dropout_2 = nn.Dropout(dropout)

        def forward(self, x, mask):
            x2 = self.norm_1(x)
            x = x + self.dropout_1(self.attn(x2, x2, x2, mask))
            x2 = self.norm_2(x)
            x = x + self.dropout_2(self.ff(x2))
            return x

    # ---- completed from 003 (not shown in 000), using 000's building blocks ----
    class DecoderLayer(nn.Module):
        def __init__(self, d_model, heads, dropout=0.1, d_ff=dim_feedforward):
            super(DecoderLayer, self).__init__()
            self.norm_1 = Norm(d_model)
            self.norm_2 = Norm(d_model)
            self.norm_3 = Norm(d_model)
            self.dropout_1 = nn.Dropout(dropout)
            self.dropout_2 = nn.Dropout(dropout)
            self.dropout_3 = nn.Dropout(dropout)
            self.attn_1 = MultiHeadedAttention(heads, d_model)
            self.attn_2 = MultiHeadedAttention(heads, d_model)
            self.ff = PositionwiseFeedforwardLayer(d_model, d_ff, dropout)

        def forward(self, x, e_outputs, src_mask, trg_mask):
            x2 = self.norm_1(x)
            x = x + self.dropout_1(self.attn_1(x2, x2, x2, trg_mask))
            x2 = self.norm_2(x)
            x = x + self.dropout_2(self.attn_2(x2, e_outputs, e_outputs, src_mask))
            x2 = self.norm_3(x)
            x = x + self.dropout_3(self.ff(x2))
            return x

    # 000's Transformer calls Encoder(n_src_vocab, N, n_src_vocab, d_model, d_ff, h, dropout)
    # and Decoder(n_tgt_vocab, N, n_src_vocab, d_model, d_ff, h, dropout).  The meaning
    # of the third argument is never shown; it is read here as the positional-encoding
    # length max_len (default 5000, 000's PositionalEncoding default) rather than the
    # vocabulary size the tutorial passes there.
    class Encoder(nn.Module):
        def __init__(self, vocab_size, N, max_len, d_model, d_ff, heads, dropout=0.1):
            super(Encoder, self).__init__()
            self.N = N
            self.embed = Embedder(vocab_size, d_model)
            self.pe = PositionalEncoding(d_model, dropout, max_len)
            self.layers = get_clones(EncoderLayer(d_model, heads, dropout, d_ff), N)
            self.norm = Norm(d_model)

        def forward(self, src, mask):
            x = self.embed(src)      # no sqrt(d_model) scaling (000 never scales)
            x = self.pe(x)           # QUIRK: batch-indexed pe, see PositionalEncoding
            for i in range(self.N):
                x = self.layers[i](x, mask)
            return self.norm(x)

    class Decoder(nn.Module):
        def __init__(self, vocab_size, N, max_len, d_model, d_ff, heads, dropout=0.1):
            super(Decoder, self).__init__()
            self.N = N
            self.embed = Embedder(vocab_size, d_model)
            self.pe = PositionalEncoding(d_model, dropout, max_len)
            self.layers = get_clones(DecoderLayer(d_model, heads, dropout, d_ff), N)
            self.norm = Norm(d_model)

        def forward(self, trg, e_outputs, src_mask, trg_mask):
            x = self.embed(trg)
            x = self.pe(x)           # QUIRK: batch-indexed pe, see PositionalEncoding
            for i in range(self.N):
                x = self.layers[i](x, e_outputs, src_mask, trg_mask)
            return self.norm(x)

    class Transformer(nn.Module):
        def __init__(self, n_src_vocab, n_tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1,
                     max_len=5000):
            super(Transformer, self).__init__()
            self.encoder = Encoder(n_src_vocab, N, max_len, d_model, d_ff, h, dropout)
            self.decoder = Decoder(n_tgt_vocab, N, max_len, d_model, d_ff, h, dropout)
            self.out = nn.Linear(d_model, n_tgt_vocab)

        def forward(self, src, tgt, src_mask, tgt_mask):
            e_outputs = self.encoder(src, src_mask)
            d_output = self.decoder(tgt, e_outputs, src_mask, tgt_mask)
            output = self.out(d_output)
            return output

    return types.SimpleNamespace(**locals())


def build_codersarts(p):
    ns = _seed000()

    class Reference(ns.Transformer):
        """000 Transformer; forward(src, tgt) builds masks the way 003 does."""
        def forward(self, src, tgt):
            src_mask, tgt_mask = _masks_003(src, tgt, p['pad_id'])
            return super().forward(src, tgt, src_mask, tgt_mask)

    return Reference(p['src_vocab'], p['tgt_vocab'], N=p['layers'], d_model=p['d_model'],
                     d_ff=p['d_ff'], h=p['heads'], max_len=p['max_len'])


# =====================================================================================
# Seed 001: simple blog, "how to build each important part of a Transformer".
# Decoder-free stack with no mask; input "tokens", output logits [B, S, vocab].
# =====================================================================================
def _seed001():
    # Multi-Head Self-Attention Layer
    class MultiHeadSelfAttention(nn.Module):
        def __init__(self, embed_size, heads):
            super(MultiHeadSelfAttention, self).__init__()
            self.embed_size = embed_size
            self.heads = heads
            self.head_dim = embed_size // heads  # Split the embedding size across heads

            # QUIRK (001): these three per-head Linear(head_dim, head_dim, bias=False) layers
            # are created (so they are in the state_dict) but forward() NEVER applies
            # them: queries/keys/values are the raw input split into heads.
            self.values = nn.Linear(self.head_dim, self.head_dim, bias=False)
            self.keys = nn.Linear(self.head_dim, self.head_dim, bias=False)
            self.queries = nn.Linear(self.head_dim, self.head_dim, bias=False)
            self.fc_out = nn.Linear(heads * self.head_dim, embed_size)

        def forward(self, values, keys, query):
            N = query.shape[0]
            value_len, key_len, query_len = values.shape[1], keys.shape[1], query.shape[1]

            # Split embeddings into multiple heads
            values = values.reshape(N, value_len, self.heads, self.head_dim)
            keys = keys.reshape(N, key_len, self.heads, self.head_dim)
            queries = query.reshape(N, query_len, self.heads, self.head_dim)

            # Calculate the attention score (how words relate)
            attention = torch.einsum("nqhd,nkhd->nhqk", [queries, keys])

            # Softmax to normalize the scores
            # QUIRK (001): scaled by sqrt(embed_size), NOT sqrt(head_dim); no mask at all
            # (padding tokens are attended to like any other token).
            attention = torch.softmax(attention / (self.embed_size ** 0.5), dim=3)

            # Weighted sum of values based on attention scores
            out = torch.einsum("nhql,nlhd->nqhd", [attention, values]).reshape(
                N, query_len, self.heads * self.head_dim
            )

            # Final linear layer to process the output
            out = self.fc_out(out)
            return out

    # Feedforward Network
    class FeedForward(nn.Module):
        def __init__(self, embed_size, forward_expansion):
            super(FeedForward, self).__init__()
            self.fc1 = nn.Linear(embed_size, forward_expansion * embed_size)
            self.fc2 = nn.Linear(forward_expansion * embed_size, embed_size)

        def forward(self, x):
            x = torch.relu(self.fc1(x))  # Apply a ReLU function to add complexity
            return self.fc2(x)

    # Positional Encoding
    class PositionalEncoding(nn.Module):
        def __init__(self, embed_size, max_len):
            super(PositionalEncoding, self).__init__()
            # QUIRK (001): a plain tensor attribute, NOT a registered buffer, so it is not
            # in the state_dict / exported weights; a consumer must recompute it.
            self.encoding = torch.zeros(max_len, embed_size)

            for pos in range(max_len):
                for i in range(0, embed_size, 2):
                    # QUIRK (001): exponent 2*i/embed_size with i already even (so the
                    # frequencies fall off twice as fast as the paper's), and the SAME
                    # exponent for sin and cos.  Python double math, rounded to float32.
                    self.encoding[pos, i] = math.sin(pos / (10000 ** (2 * i / embed_size)))
                    self.encoding[pos, i + 1] = math.cos(pos / (10000 ** (2 * i / embed_size)))

        def forward(self, x):
            seq_len = x.size(1)
            return x + self.encoding[:seq_len, :].to(x.device)

    # Transformer Block with Layer Normalization and Residual Connections
    class TransformerBlock(nn.Module):
        def __init__(self, embed_size, heads, forward_expansion, dropout):
            super(TransformerBlock, self).__init__()
            # Multi-head attention
            self.attention = MultiHeadSelfAttention(embed_size, heads)
            # Feedforward network
            self.feed_forward = FeedForward(embed_size, forward_expansion)
            # Layer normalization (nn.LayerNorm: biased variance, eps=1e-5 inside sqrt)
            self.norm1 = nn.LayerNorm(embed_size)
            self.norm2 = nn.LayerNorm(embed_size)
            # Dropout to prevent overfitting (QUIRK (001): defined, never applied)
            self.dropout = nn.Dropout(dropout)

        def forward(self, value, key, query):
            # Apply multi-head attention and add residual connection (post-norm)
            attention = self.attention(value, key, query)
            x = self.norm1(attention + query)

            # Apply feedforward and another residual connection
            forward = self.feed_forward(x)
            out = self.norm2(forward + x)
            return out

    # Full Transformer Model
    class Transformer(nn.Module):
        def __init__(self, embed_size, heads, depth, forward_expansion, max_len, dropout, vocab_size):
            super(Transformer, self).__init__()
            # Embedding layer to convert words to dense vectors (no sqrt scaling)
            self.embedding = nn.Embedding(vocab_size, embed_size)
            # Positional encoding to remember word order
            self.pos_encoding = PositionalEncoding(embed_size, max_len)
            # Stack multiple Transformer blocks
            self.layers = nn.ModuleList(
                [TransformerBlock(embed_size, heads, forward_expansion, dropout) for _ in range(depth)]
            )
            # Final output layer to predict the next word
            self.fc_out = nn.Linear(embed_size, vocab_size)

        def forward(self, x):
            # Convert input words to embeddings
            x = self.embedding(x)
            # Add positional encodings
            x = self.pos_encoding(x)

            # Pass through each Transformer block
            for layer in self.layers:
                x = layer(x, x, x)

            # Predict the output
            out = self.fc_out(x)
            return out

    return types.SimpleNamespace(**locals())


def build_simple(p):
    ns = _seed001()
    if p['d_ff'] % p['d_model'] != 0:
        raise SystemExit('tutorial-simple: d_ff must be a multiple of d_model '
                         '(forward_expansion = d_ff // d_model)')

    class Reference(ns.Transformer):
        def forward(self, tokens):
            return super().forward(tokens)

    return Reference(embed_size=p['d_model'], heads=p['heads'], depth=p['layers'],
                     forward_expansion=p['d_ff'] // p['d_model'], max_len=p['max_len'],
                     dropout=0.1, vocab_size=p['vocab'])


# =====================================================================================
# Seed 004: Weights & Biases, "Transformer Deep Dive" (Carlo Lepelaars), refactored from
# the Annotated Transformer.  Output is LOG-probabilities (Output ends in LogSoftmax).
# =====================================================================================
def _seed004():
    class Embed(nn.Module):
        def __init__(self, vocab: int, d_model: int = 512):
            super(Embed, self).__init__()
            self.d_model = d_model
            self.vocab = vocab
            self.emb = nn.Embedding(self.vocab, self.d_model)
            # FIX: tutorial has torch.sqrt(self.d_model), which fails on an int.
            self.scaling = math.sqrt(self.d_model)

        def forward(self, x):
            return self.emb(x) * self.scaling

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model: int = 512, dropout: float = .1, max_len: int = 5000):
            super(PositionalEncoding, self).__init__()
            self.dropout = nn.Dropout(dropout)
            # Compute the positional encodings in log space
            pe = torch.zeros(max_len, d_model)
            # QUIRK (004): position is an int64 arange and log(10000) is a float32
            # tensor (torch.log(torch.Tensor([10000.0]))), so div_term is float32 math.
            position = torch.arange(0, max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * -(torch.log(torch.Tensor([10000.0])) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0)                              # [1, max_len, d_model]
            self.register_buffer('pe', pe)

        def forward(self, x):
            # FIX: tutorial wraps the slice in Variable(..., requires_grad=False).
            x = x + self.pe[:, :x.size(1)]
            return self.dropout(x)

    # QUIRK (004): a plain class, not an nn.Module, so its nn.Dropout is not registered
    # as a submodule: model.eval() never reaches it and, in the tutorial as written,
    # attention-probability dropout (p=0.1, MultiHeadAttention's default) STAYS ACTIVE
    # in eval mode, making inference random.  A reference has to be deterministic, so
    # build_wandb's Reference.train() switches these dropouts too (see there).
    class Attention:
        def __init__(self, dropout: float = 0.):
            super(Attention, self).__init__()
            self.dropout = nn.Dropout(dropout)
            self.softmax = nn.Softmax(dim=-1)

        def forward(self, query, key, value, mask=None):
            d_k = query.size(-1)
            scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
            if mask is not None:
                scores = scores.masked_fill(mask == 0, -1e9)   # -1e9, not -inf
            p_attn = self.dropout(self.softmax(scores))
            return torch.matmul(p_attn, value)

        def __call__(self, query, key, value, mask=None):
            return self.forward(query, key, value, mask)

    class MultiHeadAttention(nn.Module):
        def __init__(self, h: int = 8, d_model: int = 512, dropout: float = 0.1):
            super(MultiHeadAttention, self).__init__()
            self.d_k = d_model // h
            self.h = h
            self.attn = Attention(dropout)
            self.lindim = (d_model, d_model)
            # QUIRK (004): FOUR biased Linear layers in self.linears, but zip() with the
            # 3-tuple (query, key, value) only uses linears[0..2]; linears[3] is in the
            # state_dict but never used.  The output projection is the separate
            # final_linear, which has NO bias.
            self.linears = nn.ModuleList([copy.deepcopy(nn.Linear(*self.lindim)) for _ in range(4)])
            self.final_linear = nn.Linear(*self.lindim, bias=False)
            self.dropout = nn.Dropout(p=dropout)

        def forward(self, query, key, value, mask=None):
            if mask is not None:
                mask = mask.unsqueeze(1)
            query, key, value = [l(x).view(query.size(0), -1, self.h, self.d_k).transpose(1, 2)
                                 for l, x in zip(self.linears, (query, key, value))]
            nbatches = query.size(0)
            x = self.attn(query, key, value, mask=mask)
            # Concatenate and multiply by W^O
            x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
            return self.final_linear(x)

    class LayerNorm(nn.Module):
        def __init__(self, features: int, eps: float = 1e-6):
            super(LayerNorm, self).__init__()
            self.gamma = nn.Parameter(torch.ones(features))
            self.beta = nn.Parameter(torch.zeros(features))
            self.eps = eps

        def forward(self, x):
            # QUIRK (004 LayerNorm): unbiased std, eps added to std (like 003's Norm).
            mean = x.mean(-1, keepdim=True)
            std = x.std(-1, keepdim=True)
            return self.gamma * (x - mean) / (std + self.eps) + self.beta

    class ResidualConnection(nn.Module):
        def __init__(self, size: int = 512, dropout: float = .1):
            super(ResidualConnection, self).__init__()
            self.norm = LayerNorm(size)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x, sublayer):
            # pre-norm: x + Dropout(SubLayer(LayerNorm(x)))
            return x + self.dropout(sublayer(self.norm(x)))

    class FeedForward(nn.Module):
        def __init__(self, d_model: int = 512, d_ff: int = 2048, dropout: float = .1):
            super(FeedForward, self).__init__()
            self.l1 = nn.Linear(d_model, d_ff)
            self.l2 = nn.Linear(d_ff, d_model)
            self.relu = nn.ReLU()
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            return self.l2(self.dropout(self.relu(self.l1(x))))

    class EncoderLayer(nn.Module):
        def __init__(self, size: int, self_attn, feed_forward, dropout: float = .1):
            super(EncoderLayer, self).__init__()
            self.self_attn = self_attn
            self.feed_forward = feed_forward
            self.sub1 = ResidualConnection(size, dropout)
            self.sub2 = ResidualConnection(size, dropout)
            self.size = size

        def forward(self, x, mask):
            x = self.sub1(x, lambda x: self.self_attn(x, x, x, mask))
            return self.sub2(x, self.feed_forward)

    class Encoder(nn.Module):
        def __init__(self, layer, n: int = 6):
            super(Encoder, self).__init__()
            self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(n)])
            self.norm = LayerNorm(layer.size)

        def forward(self, x, mask):
            for layer in self.layers:
                x = layer(x, mask)
            return self.norm(x)

    class DecoderLayer(nn.Module):
        def __init__(self, size: int, self_attn, src_attn, feed_forward, dropout: float = .1):
            super(DecoderLayer, self).__init__()
            self.size = size
            self.self_attn = self_attn
            self.src_attn = src_attn
            self.feed_forward = feed_forward
            self.sub1 = ResidualConnection(size, dropout)
            self.sub2 = ResidualConnection(size, dropout)
            self.sub3 = ResidualConnection(size, dropout)

        def forward(self, x, memory, src_mask, tgt_mask):
            x = self.sub1(x, lambda x: self.self_attn(x, x, x, tgt_mask))
            x = self.sub2(x, lambda x: self.src_attn(x, memory, memory, src_mask))
            return self.sub3(x, self.feed_forward)

    class Decoder(nn.Module):
        def __init__(self, layer, n: int = 6):
            super(Decoder, self).__init__()
            self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(n)])
            self.norm = LayerNorm(layer.size)

        def forward(self, x, memory, src_mask, tgt_mask):
            for layer in self.layers:
                x = layer(x, memory, src_mask, tgt_mask)
            return self.norm(x)

    class Output(nn.Module):
        def __init__(self, input_dim: int, output_dim: int):
            super(Output, self).__init__()
            self.l1 = nn.Linear(input_dim, output_dim)
            self.log_softmax = nn.LogSoftmax(dim=-1)

        def forward(self, x):
            logits = self.l1(x)
            return self.log_softmax(logits)

    class EncoderDecoder(nn.Module):
        def __init__(self, encoder, decoder, src_embed, tgt_embed, final_layer):
            super(EncoderDecoder, self).__init__()
            self.encoder = encoder
            self.decoder = decoder
            self.src_embed = src_embed
            self.tgt_embed = tgt_embed
            self.final_layer = final_layer

        def forward(self, src, tgt, src_mask, tgt_mask):
            return self.final_layer(self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask))

        def encode(self, src, src_mask):
            return self.encoder(self.src_embed(src), src_mask)

        def decode(self, memory, src_mask, tgt, tgt_mask):
            return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)

    # FIX: the tutorial's make_model only forwards d_model to EncoderLayer/DecoderLayer and
    # builds every other piece with its defaults (h=8, d_ff=2048, n=6, Embed/
    # PositionalEncoding d_model=512), so it only works at d_model=512.  All sizes are
    # threaded through here; the structure is unchanged.
    def make_model(input_vocab, output_vocab, d_model=512, h=8, d_ff=2048, n=6, max_len=5000,
                   cls=EncoderDecoder):
        encoder = Encoder(EncoderLayer(d_model, MultiHeadAttention(h, d_model), FeedForward(d_model, d_ff)), n)
        decoder = Decoder(DecoderLayer(d_model, MultiHeadAttention(h, d_model), MultiHeadAttention(h, d_model),
                                       FeedForward(d_model, d_ff)), n)
        input_embed = nn.Sequential(Embed(vocab=input_vocab, d_model=d_model),
                                    PositionalEncoding(d_model, max_len=max_len))
        output_embed = nn.Sequential(Embed(vocab=output_vocab, d_model=d_model),
                                     PositionalEncoding(d_model, max_len=max_len))
        output = Output(input_dim=d_model, output_dim=output_vocab)
        model = cls(encoder, decoder, input_embed, output_embed, output)
        # (xavier init of the tutorial's make_model is done by `export`, for every model)
        return model

    return types.SimpleNamespace(**locals())


def subsequent_mask(size):
    """Annotated Transformer's subsequent_mask: [1, size, size] bool, True on/below diag."""
    attn_shape = (1, size, size)
    subsequent_mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return subsequent_mask == 0


def build_wandb(p):
    ns = _seed004()
    pad = p['pad_id']

    class Reference(ns.EncoderDecoder):
        """004 EncoderDecoder; masks as the Annotated Transformer's Batch builds them."""
        def train(self, mode=True):
            # DEVIATION (see the Attention QUIRK): also put the unregistered attention
            # dropouts in eval mode, so that eval() really makes dropout the identity.
            super().train(mode)
            for mod in self.modules():
                if isinstance(mod, ns.MultiHeadAttention):
                    mod.attn.dropout.train(mode)
            return self

        def forward(self, src, tgt):
            src_mask = (src != pad).unsqueeze(-2)                                  # [B,1,S]
            tgt_mask = (tgt != pad).unsqueeze(-2) & subsequent_mask(tgt.size(-1))  # [B,T,T]
            return super().forward(src, tgt, src_mask, tgt_mask)

    return ns.make_model(p['src_vocab'], p['tgt_vocab'], d_model=p['d_model'], h=p['heads'],
                         d_ff=p['d_ff'], n=p['layers'], max_len=p['max_len'], cls=Reference)


# =====================================================================================
# PyTorch's official "Language Translation with nn.Transformer and torchtext" tutorial:
# Seq2SeqTransformer (post-norm nn.Transformer, ReLU, LayerNorm eps 1e-5, final norms).
# =====================================================================================
def _seq2seq():
    # helper Module that adds positional encoding to the token embedding
    class PositionalEncoding(nn.Module):
        def __init__(self, emb_size: int, dropout: float, maxlen: int = 5000):
            super(PositionalEncoding, self).__init__()
            den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
            pos = torch.arange(0, maxlen).reshape(maxlen, 1)
            pos_embedding = torch.zeros((maxlen, emb_size))
            pos_embedding[:, 0::2] = torch.sin(pos * den)
            pos_embedding[:, 1::2] = torch.cos(pos * den)
            pos_embedding = pos_embedding.unsqueeze(-2)        # [maxlen, 1, emb]
            self.dropout = nn.Dropout(dropout)
            self.register_buffer('pos_embedding', pos_embedding)

        def forward(self, token_embedding):
            # The tutorial is seq-first: token_embedding [S, B, E] + pos_embedding[:S]
            # ([S, 1, E]).  Here nn.Transformer runs batch_first=True, so the same table
            # rows are added along the SEQUENCE axis: [B, S, E] + [1, S, E].
            pe = self.pos_embedding[:token_embedding.size(1), :].transpose(0, 1)
            return self.dropout(token_embedding + pe)

    # helper Module to convert tensor of input indices into corresponding tensor of token embeddings
    class TokenEmbedding(nn.Module):
        def __init__(self, vocab_size: int, emb_size):
            super(TokenEmbedding, self).__init__()
            self.embedding = nn.Embedding(vocab_size, emb_size)
            self.emb_size = emb_size

        def forward(self, tokens):
            return self.embedding(tokens.long()) * math.sqrt(self.emb_size)

    # Seq2Seq Network
    class Seq2SeqTransformer(nn.Module):
        def __init__(self, num_encoder_layers: int, num_decoder_layers: int, emb_size: int,
                     nhead: int, src_vocab_size: int, tgt_vocab_size: int,
                     dim_feedforward: int = 512, dropout: float = 0.1, maxlen: int = 5000):
            super(Seq2SeqTransformer, self).__init__()
            # batch_first=True (the tutorial is seq-first); dropout=0 (eval anyway)
            self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead,
                                              num_encoder_layers=num_encoder_layers,
                                              num_decoder_layers=num_decoder_layers,
                                              dim_feedforward=dim_feedforward,
                                              dropout=dropout, batch_first=True)
            self.generator = nn.Linear(emb_size, tgt_vocab_size)
            self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
            self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
            self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout, maxlen=maxlen)

        def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                    memory_key_padding_mask):
            src_emb = self.positional_encoding(self.src_tok_emb(src))
            tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
            outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                    src_padding_mask, tgt_padding_mask, memory_key_padding_mask)
            return self.generator(outs)

    return types.SimpleNamespace(**locals())


def build_torch_transformer(p):
    ns = _seq2seq()
    pad = p['pad_id']

    class Reference(ns.Seq2SeqTransformer):
        def forward(self, src, tgt):
            # tutorial's create_mask(): tgt_mask = generate_square_subsequent_mask (float 0 /
            # -inf above the diagonal); padding masks are `== PAD_IDX` (True = ignore).
            # src_mask is passed as None (the tutorial passes an all-False bool [S, S]
            # mask, which masks nothing).  NOTE: with src_mask None, eval mode and no
            # grad, torch 1.13's TransformerEncoder takes its nested-tensor fast path:
            # padded positions of the encoder output become 0 before the final encoder
            # norm (so memory there = norm bias).  They are masked out of cross-attention
            # by memory_key_padding_mask, so the decoder output does not depend on them.
            tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
            src_padding_mask = src == pad
            tgt_padding_mask = tgt == pad
            return super().forward(src, tgt, None, tgt_mask, src_padding_mask,
                                   tgt_padding_mask, src_padding_mask)

    return Reference(p['layers'], p['layers'], p['d_model'], p['heads'], p['src_vocab'],
                     p['tgt_vocab'], dim_feedforward=p['d_ff'], dropout=0.0, maxlen=p['max_len'])


# =====================================================================================
# BERT encoder, HuggingFace BertModel layout and arithmetic (eager attention, absolute
# learned positions, post-LN, GELU-erf, LayerNorm eps 1e-12, -10000 additive mask).
# No pooler.  Output: last hidden state [B, S, d_model].
# =====================================================================================
def _bert():
    class BertEmbeddings(nn.Module):
        def __init__(self, vocab, d, max_len, type_vocab, eps):
            super().__init__()
            self.word_embeddings = nn.Embedding(vocab, d)
            self.position_embeddings = nn.Embedding(max_len, d)
            self.token_type_embeddings = nn.Embedding(type_vocab, d)
            self.LayerNorm = nn.LayerNorm(d, eps=eps)
            self.dropout = nn.Dropout(0.1)
            # (HF also keeps a `position_ids` buffer; it is just arange, not exported.)

        def forward(self, input_ids, token_type_ids):
            seq_length = input_ids.size(1)
            position_ids = torch.arange(seq_length, dtype=torch.long).unsqueeze(0)
            inputs_embeds = self.word_embeddings(input_ids)
            token_type_embeddings = self.token_type_embeddings(token_type_ids)
            # HF order: (word + token_type) + position
            embeddings = inputs_embeds + token_type_embeddings
            position_embeddings = self.position_embeddings(position_ids)
            embeddings += position_embeddings
            embeddings = self.LayerNorm(embeddings)
            embeddings = self.dropout(embeddings)
            return embeddings

    class BertSelfAttention(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.num_attention_heads = heads
            self.attention_head_size = d // heads
            self.all_head_size = heads * self.attention_head_size
            self.query = nn.Linear(d, self.all_head_size)
            self.key = nn.Linear(d, self.all_head_size)
            self.value = nn.Linear(d, self.all_head_size)
            self.dropout = nn.Dropout(0.1)

        def transpose_for_scores(self, x):
            new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
            x = x.view(new_x_shape)
            return x.permute(0, 2, 1, 3)

        def forward(self, hidden_states, attention_mask):
            query_layer = self.transpose_for_scores(self.query(hidden_states))
            key_layer = self.transpose_for_scores(self.key(hidden_states))
            value_layer = self.transpose_for_scores(self.value(hidden_states))
            attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
            attention_scores = attention_scores / math.sqrt(self.attention_head_size)
            # additive mask (0 for tokens, -10000 for padding), added AFTER the scaling
            attention_scores = attention_scores + attention_mask
            attention_probs = nn.functional.softmax(attention_scores, dim=-1)
            attention_probs = self.dropout(attention_probs)
            context_layer = torch.matmul(attention_probs, value_layer)
            context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
            new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
            return context_layer.view(new_context_layer_shape)

    class BertSelfOutput(nn.Module):
        def __init__(self, d, eps):
            super().__init__()
            self.dense = nn.Linear(d, d)
            self.LayerNorm = nn.LayerNorm(d, eps=eps)
            self.dropout = nn.Dropout(0.1)

        def forward(self, hidden_states, input_tensor):
            hidden_states = self.dense(hidden_states)
            hidden_states = self.dropout(hidden_states)
            return self.LayerNorm(hidden_states + input_tensor)

    class BertAttention(nn.Module):
        def __init__(self, d, heads, eps):
            super().__init__()
            self.self = BertSelfAttention(d, heads)
            self.output = BertSelfOutput(d, eps)

        def forward(self, hidden_states, attention_mask):
            self_outputs = self.self(hidden_states, attention_mask)
            return self.output(self_outputs, hidden_states)

    class BertIntermediate(nn.Module):
        def __init__(self, d, d_ff):
            super().__init__()
            self.dense = nn.Linear(d, d_ff)

        def forward(self, hidden_states):
            return F.gelu(self.dense(hidden_states))   # "gelu": exact erf form

    class BertOutput(nn.Module):
        def __init__(self, d, d_ff, eps):
            super().__init__()
            self.dense = nn.Linear(d_ff, d)
            self.LayerNorm = nn.LayerNorm(d, eps=eps)
            self.dropout = nn.Dropout(0.1)

        def forward(self, hidden_states, input_tensor):
            hidden_states = self.dense(hidden_states)
            hidden_states = self.dropout(hidden_states)
            return self.LayerNorm(hidden_states + input_tensor)

    class BertLayer(nn.Module):
        def __init__(self, d, heads, d_ff, eps):
            super().__init__()
            self.attention = BertAttention(d, heads, eps)
            self.intermediate = BertIntermediate(d, d_ff)
            self.output = BertOutput(d, d_ff, eps)

        def forward(self, hidden_states, attention_mask):
            attention_output = self.attention(hidden_states, attention_mask)
            intermediate_output = self.intermediate(attention_output)
            return self.output(intermediate_output, attention_output)

    class BertEncoder(nn.Module):
        def __init__(self, d, heads, d_ff, layers, eps):
            super().__init__()
            self.layer = nn.ModuleList([BertLayer(d, heads, d_ff, eps) for _ in range(layers)])

        def forward(self, hidden_states, attention_mask):
            for layer_module in self.layer:
                hidden_states = layer_module(hidden_states, attention_mask)
            return hidden_states

    class BertModel(nn.Module):
        def __init__(self, vocab, d, heads, d_ff, layers, max_len, type_vocab, pad_id, eps=1e-12):
            super().__init__()
            self.pad_id = pad_id
            self.embeddings = BertEmbeddings(vocab, d, max_len, type_vocab, eps)
            self.encoder = BertEncoder(d, heads, d_ff, layers, eps)

        def forward(self, tokens, token_types=None):
            if token_types is None:
                token_types = torch.zeros_like(tokens)
            attention_mask = (tokens != self.pad_id)
            # HF get_extended_attention_mask (classic form): [B,1,1,S], (1 - m) * -10000.0
            extended_attention_mask = attention_mask[:, None, None, :].to(torch.float32)
            extended_attention_mask = (1.0 - extended_attention_mask) * -10000.0
            embedding_output = self.embeddings(tokens, token_types)
            return self.encoder(embedding_output, extended_attention_mask)

    return types.SimpleNamespace(**locals())


def build_bert(p):
    ns = _bert()
    return ns.BertModel(p['vocab'], p['d_model'], p['heads'], p['d_ff'], p['layers'],
                        p['max_len'], p['type_vocab'], p['pad_id'])


# =====================================================================================
# GPT-2, HuggingFace GPT2LMHeadModel layout and arithmetic (Conv1D = x @ W + b with W
# stored [in, out], pre-LN, gelu_new (tanh), causal mask with finfo.min, lm_head tied
# to wte).  No padding mask (HF without attention_mask).  Output logits [B, S, vocab].
# =====================================================================================
def _gpt2():
    class Conv1D(nn.Module):
        def __init__(self, nf, nx):
            super().__init__()
            self.nf = nf
            self.weight = nn.Parameter(torch.empty(nx, nf))   # [in, out]
            self.bias = nn.Parameter(torch.zeros(nf))
            nn.init.normal_(self.weight, std=0.02)

        def forward(self, x):
            size_out = x.size()[:-1] + (self.nf,)
            x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return x.view(size_out)

    def gelu_new(input):
        # HF NewGELUActivation, written out (not F.gelu(approximate='tanh'))
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))

    class GPT2Attention(nn.Module):
        def __init__(self, d, heads, max_len):
            super().__init__()
            self.embed_dim = d
            self.num_heads = heads
            self.head_dim = d // heads
            self.split_size = d
            # causal table, non-persistent (not exported), like recent HF versions
            self.register_buffer('bias', torch.tril(torch.ones((max_len, max_len), dtype=torch.bool))
                                 .view(1, 1, max_len, max_len), persistent=False)
            self.c_attn = Conv1D(3 * d, d)
            self.c_proj = Conv1D(d, d)

        def _split_heads(self, tensor):
            new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
            return tensor.view(new_shape).permute(0, 2, 1, 3)

        def _merge_heads(self, tensor):
            tensor = tensor.permute(0, 2, 1, 3).contiguous()
            new_shape = tensor.size()[:-2] + (self.num_heads * self.head_dim,)
            return tensor.view(new_shape)

        def _attn(self, query, key, value):
            attn_weights = torch.matmul(query, key.transpose(-1, -2))
            attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype)
            query_length, key_length = query.size(-2), key.size(-2)
            causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
            mask_value = torch.full([], torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype)
            attn_weights = torch.where(causal_mask, attn_weights, mask_value)
            attn_weights = nn.functional.softmax(attn_weights, dim=-1)
            return torch.matmul(attn_weights, value)

        def forward(self, hidden_states):
            query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
            query = self._split_heads(query)
            key = self._split_heads(key)
            value = self._split_heads(value)
            attn_output = self._attn(query, key, value)
            attn_output = self._merge_heads(attn_output)
            return self.c_proj(attn_output)

    class GPT2MLP(nn.Module):
        def __init__(self, d, d_ff):
            super().__init__()
            self.c_fc = Conv1D(d_ff, d)
            self.c_proj = Conv1D(d, d_ff)

        def forward(self, hidden_states):
            return self.c_proj(gelu_new(self.c_fc(hidden_states)))

    class GPT2Block(nn.Module):
        def __init__(self, d, heads, d_ff, max_len, eps):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d, eps=eps)
            self.attn = GPT2Attention(d, heads, max_len)
            self.ln_2 = nn.LayerNorm(d, eps=eps)
            self.mlp = GPT2MLP(d, d_ff)

        def forward(self, hidden_states):
            residual = hidden_states
            hidden_states = self.ln_1(hidden_states)
            attn_output = self.attn(hidden_states)
            hidden_states = attn_output + residual
            residual = hidden_states
            hidden_states = self.ln_2(hidden_states)
            feed_forward_hidden_states = self.mlp(hidden_states)
            return residual + feed_forward_hidden_states

    class GPT2Model(nn.Module):
        def __init__(self, vocab, d, heads, d_ff, layers, max_len, eps):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(max_len, d)
            self.h = nn.ModuleList([GPT2Block(d, heads, d_ff, max_len, eps) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d, eps=eps)

        def forward(self, input_ids):
            position_ids = torch.arange(0, input_ids.size(-1), dtype=torch.long).unsqueeze(0)
            inputs_embeds = self.wte(input_ids)
            position_embeds = self.wpe(position_ids)
            hidden_states = inputs_embeds + position_embeds
            for block in self.h:
                hidden_states = block(hidden_states)
            return self.ln_f(hidden_states)

    class GPT2LMHeadModel(nn.Module):
        # lm_head.weight IS transformer.wte.weight (tied): export writes it once, as
        # transformer.wte.weight, and records the tie in the file's metadata.
        tied = {'lm_head.weight': 'transformer.wte.weight'}

        def __init__(self, vocab, d, heads, d_ff, layers, max_len, eps=1e-5):
            super().__init__()
            self.transformer = GPT2Model(vocab, d, heads, d_ff, layers, max_len, eps)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.transformer.wte.weight

        def forward(self, tokens):
            return self.lm_head(self.transformer(tokens))

    return types.SimpleNamespace(**locals())


def build_gpt2(p):
    ns = _gpt2()
    return ns.GPT2LMHeadModel(p['vocab'], p['d_model'], p['heads'], p['d_ff'], p['layers'],
                              p['max_len'])


# =====================================================================================
# Registry: builder, input names, default params.
# =====================================================================================
_COMMON = dict(d_model=512, heads=8, d_ff=2048, layers=6, pad_id=0)
_ENCDEC = dict(src_vocab=1000, tgt_vocab=1000)

MODELS = {
    'tutorial-codersarts': (build_codersarts, ['src', 'tgt'], dict(_COMMON, **_ENCDEC, max_len=5000)),
    'tutorial-simple': (build_simple, ['tokens'], dict(_COMMON, vocab=1000, max_len=100)),
    'tutorial-floydhub': (build_floydhub, ['src', 'tgt'], dict(_COMMON, **_ENCDEC, max_len=80)),
    'tutorial-wandb': (build_wandb, ['src', 'tgt'], dict(_COMMON, **_ENCDEC, max_len=5000)),
    'torch-transformer': (build_torch_transformer, ['src', 'tgt'], dict(_COMMON, **_ENCDEC, max_len=5000)),
    'bert': (build_bert, ['tokens', 'token_types'], dict(_COMMON, vocab=30522, max_len=512, type_vocab=2)),
    'gpt2': (build_gpt2, ['tokens'], dict(_COMMON, vocab=50257, max_len=1024)),
}


def _parse_value(s):
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    return s


def resolve_params(model, sets, base=None):
    """Defaults for `model`, then `base` (e.g. params from a file), then --set NAME=VALUE."""
    defaults = MODELS[model][2]
    p = dict(defaults)
    if base:
        p.update(base)
    over = {}
    for s in sets or []:
        if '=' not in s:
            raise SystemExit(f'--set expects NAME=VALUE, got {s!r}')
        k, v = s.split('=', 1)
        over[k.strip()] = _parse_value(v.strip())
    if 'vocab' in over and 'src_vocab' in defaults:      # enc-dec shorthand
        v = over.pop('vocab')
        over.setdefault('src_vocab', v)
        over.setdefault('tgt_vocab', v)
    for k in over:
        if k not in defaults:
            raise SystemExit(f'{model}: unknown param {k!r} (known: {", ".join(sorted(defaults))})')
    p.update(over)
    return p


def build(model, params):
    if model not in MODELS:
        raise SystemExit(f'unknown model {model!r} (known: {", ".join(MODELS)})')
    m = MODELS[model][0](params)
    m.eval()                      # dropout is the identity everywhere
    return m


def exported_state_dict(m):
    """state_dict (buffers included) minus tied aliases (written once, under the target)."""
    sd = m.state_dict()
    for alias in getattr(m, 'tied', {}):
        sd.pop(alias, None)
    return sd


# =====================================================================================
# Minimal safetensors writer / reader.
# =====================================================================================
_DTYPES = {  # safetensors dtype <-> numpy (little-endian)
    'F64': '<f8', 'F32': '<f4', 'F16': '<f2', 'I64': '<i8', 'I32': '<i4', 'I16': '<i2',
    'I8': 'i1', 'U8': 'u1', 'BOOL': '?',
}
_NP2ST = {np.dtype(v).str: k for k, v in _DTYPES.items()}


def save_safetensors(path, tensors, metadata=None):
    """tensors: {name: numpy array or torch tensor}; metadata: {str: str}."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        a = np.ascontiguousarray(a)
        a = a.astype(a.dtype.newbyteorder('<'), copy=False)
        if a.dtype.str not in _NP2ST:
            raise ValueError(f'{name}: unsupported dtype {a.dtype}')
        data = a.tobytes()
        header[name] = {'dtype': _NP2ST[a.dtype.str], 'shape': list(a.shape),
                        'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header['__metadata__'] = {str(k): str(v) for k, v in metadata.items()}
    hb = json.dumps(header, separators=(',', ':')).encode('utf-8')
    hb += b' ' * (-len(hb) % 8)                      # pad header to a multiple of 8
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    """Returns ({name: numpy array}, metadata dict)."""
    with open(path, 'rb') as f:
        raw = f.read()
    (n,) = struct.unpack('<Q', raw[:8])
    header = json.loads(raw[8:8 + n].decode('utf-8'))
    meta = header.pop('__metadata__', {}) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        b, e = info['data_offsets']
        dt = np.dtype(_DTYPES[info['dtype']])
        a = np.frombuffer(raw, dtype=dt, count=(e - b) // dt.itemsize, offset=base + b)
        out[name] = a.reshape(info['shape']).copy()
    return out, meta


# =====================================================================================
# Commands.
# =====================================================================================
def init_weights(m, seed):
    """xavier_uniform_ on every parameter with dim > 1 (as 003/004 do); to make numeric
    tests meaningful, every 1-D parameter (biases, norm gains/shifts) additionally gets
    uniform(-0.1, 0.1) noise added to its default value.  Buffers are left alone."""
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
            else:
                p.add_(torch.empty(p.shape).uniform_(-0.1, 0.1, generator=g))


def cmd_export(a):
    params = resolve_params(a.model, a.set)
    torch.manual_seed(a.seed)
    m = build(a.model, params)
    init_weights(m, a.seed)
    sd = exported_state_dict(m)
    meta = {'model': a.model, 'params': json.dumps(params, sort_keys=True)}
    tied = getattr(m, 'tied', None)
    if tied:
        meta['tied'] = json.dumps(tied)
    save_safetensors(a.output, {k: v.to(torch.float32) for k, v in sd.items()}, meta)
    print(f'wrote {a.output}: {len(sd)} tensors, model={a.model}, params={meta["params"]}')


def cmd_names(a):
    params = resolve_params(a.model, a.set)
    torch.manual_seed(0)
    m = build(a.model, params)
    for k, v in exported_state_dict(m).items():
        print(f'{k}\t{list(v.shape)}')
    for alias, target in getattr(m, 'tied', {}).items():
        print(f'# {alias} is tied to {target} (not exported)', file=sys.stderr)
    if a.model == 'tutorial-simple':
        print('# pos_encoding.encoding is a plain attribute, not in the state_dict '
              '(recompute it)', file=sys.stderr)


def cmd_run(a):
    # torch 1.13's TransformerEncoder fast path warns that nested tensors are a prototype.
    warnings.filterwarnings('ignore', message='The PyTorch API of nested tensors')
    tensors, meta = load_safetensors(a.weights)
    if meta.get('model') not in (None, a.model):
        raise SystemExit(f'{a.weights} holds model {meta.get("model")!r}, not {a.model!r}')
    params = resolve_params(a.model, a.set, json.loads(meta.get('params', '{}')))
    torch.manual_seed(0)
    m = build(a.model, params)
    sd = {k: torch.from_numpy(v) for k, v in tensors.items()}
    missing, unexpected = m.load_state_dict(sd, strict=False)
    allowed = set(getattr(m, 'tied', {}))
    bad_missing = [k for k in missing if k not in allowed]
    if bad_missing or unexpected:
        raise SystemExit(f'weights do not match: missing={bad_missing} unexpected={unexpected}')
    for alias, target in getattr(m, 'tied', {}).items():       # tie survives load, check
        assert m.get_parameter(alias) is m.get_parameter(target)

    names = MODELS[a.model][1]
    inputs = {}
    for s in a.input or []:
        k, path = s.split('=', 1)
        if k not in names:
            raise SystemExit(f'{a.model}: unknown input {k!r} (inputs: {", ".join(names)})')
        arr = np.load(path)
        if not np.issubdtype(arr.dtype, np.integer):
            raise SystemExit(f'input {k}: expected integer token ids, got {arr.dtype}')
        inputs[k] = torch.from_numpy(arr.astype(np.int64))
    with torch.inference_mode():
        out = m(**inputs)
    os.makedirs(a.output, exist_ok=True)
    out_np = out.detach().to(torch.float32).numpy()
    np.save(os.path.join(a.output, 'output.npy'), out_np)
    print(f'wrote {os.path.join(a.output, "output.npy")}: shape {list(out_np.shape)}')


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    e = sub.add_parser('export', help='build, initialise and write weights to safetensors')
    e.add_argument('model', choices=list(MODELS))
    e.add_argument('-o', '--output', required=True)
    e.add_argument('--set', action='append', default=[], metavar='NAME=VALUE')
    e.add_argument('--seed', type=int, default=0)
    n = sub.add_parser('names', help='print exported state_dict names and shapes')
    n.add_argument('model', choices=list(MODELS))
    n.add_argument('--set', action='append', default=[], metavar='NAME=VALUE')
    r = sub.add_parser('run', help='load weights, run forward, write OUTDIR/output.npy')
    r.add_argument('model', choices=list(MODELS))
    r.add_argument('--weights', required=True)
    r.add_argument('--input', action='append', default=[], metavar='NAME=FILE.npy')
    r.add_argument('--set', action='append', default=[], metavar='NAME=VALUE')
    r.add_argument('-o', '--output', required=True, metavar='OUTDIR')
    a = ap.parse_args(argv)
    {'export': cmd_export, 'names': cmd_names, 'run': cmd_run}[a.cmd](a)


if __name__ == '__main__':
    main()
