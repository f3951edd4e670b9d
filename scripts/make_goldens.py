#!/usr/bin/env python3
"""Generates the small PyTorch goldens under tests/golden/ (needs python3-torch).

For each bundled model: build the PyTorch reference (scripts/torch_models.py) at
small dims, initialise it from a fixed seed, export its state_dict to safetensors,
make padded token inputs (sequences of different lengths in one batch), run it
under torch.inference_mode() and save the output. The files are small and
committed, so CI checks numerics without torch:

  tests/golden/<model>/weights.safetensors   the model's weights (PyTorch names)
  tests/golden/<model>/<input>.npy          int64 token ids, padded with pad_id 0
  tests/golden/<model>/output.npy           PyTorch's output (f32)
  tests/golden/<model>/params.txt           the --set flags to compile with

Run: /usr/bin/python3 scripts/make_goldens.py [MODEL ...]
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "tests", "golden")
DIMS = {"d_model": 32, "heads": 4, "d_ff": 64, "layers": 2, "max_len": 64}
VOCAB = 40


def padded(rng, lengths, vocab, pad=0, lo=1):
    """Batch of token ids; row i has lengths[i] real tokens then pad."""
    s = max(lengths)
    x = np.full((len(lengths), s), pad, dtype=np.int64)
    for i, n in enumerate(lengths):
        x[i, :n] = rng.integers(lo, vocab, size=n)
    return x


def main(models):
    rng = np.random.default_rng(1234)
    for model in models:
        sets = [f"{k}={v}" for k, v in DIMS.items()] + [f"vocab={VOCAB}"]
        params = tm.resolve_params(model, sets)
        torch.manual_seed(7)
        m = tm.build(model, params)
        tm.init_weights(m, 7)
        out_dir = os.path.join(ROOT, model)
        os.makedirs(out_dir, exist_ok=True)
        tm.save_safetensors(os.path.join(out_dir, "weights.safetensors"),
                            {k: v.to(torch.float32) for k, v in tm.exported_state_dict(m).items()},
                            {"model": model})
        names = tm.MODELS[model][1]
        inputs = {}
        if "src" in names:
            inputs["src"] = padded(rng, [7, 4, 6], VOCAB)
            inputs["tgt"] = padded(rng, [5, 6, 3], VOCAB)
        else:
            inputs["tokens"] = padded(rng, [8, 5, 3], VOCAB)
            if "token_types" in names:
                tt = np.zeros_like(inputs["tokens"])
                tt[:, 3:] = 1
                inputs["token_types"] = tt
        for k, v in inputs.items():
            np.save(os.path.join(out_dir, f"{k}.npy"), v)
        with torch.inference_mode():
            out = m(**{k: torch.from_numpy(v) for k, v in inputs.items()})
        np.save(os.path.join(out_dir, "output.npy"), out.to(torch.float32).numpy())
        # Flags that make `tfc compile` build the same model.
        vocab = ["--set src_vocab=%d" % VOCAB, "--set tgt_vocab=%d" % VOCAB] \
            if "src_vocab" in params else ["--set vocab=%d" % VOCAB]
        with open(os.path.join(out_dir, "params.txt"), "w") as f:
            f.write(" ".join([f"--set {k}={v}" for k, v in DIMS.items()] + vocab) + "\n")
        print(f"{model}: output {list(out.shape)}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(tm.MODELS))
