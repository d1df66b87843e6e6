"""liger.scale's kernel on the GPU (the @scale of each loss bundle: the
cross-entropy's and the divergences', precompiled on the build machine:
LIGER_OPS_BUNDLES), the way a loss's backward scales the gradient its
forward formed: rows times a scalar factor, or one factor per row,
written over the input or into another buffer (poisoned with NaN first),
against PyTorch's product rounded once; and the rows it must leave alone,
in place with a factor of exactly 1, neither read nor written. Skips
cleanly without torch, a GPU, the runtime or the bundles."""

import pytest

import kernels

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU on this machine", allow_module_level=True)
from liger import bundles  # noqa: E402

pytestmark = pytest.mark.usefixtures("ops_bundles")


def _cases():
    """name -> (spec, tokens, per_row): every divergence bundle with a
    @scale (a scalar factor) and cross-entropy bundles of each loss type
    (per row for reduction "none")."""
    cases = {}
    for name, (spec, _, (tokens, _), _) in kernels.ops_divergence_cases().items():
        if not getattr(spec, "pointwise", False):
            cases[name] = (spec, tokens, False)
    for name, (spec, _, _, tokens, kw) in kernels.ops_ce_cases().items():
        cases[name] = (spec, tokens, kw.get("reduction") == "none")
    return cases


CASES = _cases()
# A signaling NaN of each dtype: a product with it gives the canonical NaN,
# so only a row left alone keeps its bits.
SIGNALING_NAN = {torch.bfloat16: 0x7F81, torch.float16: 0x7C01, torch.float32: 0x7F800001}
INT_VIEW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


def _rows(name, seed):
    spec, tokens, per_row = CASES[name]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    dtype = kernels.torch_dtype(spec.dtype)
    x = torch.randn(tokens, spec.vocab, generator=gen, device="cuda").to(dtype)
    return spec, x, per_row, gen


def _product(x, factor):
    """PyTorch's x * factor in f32, rounded once to x's dtype."""
    f = factor if factor.dim() == 0 else factor[:, None]
    return (x.float() * f).to(x.dtype)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rows_times_the_factor(name):
    """In place and into a poisoned buffer, factors of 1, 0, -2.5 and
    random ones: PyTorch's product, bit for bit, every element written."""
    seed = torch.seed()
    spec, x, per_row, gen = _rows(name, seed)
    scale = bundles.load(spec)["scale_rowwise_0"]
    tokens = x.shape[0]
    factors = [torch.tensor(v, device="cuda") for v in (1.0, 0.0, -2.5)]
    factors.append(torch.rand((), generator=gen, device="cuda") * 4 - 2)
    if per_row:
        mixed = torch.rand(tokens, generator=gen, device="cuda") * 4 - 2
        mixed[::3] = 1.0
        factors = [f.expand(tokens).contiguous() for f in factors] + [mixed]
    for factor in factors:
        what = "%s factor %s (seed %d)" % (name, factor.tolist(), seed)
        want = _product(x, factor)
        out = torch.full_like(x, float("nan"))
        scale(x, factor, out=[out])
        assert torch.equal(out, want), what + ": into another buffer"
        inplace = x.clone()
        scale(inplace, factor, out=[inplace])
        assert torch.equal(inplace, want), what + ": in place"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_row_in_place_with_a_factor_of_one_is_left_alone(name):
    """A signaling NaN in every row: the product turns it into the
    canonical NaN (into another buffer, factor 1), while in place the rows
    whose factor is exactly 1 keep its bits (not written) and the others
    get the product."""
    seed = torch.seed()
    spec, x, per_row, gen = _rows(name, seed)
    scale = bundles.load(spec)["scale_rowwise_0"]
    tokens, vocab = x.shape
    col = torch.randint(0, vocab, (tokens,), generator=gen, device="cuda")
    bits = x.view(INT_VIEW[x.dtype])
    bits[torch.arange(tokens, device="cuda"), col] = SIGNALING_NAN[x.dtype]
    one = torch.ones(tokens if per_row else (), device="cuda")
    out = torch.zeros_like(x)
    scale(x, one, out=[out])
    assert not torch.equal(out.view(bits.dtype), bits), \
        "%s: the product keeps a signaling NaN's bits; this test cannot tell a row " \
        "left alone from one written (seed %d)" % (name, seed)
    factor = one.clone()
    if per_row:
        factor[1::2] = 2.0
    left = factor == 1.0 if per_row else torch.ones(tokens, dtype=torch.bool, device="cuda")
    inplace = x.clone()
    scale(inplace, factor, out=[inplace])
    got = inplace.view(bits.dtype)
    what = "%s (seed %d)" % (name, seed)
    assert torch.equal(got[left], bits[left]), what + ": a row with factor 1 was written"
    if per_row and (~left).any():
        want = _product(x, factor).view(bits.dtype)
        assert torch.equal(got[~left], want[~left]), what + ": a scaled row"
