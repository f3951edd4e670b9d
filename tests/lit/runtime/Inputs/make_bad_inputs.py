"""Writes corrupt model.bin variants of DIR/m.bin and bad .npy inputs into DIR."""
import os
import struct
import sys

import numpy as np

d = sys.argv[1]
b = open(os.path.join(d, "m.bin"), "rb").read()
open(os.path.join(d, "trunc.bin"), "wb").write(b[: len(b) // 2])
c = bytearray(b)
c[len(c) - 5] ^= 0xFF
open(os.path.join(d, "corrupt.bin"), "wb").write(c)
c = bytearray(b)
c[0:8] = b"NOTMODEL"
open(os.path.join(d, "magic.bin"), "wb").write(c)
c = bytearray(b)
c[8:12] = struct.pack("<I", 99)
open(os.path.join(d, "future.bin"), "wb").write(c)
c = bytearray(b)
c[8:12] = struct.pack("<I", 1)
open(os.path.join(d, "old.bin"), "wb").write(c)
open(os.path.join(d, "tiny.bin"), "wb").write(b[:10])
np.save(os.path.join(d, "ok.npy"), np.ones((2, 5), dtype=np.int64))
np.save(os.path.join(d, "batch3.npy"), np.ones((3, 5), dtype=np.int64))
np.save(os.path.join(d, "long.npy"), np.ones((2, 17), dtype=np.int64))
np.save(os.path.join(d, "oov.npy"), np.full((2, 5), 40, dtype=np.int64))
np.save(os.path.join(d, "neg.npy"), np.full((2, 5), -1, dtype=np.int64))
np.save(os.path.join(d, "emptyseq.npy"), np.ones((2, 0), dtype=np.int64))
np.save(os.path.join(d, "emptybatch.npy"), np.ones((0, 4), dtype=np.int64))
np.save(os.path.join(d, "f32.npy"), np.ones((2, 5), dtype=np.float32))
np.save(os.path.join(d, "rank3.npy"), np.ones((2, 5, 1), dtype=np.int64))
open(os.path.join(d, "garbage.npy"), "wb").write(b"hello")
