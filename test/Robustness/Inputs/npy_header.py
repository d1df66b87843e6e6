"""Writes a .npy file whose header is one of the named cases below.

usage: npy_header.py OUT CASE

Each case is (version, header text, data): the header is written as
is (padded with spaces to a 64-byte boundary and ended by a newline, as
NumPy does), so that the runner's header parser sees exactly the bytes a
damaged or hostile file would give it; the data is that many zero bytes, or
the given bytes. "good" is a valid 3x8 float32 array, "x-8192x8" one with
values (3 sin i).
"""
import math
import struct
import sys

GOOD = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 8), }"
CASES = {
    "good": ((1, 0), GOOD, 96),
    "x-8192x8": ((1, 0), "{'descr': '<f4', 'fortran_order': False, 'shape': (8192, 8), }",
                 struct.pack("<65536f", *(3 * math.sin(i) for i in range(65536)))),
    "good-w": ((1, 0), "{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }", 32),
    "fortran": ((1, 0), "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 8), }", 96),
    "good-v2": ((2, 0), GOOD, 96),
    "good-v3": ((3, 0), GOOD, 96),
    "double-quotes": ((1, 0), '{"descr": "<f4", "fortran_order": False, "shape": (3, 8)}', 96),
    # std::regex recursed once per character of a field: a long one
    # overflowed the stack.
    "long-descr": ((2, 0), "{'descr': '" + "<" * 60000 + "', 'fortran_order': False, 'shape': (3, 8), }", 96),
    "long-shape": ((2, 0), "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 20000 + "), }", 4),
    "huge-header": ((2, 0), "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 8), }" + " " * 70000, 96),
    "version-4": ((4, 0), GOOD, 96),
    "version-1.1": ((1, 1), GOOD, 96),
    "unknown-key": ((1, 0), "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 8), 'extra': 1}", 96),
    "duplicate-key": ((1, 0), "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3, 8)}", 96),
    "no-shape": ((1, 0), "{'descr': '<f4', 'fortran_order': False}", 96),
    "no-brace": ((1, 0), "'descr': '<f4', 'fortran_order': False, 'shape': (3, 8)", 96),
    "unterminated": ((1, 0), "{'descr': '<f4", 96),
    "negative-dim": ((1, 0), "{'descr': '<f4', 'fortran_order': False, 'shape': (3, -8)}", 96),
    "huge-dim": ((1, 0), "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}", 96),
    "bad-bool": ((1, 0), "{'descr': '<f4', 'fortran_order': 0, 'shape': (3, 8)}", 96),
    "trailing": ((1, 0), "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 8)} x", 96),
    "nested-shape": ((1, 0), "{'descr': '<f4', 'fortran_order': False, 'shape': ((3, 8),)}", 96),
    "escape": ((1, 0), "{'descr': '<f\\4', 'fortran_order': False, 'shape': (3, 8)}", 96),
    "truncated-dict": ((1, 0), "{'descr': '<f4', 'fortran_order'", 96),
}

out, case = sys.argv[1], sys.argv[2]
(major, minor), header, data = CASES[case]
length_format = "<H" if major == 1 else "<I"
prefix = 8 + struct.calcsize(length_format)
header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
with open(out, "wb") as f:
    f.write(b"\x93NUMPY" + bytes([major, minor]))
    f.write(struct.pack(length_format, len(header)))
    f.write(header.encode("latin1"))
    f.write(data if isinstance(data, bytes) else bytes(data))
