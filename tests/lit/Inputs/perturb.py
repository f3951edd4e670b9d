#!/usr/bin/env python3
"""Copies a float32 .npy or .safetensors file with one element changed (stdlib only).

The oracle's own tests (tests/lit/numerics/oracle-fails.test) use it to show
that tfc-ref notices a golden or a weight that is off by a little.

Usage:
  perturb.py IN OUT [--tensor NAME] [--index I] (--add D | --set V)

--tensor names the tensor of a .safetensors file (a .npy holds one); --index is
the flat (row-major) index of the element, 0 by default; --add adds D to it,
--set replaces it with V ("nan" and "inf" work). Only F32 / <f4 data is
supported.
"""
import ast
import json
import struct
import sys


def die(msg):
    sys.stderr.write("perturb.py: " + msg + "\n")
    sys.exit(2)


def data_offset(blob, path, tensor):
    """The byte offset of element 0 and the element count of the f32 data."""
    if path.endswith(".npy"):
        if blob[:6] != b"\x93NUMPY":
            die("%s is not a .npy file" % path)
        if blob[6] == 1:
            (hlen,), start = struct.unpack("<H", blob[8:10]), 10
        else:
            (hlen,), start = struct.unpack("<I", blob[8:12]), 12
        header = ast.literal_eval(blob[start:start + hlen].decode("latin1"))
        if header["descr"] != "<f4" or header["fortran_order"]:
            die("%s: only C-order float32 (<f4) is supported" % path)
        count = 1
        for d in header["shape"]:
            count *= d
        return start + hlen, count
    if path.endswith(".safetensors"):
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
        if tensor not in header:
            die("%s has no tensor %r" % (path, tensor))
        info = header[tensor]
        if info["dtype"] != "F32":
            die("%s: tensor %r is %s, not F32" % (path, tensor, info["dtype"]))
        begin, end = info["data_offsets"]
        return 8 + n + begin, (end - begin) // 4
    die("%s: expected a .npy or .safetensors file" % path)


def main(argv):
    args = {"--tensor": None, "--index": "0", "--add": None, "--set": None}
    files = []
    i = 0
    while i < len(argv):
        if argv[i] in args:
            if i + 1 >= len(argv):
                die(argv[i] + " takes a value")
            args[argv[i]] = argv[i + 1]
            i += 2
        else:
            files.append(argv[i])
            i += 1
    if len(files) != 2 or (args["--add"] is None) == (args["--set"] is None):
        die("usage: perturb.py IN OUT [--tensor NAME] [--index I] (--add D | --set V)")
    src, dst = files
    with open(src, "rb") as f:
        blob = bytearray(f.read())
    base, count = data_offset(blob, src, args["--tensor"])
    index = int(args["--index"])
    if not 0 <= index < count:
        die("index %d is outside the %d elements" % (index, count))
    at = base + 4 * index
    (value,) = struct.unpack_from("<f", blob, at)
    value = value + float(args["--add"]) if args["--add"] is not None else float(args["--set"])
    struct.pack_into("<f", blob, at, value)
    with open(dst, "wb") as f:
        f.write(blob)


if __name__ == "__main__":
    main(sys.argv[1:])
