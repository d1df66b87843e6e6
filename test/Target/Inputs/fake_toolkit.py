"""Writes a CUDA toolkit whose bin/ holds a stand-in for the assembler: it
runs the real one, except when asked for its report (-v, liger-compile's
spill check), where it misbehaves as MODE says.

usage: fake_toolkit.py DIR MODE REAL
MODE: garbled (a spill line without numbers), fail (exits 1 with a
message), silent (reports on no kernel), spills (reports every kernel asked
for with 8 bytes of spills). REAL is the real assembler's path.
"""
import os
import stat
import sys

out, mode, real = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(os.path.join(out, "bin"), exist_ok=True)
path = os.path.join(out, "bin", "ptxas")
with open(path, "w") as f:
    f.write("""#!%s
import os, sys
args = sys.argv[1:]
if "-v" not in args:
    os.execv(%r, [%r] + args)
kernels = [args[i + 1] for i, a in enumerate(args) if a == "-e"]
mode = %r
if mode == "fail":
    sys.stderr.write("ptxas fatal   : out of memory (stand-in)\\n")
    sys.exit(1)
for k in kernels if mode != "silent" else []:
    sys.stderr.write("ptxas info    : Function properties for %%s\\n" %% k)
    if mode == "garbled":
        sys.stderr.write("    no bytes stack frame, some bytes spill stores, 0 bytes spill loads\\n")
    else:
        sys.stderr.write("    8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\\n")
""" % (sys.executable, real, real, mode))
os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
# The rest of the toolkit the serialization reads (libdevice) is the real one's.
nvvm = os.path.join(out, "nvvm")
if not os.path.lexists(nvvm):
    os.symlink(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(real))), "nvvm"), nvvm)
