"""Damaged copies of a bundle, as an interrupted copy, a full disk or a bad
disk leaves them: its cubin cut short at every length class and with a bit
flipped at positions drawn with a fixed seed (48 cases), each with the
manifest as it was (its cubin_sha256 no longer matches: the loader must
refuse every one) or with the digest rewritten to match, as a manifest
written for the damaged file would have it (the loader's checks of the
cubin's structure must refuse it, unless the damage is in bytes no check
reads, such as a kernel's code). And manifests that lie about an intact
cubin (LIES): what the cubin records contradicts the block, the parameters,
the tensor maps, the arch or a kernel's name; the grid and the dynamic
shared memory are not in the cubin, and those lies are accepted
(docs/Design/Kernel-ABI.md).

The GPU suite (test_damaged_bundles.py) opens and launches them. On the
build machine, `python damaged_bundles.py LIGER_BUNDLE BUNDLE WORKDIR`
opens each case with the liger-bundle tool in its own process
(test/Runtime/cubin-checks.mlir) and says how each ended; it fails on a
crash, a hang, a damaged cubin accepted under the manifest's own digest,
or a lie not met as LIES says.
"""

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys


def truncations(size):
    """Lengths a copy may stop at: none, inside the ELF header, at its end,
    and through the file to one byte short."""
    lengths = [0, 1, 3, 4, 16, 52, 63, 64, 65, 128, size // 4, size // 2,
               3 * size // 4, size - 64, size - 1]
    return sorted({n for n in lengths if 0 <= n < size})


def cases(cubin, seed=0, total=48):
    """(name, bytes) of the damaged cubins: every truncation, then single
    bits flipped at positions drawn with `seed` up to `total` cases."""
    out = [("truncated-%d" % n, cubin[:n]) for n in truncations(len(cubin))]
    rng = random.Random(seed)
    while len(out) < total:
        at, bit = rng.randrange(len(cubin)), rng.randrange(8)
        damaged = bytearray(cubin)
        damaged[at] ^= 1 << bit
        out.append(("bit-%d-of-byte-%d" % (bit, at), bytes(damaged)))
    return out


def cubin_of(bundle):
    """The manifest of `bundle` and the path of its (first) cubin."""
    manifest = json.load(open(os.path.join(bundle, "manifest.json")))
    return manifest, os.path.join(bundle, manifest["modules"][0]["cubin"])


def write_copy(bundle, dest, damaged, match_digest):
    """`bundle` copied to `dest` with `damaged` as its cubin; with
    `match_digest`, the manifest's cubin_sha256 is the damaged file's."""
    shutil.copytree(bundle, dest)
    manifest, cubin = cubin_of(dest)
    with open(cubin, "wb") as f:
        f.write(damaged)
    if match_digest:
        manifest["modules"][0]["cubin_sha256"] = hashlib.sha256(damaged).hexdigest()
        with open(os.path.join(dest, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=2)
    return dest


def _first(manifest, has):
    """The first kernel of the manifest's first module for which `has`
    holds, or None."""
    return next((k for k in manifest["modules"][0]["kernels"] if has(k)), None)


def _halve_block(kernel):
    kernel["block"][0] //= 2


def _smaller_grid(kernel):
    g = kernel["grid"][0]
    kernel["grid"][0] = "rows/2" if g == "rows" else (g // 2 if isinstance(g, int) else g)


def _other_arch(manifest):
    module = manifest["modules"][0]
    module["arch"] = "sm_80" if module["arch"] != "sm_80" else "sm_90a"


# name -> (the kernel it lies about, the lie, what the loader says: a part
# of its message, or None where it accepts the lie).
LIES = {
    "half-block": (lambda m: _first(m, lambda k: k["block"][0] > 1), _halve_block,
                   "the manifest's block is"),
    "one-parameter-more": (lambda m: _first(m, lambda k: True),
                           lambda k: k["params"].insert(1, dict(k["params"][0], name="extra")),
                           "the manifest says"),
    "one-tensor-map-fewer": (lambda m: _first(m, lambda k: k.get("tensor_maps")),
                             lambda k: k["tensor_maps"].pop(), "the manifest says"),
    "finish-half-block": (lambda m: _first(m, lambda k: "finish" in k),
                          lambda k: _halve_block(k["finish"]), "the manifest's block is"),
    "other-arch": (lambda m: m, _other_arch, "is compiled for"),
    "grid-too-small": (lambda m: _first(m, lambda k: True), _smaller_grid, None),
    "no-shared-memory": (lambda m: _first(m, lambda k: k["dynamic_shared_memory_bytes"] > 0),
                         lambda k: k.update(dynamic_shared_memory_bytes=0), None),
}


def lies(bundle):
    """(name, manifest, expected) for each lie that applies to `bundle`."""
    out = []
    for name, (find, lie, expected) in LIES.items():
        manifest, _ = cubin_of(bundle)
        target = find(manifest)
        if target is not None:
            lie(target)
            out.append((name, manifest, expected))
    return out


def write_lie(bundle, dest, manifest):
    """`bundle` copied to `dest` with `manifest` as its manifest."""
    shutil.copytree(bundle, dest)
    with open(os.path.join(dest, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    return dest


def _open(tool, dest):
    """'refused', 'accepted' or 'crashed', and the tool's message."""
    try:
        run = subprocess.run([tool, dest], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "crashed", "timed out"
    if run.returncode == 1 and run.stderr.startswith("liger-bundle: "):
        return "refused", run.stderr
    if run.returncode == 0:
        return "accepted", ""
    return "crashed", "exit %s: %s" % (run.returncode, run.stderr[-300:])


def main(argv):
    tool, bundle, work = argv[1], argv[2], argv[3]
    _, path = cubin_of(bundle)
    cubin = open(path, "rb").read()
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failed = 0
    for match_digest in (False, True):
        seen = {"refused": 0, "accepted": 0, "crashed": 0}
        for name, damaged in cases(cubin):
            dest = write_copy(bundle, os.path.join(work, name + "-%d" % match_digest),
                              damaged, match_digest)
            outcome, err = _open(tool, dest)
            if outcome == "refused":
                if not match_digest and "is not the cubin the manifest names" not in err:
                    print("damaged: %s refused, but not for its digest: %s" % (name, err))
                    failed += 1
            elif outcome == "accepted":
                if not match_digest:
                    print("damaged: %s accepted under the manifest's digest" % name)
                    failed += 1
            else:
                print("damaged: %s CRASHED (%s)" % (name, err))
                failed += 1
            seen[outcome] += 1
            shutil.rmtree(dest)
        print("damaged: %d cases with %s: %d refused, %d accepted, %d crashed" % (
            sum(seen.values()),
            "a digest that matches" if match_digest else "the manifest's digest",
            seen["refused"], seen["accepted"], seen["crashed"]))
    for name, manifest, expected in lies(bundle):
        dest = write_lie(bundle, os.path.join(work, "lie-" + name), manifest)
        outcome, err = _open(tool, dest)
        want = "refused" if expected else "accepted"
        if outcome != want or (expected and expected not in err):
            print("lie %s: %s, expected %s (%s): %s" % (name, outcome, want, expected, err))
            failed += 1
        else:
            print("lie %s: %s" % (name, outcome))
        shutil.rmtree(dest)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
