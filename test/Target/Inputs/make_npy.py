"""Writes a .npy fixture for the CPU runner tests.

usage: make_npy.py OUT DTYPE SHAPE [--truncate | --bad-magic]
DTYPE is f32, f16, bf16 (written as uint16 bits), i32, i64 or u4 (a dtype
the runner rejects); SHAPE is comma-separated ("" for a scalar).
"""
import sys

import numpy as np

out, dtype, shape = sys.argv[1], sys.argv[2], sys.argv[3]
dims = tuple(int(d) for d in shape.split(",") if d)
np_dtype = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i32": np.int32,
            "i64": np.int64, "u4": np.uint32}[dtype]
values = np.random.default_rng(0).standard_normal(dims)
array = (values * 4).astype(np_dtype) if dtype != "bf16" else \
    (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
np.save(out, array)
if "--truncate" in sys.argv[4:]:
    data = open(out, "rb").read()
    open(out, "wb").write(data[:-4])
if "--bad-magic" in sys.argv[4:]:
    open(out, "wb").write(b"not an npy file at all")
