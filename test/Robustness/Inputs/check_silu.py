"""Prints "ok" when every given .npy result is SiLU of the first .npy file.

usage: check_silu.py X RESULT...
The files are little-endian float32 arrays as the CPU runner writes them
(version 1.0 headers); only the standard library is used.
"""
import math
import struct
import sys


def read_f32(path):
    data = open(path, "rb").read()
    (header_len,) = struct.unpack("<H", data[8:10])
    body = data[10 + header_len:]
    return struct.unpack("<%df" % (len(body) // 4), body)


x = read_f32(sys.argv[1])
expected = [v / (1 + math.exp(-v)) for v in x]
for path in sys.argv[2:]:
    got = read_f32(path)
    if len(got) != len(expected):
        sys.exit("%s: %d values, expected %d" % (path, len(got), len(expected)))
    worst = max(abs(g - e) for g, e in zip(got, expected))
    if not worst <= 1e-5:
        sys.exit("%s: differs from SiLU by up to %g" % (path, worst))
print("ok")
