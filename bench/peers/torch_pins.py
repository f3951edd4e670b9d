#!/usr/bin/env python3
"""Which CUDA wheels a PyPI torch wheel needs on top of /usr/local/cuda (setup_venv.sh).

  torch_pins.py TORCH.whl [--cuda-lib DIR] [--download-dir DIR]

Prints one pip requirement a line, read from the wheel's METADATA rather than
hard-coded: every `nvidia-*` pin of torch itself (cudnn, cusparselt, nccl, nvshmem),
and, for each extra of its `cuda-toolkit[...]` requirement whose library is not in
DIR (default /usr/local/cuda/lib64), the pins that cuda-toolkit's own METADATA gives
that extra (downloaded with `pip download --no-deps`, a small wheel). Each is meant
for `pip install --no-deps`.
"""
import argparse
import glob
import os
import platform
import re
import subprocess
import sys
import zipfile


def metadata(wheel):
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return z.read(name).decode()


def requires(meta):
    """[(requirement, marker)] from the Requires-Dist lines."""
    out = []
    for line in meta.splitlines():
        if line.startswith("Requires-Dist:"):
            req, _, marker = line[len("Requires-Dist:"):].partition(";")
            out.append((req.strip(), marker.strip()))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wheel")
    ap.add_argument("--cuda-lib", default="/usr/local/cuda/lib64")
    ap.add_argument("--download-dir", default=None)
    a = ap.parse_args()
    pins = []
    toolkit = None
    for req, marker in requires(metadata(a.wheel)):
        if "extra ==" in marker:
            continue
        if req.startswith("nvidia-"):
            pins.append(req)
        m = re.match(r"cuda-toolkit\[([^\]]*)\]\s*(==\s*\S+)", req)
        if m:
            toolkit = ([e.strip() for e in m.group(1).split(",")], m.group(2).replace(" ", ""))
    if toolkit:
        have = [os.path.basename(p).lower() for p in glob.glob(os.path.join(a.cuda_lib, "lib*"))]
        missing = [e for e in toolkit[0] if not any(h.startswith("lib" + e.lower()) for h in have)]
        if missing:
            dd = a.download_dir or os.path.dirname(os.path.abspath(a.wheel))
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            "cuda-toolkit" + toolkit[1], "-d", dd], check=True,
                           stdout=sys.stderr)
            ver = toolkit[1].lstrip("=")
            whl = glob.glob(os.path.join(dd, f"cuda_toolkit-{ver}-*.whl"))[0]
            for req, marker in requires(metadata(whl)):
                for e in missing:
                    if re.search(r"extra\s*==\s*['\"]%s['\"]" % re.escape(e), marker) \
                            and platform.machine() in marker and req not in pins:
                        pins.append(req)
    print("\n".join(pins))


if __name__ == "__main__":
    main()
