#!/usr/bin/env python3
"""Non-finite weights through compile, run and generate (issue 21; docs/generation.md,
"Non-finite logits").

For each place (embedding, a query projection, a norm, the output head), each value
(NaN, +inf) and each precision (f32, int8, bf16), writes the model's weights with that
one element changed, compiles them, and runs every mode with every tfrun given
(the release one and tfrun-asan): the tutorial-floydhub model forward, greedy, beam 2
and beam 4; gpt2 (decoder-only: sampling needs one) forward and sampling.

Every run must exit 0 or 1 (no signal, no sanitizer report) and print on stderr
only the documented lines:
  tfrun: warning: output "NAME" holds N NaN and M inf values
  tfrun: error: generate: step S: the logits of batch item B hold N NaN and M +inf values
the error exactly when the exit code is 1, and only when generating. Each tfrun
must give the same exit code and stderr as the first. Prints one line per run
("MODEL PLACE VALUE PRECISION MODE: exit C: STDERR | ...") and a summary line;
exits 1 if any run broke the rules.

Usage: nonfinite_matrix.py WORKDIR TFC TFRUN [TFRUN ...]
"""
import os
import re
import subprocess
import sys

import numpy as np

WARN = re.compile(r'tfrun: warning: output "[a-z_.]+" holds \d+ NaN and \d+ inf values')
ERR = re.compile(r"tfrun: error: generate: step \d+: the logits of batch item \d+ hold "
                 r"\d+ NaN and \d+ \+inf values")
COMPILE_WARN = re.compile(r".*: warning: weight '([^']+)' holds 1 NaN or infinite value "
                          r"\(the first at flat index (\d+)\)")

D = 16  # d_model
MODELS = {
    "floydhub": ("tutorial-floydhub.yaml",
                 f"d_model={D} heads=2 d_ff=32 layers=1 max_len=16 max_batch=8 src_vocab=24 "
                 "tgt_vocab=24 bos_id=1 eos_id=2 pad_id=0",
                 {"embedding": ("decoder.embed.embed.weight", 1 * D + 3),  # bos's row
                  "query": ("decoder.layers.0.attn_1.q_linear.weight", 5),
                  "norm": ("decoder.norm.alpha", 4),
                  "head": ("out.weight", 7 * D + 2)},  # token 7's logit
                 {"forward": ["--input", "src={src}", "--input", "tgt={tgt}"],
                  "greedy": ["--generate", "--input", "src={src}", "--max-len", "6"],
                  "beam2": ["--generate", "--input", "src={src}", "--max-len", "6", "--beam", "2"],
                  "beam4": ["--generate", "--input", "src={src}", "--max-len", "6", "--beam", "4"]}),
    "gpt2": ("gpt2.yaml",
             f"d_model={D} heads=2 layers=1 vocab=24 max_len=16 max_batch=4 bos_id=1 eos_id=2",
             {"embedding": ("transformer.wte.weight", 3 * D + 3),  # a prompt token's row
              "query": ("transformer.h.0.attn.c_attn.weight", 3),  # [in, 3 out]: q
              "norm": ("transformer.ln_f.weight", 4),
              "head": ("transformer.wte.weight", 7 * D + 2)},  # tied: token 7's logit
             {"forward": ["--input", "tokens={tgt}"],
              "sample": ["--generate", "--input", "tokens={tgt}", "--max-len", "6", "--sample",
                         "--temperature", "0.8", "--top-k", "8", "--top-p", "0.95",
                         "--seed", "3"]}),
}
VALUES = {"nan": np.float32("nan"), "inf": np.float32("inf")}
PRECISIONS = ["f32", "int8", "bf16"]


def write_safetensors(path, tensors):
    import json
    import struct
    header, data = {}, b""
    for name, arr in tensors.items():
        raw = arr.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def declared_weights(tfc, cmd):
    ir = subprocess.run(cmd + ["--emit=mlir-import"], check=True, capture_output=True,
                        text=True).stdout
    shapes = {}
    for name, dims in re.findall(r'tfc\.weight "([^"]+)" : tensor<([0-9x]*)xf32>', ir):
        shapes[name] = [int(d) for d in dims.split("x")]
    return shapes


def main():
    work, tfc, tfruns = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "src.npy")
    tgt = os.path.join(work, "tgt.npy")
    np.save(src, np.array([[3, 4, 5, 6], [8, 9, 0, 0]], dtype=np.int64))  # ragged
    np.save(tgt, np.array([[1, 3, 4, 5], [1, 6, 0, 0]], dtype=np.int64))
    runs = failures = 0

    def fail(what, why):
        nonlocal failures
        failures += 1
        print(f"FAIL {what}: {why}")

    for model, (yaml, sets, places, modes) in MODELS.items():
        cmd = [tfc, "compile", os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                            "models", yaml)]
        for s in sets.split():
            cmd += ["--set", s]
        shapes = declared_weights(tfc, cmd)
        rng = np.random.default_rng(21)
        base = {n: rng.uniform(-0.5, 0.5, size=s).astype(np.float32) for n, s in shapes.items()}
        for place, (weight, index) in places.items():
            for vname, value in VALUES.items():
                w = {n: a.copy() for n, a in base.items()}
                w[weight].reshape(-1)[index] = value
                st = os.path.join(work, f"{model}-{place}-{vname}.safetensors")
                write_safetensors(st, w)
                for prec in PRECISIONS:
                    what = f"{model} {place} {vname} {prec}"
                    out = os.path.join(work, f"{model}-{place}-{vname}-{prec}.bin")
                    c = subprocess.run(cmd + ["--weights", st, "--precision", prec, "-o", out],
                                       capture_output=True, text=True)
                    lines = c.stderr.splitlines()
                    m = COMPILE_WARN.fullmatch(lines[0]) if len(lines) == 1 else None
                    if c.returncode != 0 or not m or m.groups() != (weight, str(index)):
                        fail(what + " compile", f"exit {c.returncode}: {c.stderr!r}")
                        continue
                    for mode, args in modes.items():
                        args = [a.format(src=src, tgt=tgt) for a in args]
                        first = None
                        for tfrun in tfruns:
                            runs += 1
                            r = subprocess.run([tfrun, out] + args + ["--threads", "1"],
                                               capture_output=True, text=True)
                            got = (r.returncode, r.stderr)
                            lines = r.stderr.splitlines()
                            errs = [x for x in lines if ERR.fullmatch(x)]
                            other = [x for x in lines if not ERR.fullmatch(x) and
                                     not WARN.fullmatch(x)]
                            if r.returncode not in (0, 1) or other:
                                fail(f"{what} {mode} ({os.path.basename(tfrun)})",
                                     f"exit {r.returncode}: {r.stderr[-2000:]!r}")
                            elif (r.returncode == 1) != (len(errs) == 1) or len(errs) > 1:
                                fail(f"{what} {mode}", f"exit {r.returncode} with {errs}")
                            elif errs and mode == "forward":
                                fail(f"{what} {mode}", "a generation error from a run")
                            elif first is None:
                                first = got
                                print(f"{what} {mode}: exit {r.returncode}: " +
                                      (" | ".join(lines) if lines else "-"))
                            elif got != first:
                                fail(f"{what} {mode} ({os.path.basename(tfrun)})",
                                     f"{got!r} differs from {first!r}")
    print(f"nonfinite_matrix: {runs} runs, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
