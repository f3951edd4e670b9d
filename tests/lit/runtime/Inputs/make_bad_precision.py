"""Writes model.bin variants of DIR/int8.bin whose dtypes break the rules of
reduced-precision plans (docs/model-bin.md), with valid checksums, so that only
the loader's dtype checks can catch them:
  i8scales.bin: the scales that the first i8 weight's descriptor names
               relabelled bf16 (format version 6: scales are f32);
  bf16resid.bin: the token embedding's output (the residual stream) relabelled
                bf16, which the token embedding cannot write;
from DIR/int4.bin:
  i4group.bin: the first i4 weight's group relabelled 48, which the int4
               kernel (blocks of 32) cannot read;
  i4actbits.bin: the first i4 weight's activation bits (format version 9)
               relabelled 16, which int4 (8-bit activation blocks) has not;
from DIR/int8.bin again:
  i8actbits.bin: the first i8 weight's activation bits relabelled 8 where it
               has one scale per row (8-bit blocks need groups);
and one whose plan breaks tfc/kernels.def, the kernel table:
  arity.bin: the first layer_norm instruction relabelled attention, which reads
             more int and float attributes than a layer norm carries."""
import ctypes
import os
import struct
import sys

# The checksum of format version 4 is XXH3 64 (docs/model-bin.md), from the
# same libxxhash the runtime links.
_xxh = ctypes.CDLL("libxxhash.so.0")
_xxh.XXH3_64bits.restype = ctypes.c_uint64
_xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def checksum(data):
    return _xxh.XXH3_64bits(data, len(data))


def value_table(b):
    """Byte offsets of the dtype field of every value of the first function."""
    meta = struct.unpack_from("<Q", b, 32)[0]
    version = struct.unpack_from("<I", b, 8)[0]
    pos = meta

    def u32():
        nonlocal pos
        v = struct.unpack_from("<I", b, pos)[0]
        pos += 4
        return v

    def skip_str():
        nonlocal pos
        n = u32()
        pos += n

    skip_str()  # producer
    skip_str()  # model
    for _ in range(u32()):  # symbols
        skip_str()
        pos += 8
    u32()  # functions
    skip_str()  # name
    fields = []
    descriptors = {}  # value index -> byte offset of its weight descriptor
    for _ in range(u32()):
        fields.append(pos)
        dtype = u32()
        rank = u32()
        pos += 8 * rank
        storage = u32()
        pos += 8  # offset
        if storage == 1 and dtype in (6, 7):  # an i8 / i4 weight: scales, zeros, group
            descriptors[len(fields) - 1] = pos  # and from version 9 act_bits
            pos += 16 if version >= 9 else 12
    kernels = []  # byte offsets of each instruction's kernel id
    for _ in range(2):  # input and output bindings
        for _ in range(u32()):
            skip_str()
            u32()
    for _ in range(u32()):
        kernels.append(pos)
        u32()  # kernel
        n = u32()
        pos += 4 * n  # inputs
        u32()  # output
        n = u32()
        pos += 8 * n  # ints
        n = u32()
        pos += 8 * n  # floats
    return fields, kernels, descriptors


def write(path, b):
    b = bytearray(b)
    b[24:32] = struct.pack("<Q", checksum(bytes(b[64:])))
    open(path, "wb").write(b)


d = sys.argv[1]
b = bytearray(open(os.path.join(d, "int8.bin"), "rb").read())
fields, kernels, descriptors = value_table(b)
dtypes = [struct.unpack_from("<I", b, f)[0] for f in fields]
c = bytearray(b)
first_i8 = dtypes.index(6)
scales = struct.unpack_from("<I", b, descriptors[first_i8])[0]
struct.pack_into("<I", c, fields[scales], 5)  # its scales f32 -> bf16
write(os.path.join(d, "i8scales.bin"), c)
c = bytearray(b)
# The first f32 arena value after the inputs is the token embedding's output.
storage = []
for f in fields:
    rank = struct.unpack_from("<I", b, f + 4)[0]
    storage.append(struct.unpack_from("<I", b, f + 8 + 8 * rank)[0])
first = next(i for i, (t, s) in enumerate(zip(dtypes, storage)) if t == 0 and s == 2)
struct.pack_into("<I", c, fields[first], 5)  # f32 -> bf16
write(os.path.join(d, "bf16resid.bin"), c)
c = bytearray(b)
LAYER_NORM, ATTENTION = 26, 27
first_norm = next(k for k in kernels if struct.unpack_from("<I", b, k)[0] == LAYER_NORM)
struct.pack_into("<I", c, first_norm, ATTENTION)
write(os.path.join(d, "arity.bin"), c)
b = bytearray(open(os.path.join(d, "int4.bin"), "rb").read())
fields, kernels, descriptors = value_table(b)
dtypes = [struct.unpack_from("<I", b, f)[0] for f in fields]
first_i4 = dtypes.index(7)
c = bytearray(b)
struct.pack_into("<I", c, descriptors[first_i4] + 8, 48)  # group 32 -> 48
write(os.path.join(d, "i4group.bin"), c)
c = bytearray(b)
struct.pack_into("<I", c, descriptors[first_i4] + 12, 16)  # act_bits 0 -> 16
write(os.path.join(d, "i4actbits.bin"), c)
b = bytearray(open(os.path.join(d, "int8.bin"), "rb").read())
fields, kernels, descriptors = value_table(b)
dtypes = [struct.unpack_from("<I", b, f)[0] for f in fields]
first_i8 = dtypes.index(6)
assert struct.unpack_from("<I", b, descriptors[first_i8] + 8)[0] == 0  # one scale per row
struct.pack_into("<I", b, descriptors[first_i8] + 12, 8)  # act_bits 0 -> 8
write(os.path.join(d, "i8actbits.bin"), b)
