"""What configures a liger.ops kernel: one frozen dataclass per op.

A spec holds everything that changes the compiled kernel (the op, its
attributes, the static sizes, the dtypes and the target) and nothing else;
the token count is dynamic. Constructing one validates every field (types,
ranges, finite floats, enums from a fixed set, ints in int64 range): a spec
that exists is one whose module text can be formed, so nothing a user
passes reaches the IR unchecked. Builders (`rms_norm_spec`, ...) take torch
dtypes or "bf16"/"f16"/"f32" and Python numbers; `parse_spec` reads the
`op:key=value,...` form that `str(spec)` writes (what `python -m liger.ops
precompile` takes); `spec.key()` names its bundle in the cache.

    spec = rms_norm_spec(4096, torch.bfloat16, eps=1e-6)
    str(spec)          # rms_norm:casting=llama,dtype=bf16,eps=1e-06,...
    spec.module_text() # the liger module: @fwd and @bwd
    spec.key()         # sha256 of the module, the compile options, the target

The target: "sm_90a" (Hopper), "sm_80" or "sm_86" (Ampere and Ada, the
mma.sync templates, sized for 163 KB and 99 KB of shared memory) or "cpu"
(the reference lowering, for CPU tensors); `target_for_capability` maps a
GPU's compute capability to it (`CAPABILITIES`).
"""

import dataclasses
import math
import numbers
from typing import ClassVar, Optional

from .cache import bundle_key, compile_options
from .errors import LigerTypeError, LigerValueError

DTYPES = ("bf16", "f16", "f32")
TARGET_DTYPES = ("i32", "i64")
# The GPUs liger has kernels for: compute capability -> (the target, the
# most dynamic shared memory a block may take there, with the opt-in). A
# target's kernels run on every capability mapped to it, so liger-compile
# sizes them for the least of these (lib/Target/GpuTarget.cpp).
CAPABILITIES = {
    (9, 0): ("sm_90a", 227 * 1024),   # H100, H200, GH200
    (8, 0): ("sm_80", 163 * 1024),    # A100, A30
    (8, 7): ("sm_80", 163 * 1024),    # Jetson Orin
    (8, 6): ("sm_86", 99 * 1024),     # A10, A40, RTX 30
    (8, 9): ("sm_86", 99 * 1024),     # L4, L40S, RTX 40
}
GPU_TARGETS = ("sm_90a", "sm_80", "sm_86")
REFERENCE_TARGET = "cpu"
TARGETS = GPU_TARGETS + (REFERENCE_TARGET,)
DEFAULT_TARGET = "sm_90a"
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
# Every float attribute of the liger ops is an f32.
F32_MAX = 3.4028234663852886e+38
F32_MIN_NORMAL = 1.1754943508222875e-38
# Static sizes are tensor dimensions of the module (i32 index arithmetic in
# the kernels).
MAX_SIZE = 2 ** 31 - 1
BYTES = {"bf16": 2, "f16": 2, "f32": 4}
_TORCH_NAMES = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32",
                "torch.int32": "i32", "torch.int64": "i64"}


def target_for_capability(major, minor):
    """The target of a GPU of compute capability major.minor, or None where
    liger has no kernels for it (`CAPABILITIES`)."""
    return CAPABILITIES.get((major, minor), (None,))[0]


def targets_text():
    """The targets and the compute capabilities each runs on, for messages:
    "sm_90a (9.0), sm_80 (8.0, 8.7), sm_86 (8.6, 8.9)"."""
    return ", ".join("%s (%s)" % (target, ", ".join(
        "%d.%d" % cc for cc, (t, _) in CAPABILITIES.items() if t == target))
        for target in GPU_TARGETS)


# --- the checks every argument goes through (one rule each) ---------------

def check_int(name, value, lo=INT64_MIN, hi=INT64_MAX):
    """`value` as an int: an integer (not a bool, not a float) in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LigerTypeError("%s must be an int, got %r" % (name, value))
    value = int(value)
    if not lo <= value <= hi:
        raise LigerValueError("%s must be in [%d, %d], got %d" % (name, lo, hi, value))
    return value


def check_ignore_index(value, labels):
    """`ignore_index` for labels of dtype `labels` (TARGET_DTYPES, or "none"
    where there are none): an int that type holds. The kernels compare each
    label with it in the labels' own type, where a wider index would wrap
    and match real labels (the dialect's rule: verifyIgnoreIndex)."""
    value = check_int("ignore_index", value)
    if labels == "none":
        return value
    bits = int(labels[1:])
    return check_int("ignore_index (of %s labels)" % labels, value,
                     -2 ** (bits - 1), 2 ** (bits - 1) - 1)


def check_float(name, value, lo=None, hi=None, lo_open=False):
    """`value` as a float: a finite real number (not a bool) in [lo, hi]
    (or (lo, hi] with lo_open) that an f32 attribute holds as it is: 0, or
    a magnitude in f32's normal range (none rounds to 0 or to infinity, or
    is flushed to 0 by the kernels)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LigerTypeError("%s must be a number, got %r" % (name, value))
    value = float(value)
    if not math.isfinite(value):
        raise LigerValueError("%s must be finite, got %r" % (name, value))
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise LigerValueError("%s must be %s %r, got %r" % (name, ">" if lo_open else ">=",
                                                             lo, value))
    if hi is not None and value > hi:
        raise LigerValueError("%s must be <= %r, got %r" % (name, hi, value))
    if value != 0 and not F32_MIN_NORMAL <= abs(value) <= F32_MAX:
        raise LigerValueError("%s must be an f32: 0 or of a magnitude in [%r, %r], got %r" % (
            name, F32_MIN_NORMAL, F32_MAX, value))
    return value


def _plain(text):
    """The characters of a str, whatever a subclass's __str__ or __eq__
    says."""
    return str.__str__(text)


def check_choice(name, value, choices):
    """The one of the strings `choices` that `value` is (the canonical
    string, not the caller's object)."""
    if isinstance(value, str) and _plain(value) in choices:
        return choices[choices.index(_plain(value))]
    raise LigerValueError("%s must be one of %s, got %r" % (
        name, ", ".join(repr(c) for c in choices), value))


def check_bool(name, value):
    """`value`, a bool (not 0 or 1)."""
    if not isinstance(value, bool):
        raise LigerTypeError("%s must be a bool, got %r" % (name, value))
    return value


def dtype_name(dtype, name="dtype", allowed=DTYPES):
    """"bf16" for torch.bfloat16 or "bf16" (and so on), one of `allowed`."""
    text = _plain(dtype if isinstance(dtype, str) else str(dtype))
    text = _TORCH_NAMES.get(text, text)
    if text not in allowed:
        raise LigerTypeError("%s must be %s, got %s" % (name, " or ".join(allowed), dtype))
    return allowed[allowed.index(text)]


def check_softcap(value):
    """A logit softcap: None or 0 mean none (0.0 here); otherwise a finite
    number > 0."""
    if value is None:
        return 0.0
    value = check_float("softcap", value)
    if value < 0:
        raise LigerValueError("softcap must be None, 0 (no softcap) or > 0, got %r" % value)
    return value


# --- specs ----------------------------------------------------------------

def _size(name, value):
    return check_int(name, value, 1, MAX_SIZE)


@dataclasses.dataclass(frozen=True)
class Spec:
    """The configuration of one liger.ops kernel module (a base class: one
    subclass per op)."""

    op: ClassVar[str] = ""
    # Whether liger.bundles counts this op's configurations loaded in a
    # process (a LigerRecompileWarning past RECOMPILE_WARNING_AT): an op's
    # differ by their attribute values and sizes.
    COUNTED: ClassVar[bool] = True

    def __post_init__(self):
        for name, value in self._checked().items():
            object.__setattr__(self, name, value)

    def _checked(self):
        """The fields, validated and normalized (the op's rules)."""
        raise NotImplementedError

    def __str__(self):
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name != "target"}
        return self.op + ":" + ",".join("%s=%s" % (k, _text(v)) for k, v in
                                        sorted(self._string_fields(fields).items()))

    def _string_fields(self, fields):
        return fields

    def module_text(self):
        """The liger module the kernels are compiled from."""
        raise NotImplementedError

    def compile_options(self):
        """liger-compile's options for the module (the target among them),
        as liger.compiler.compile takes them: no matmul templates (liger-compile
        --no-matmul-kernels), which a spec whose kernels are theirs turns on."""
        return dict(target=self.target, matmul_kernels=False)

    def key(self):
        """The name of the spec's bundle in a cache: a hash of the module
        text and the compile options (the target is one)."""
        return bundle_key(self.module_text(), compile_options(**self.compile_options()))

    def with_target(self, target):
        return dataclasses.replace(self, target=target)


def _text(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _common(spec):
    return dict(dtype=dtype_name(spec.dtype), target=check_choice("target", spec.target, TARGETS))


def _norm_fields(spec):
    """The fields every norm's spec has: rows of `hidden` features of
    `dtype`, a weight of `weight_dtype`, eps > 0."""
    return dict(_common(spec), hidden=_size("hidden", spec.hidden),
                weight_dtype=dtype_name(spec.weight_dtype, "weight_dtype"),
                eps=check_float("eps", spec.eps, 0.0, lo_open=True))


@dataclasses.dataclass(frozen=True)
class RMSNormSpec(Spec):
    op: ClassVar[str] = "rms_norm"
    hidden: int
    dtype: str
    weight_dtype: str
    eps: float
    offset: float
    casting: str
    target: str = DEFAULT_TARGET

    def _checked(self):
        return dict(_norm_fields(self), offset=check_float("offset", self.offset),
                    casting=check_choice("casting", self.casting, ("llama", "gemma", "none")))

    def _types(self):
        """The types of the rows [?, H], of the weight [H] and of rstd."""
        return ("tensor<?x%dx%s>" % (self.hidden, self.dtype),
                "tensor<%dx%s>" % (self.hidden, self.weight_dtype), "tensor<?xf32>")

    def _grad_attrs(self):
        """The attributes the backward shares with the forward (eps is the
        forward's alone)."""
        return "offset = %.9e casting = %s" % (self.offset, self.casting)

    def _rms_norm_grad(self, x):
        """The line `%dx, %dw = liger.rms_norm_grad` of the incoming gradient
        %dy over the normalized rows `x`, with %w and %r."""
        X, W, R = self._types()
        return "%%dx, %%dw = liger.rms_norm_grad %%dy, %s, %%w, %%r %s : %s, %s, %s" % (
            x, self._grad_attrs(), X, W, R)

    def module_text(self):
        X, W, R = self._types()
        attrs = "eps = %.9e %s" % (self.eps, self._grad_attrs())
        return f"""func.func @fwd(%x: {X}, %w: {W}) -> ({X}, {R}) {{
  %y, %r = liger.rms_norm %x, %w {attrs} rstd : {X}, {W}
  return %y, %r : {X}, {R}
}}
func.func @bwd(%dy: {X}, %x: {X}, %w: {W}, %r: {R}) -> ({X}, {W}) {{
  {self._rms_norm_grad("%x")}
  return %dx, %dw : {X}, {W}
}}
"""


@dataclasses.dataclass(frozen=True)
class AddRMSNormSpec(RMSNormSpec):
    """The residual add and the RMSNorm of the sum (Hugging Face's fused
    add + norm): the forward returns the normalized sum, the sum and its
    rstd; the backward is RMSNorm's over the saved sum, the sum's own
    incoming gradient added to dx in the same kernel."""

    op: ClassVar[str] = "add_rms_norm"

    def module_text(self):
        X, W, R = self._types()
        attrs = "eps = %.9e %s" % (self.eps, self._grad_attrs())
        # @bwd's parameters and results are in its kernel's launch order:
        # the group's inputs as its ops read them (the sum's gradient %ds
        # last), then its results as its ops make them (dW, then the
        # residual stream's gradient).
        return f"""func.func @fwd(%x: {X}, %res: {X}, %w: {W}) -> ({X}, {X}, {R}) {{
  %y, %s, %r = liger.add_rms_norm %x, %res, %w {attrs} rstd : {X}, {W}
  return %y, %s, %r : {X}, {X}, {R}
}}
func.func @bwd(%dy: {X}, %s: {X}, %w: {W}, %r: {R}, %ds: {X}) -> ({W}, {X}) {{
  {self._rms_norm_grad("%s")}
  %d = liger.add %dx, %ds : {X}
  return %dw, %d : {W}, {X}
}}
"""


@dataclasses.dataclass(frozen=True)
class LayerNormSpec(Spec):
    """LayerNorm over rows of `hidden` features, with a weight and, where
    `bias`, a bias of `weight_dtype`. The forward returns each row's mean
    and rstd (f32) beside y, and the backward (liger.layer_norm_grad) reads
    them, as RMSNorm's does its rstd."""

    op: ClassVar[str] = "layer_norm"
    hidden: int
    dtype: str
    weight_dtype: str
    eps: float
    bias: bool
    target: str = DEFAULT_TARGET

    def _checked(self):
        return dict(_norm_fields(self), bias=check_bool("bias", self.bias))

    def module_text(self):
        X = "tensor<?x%dx%s>" % (self.hidden, self.dtype)
        W = "tensor<%dx%s>" % (self.hidden, self.weight_dtype)
        R = "tensor<?xf32>"
        # Without a bias, neither its operand nor its gradient (dW alone
        # is reduced across the rows).
        b_param, b_use, b_type = (", %%b: %s" % W, ", %b", ", " + W) if self.bias else ("",) * 3
        db = ", %db" if self.bias else ""
        return f"""func.func @fwd(%x: {X}, %w: {W}{b_param}) -> ({X}, {R}, {R}) {{
  %y, %m, %r = liger.layer_norm %x, %w{b_use} eps = {self.eps:.9e} stats : {X}, {W}{b_type}
  return %y, %m, %r : {X}, {R}, {R}
}}
func.func @bwd(%dy: {X}, %x: {X}, %w: {W}, %m: {R}, %r: {R}) -> ({X}, {W}{b_type}) {{
  %dx, %dw, %db = liger.layer_norm_grad %dy, %x, %w, %m, %r : {X}, {W}, {R}
  return %dx, %dw{db} : {X}, {W}{b_type}
}}
"""


@dataclasses.dataclass(frozen=True)
class _RowSpec(Spec):
    """An op over rows of `hidden` features of one dtype."""

    hidden: int
    dtype: str
    target: str = DEFAULT_TARGET

    def _checked(self):
        return dict(_common(self), hidden=_size("hidden", self.hidden))


@dataclasses.dataclass(frozen=True)
class SwiGLUSpec(_RowSpec):
    op: ClassVar[str] = "swiglu"

    def _attrs(self):
        return ""

    def module_text(self):
        X = "tensor<?x%dx%s>" % (self.hidden, self.dtype)
        op, attrs = self.op, self._attrs()
        return f"""func.func @fwd(%g: {X}, %u: {X}) -> {X} {{
  %y = liger.{op} %g, %u{attrs} : {X}
  return %y : {X}
}}
func.func @bwd(%dy: {X}, %g: {X}, %u: {X}) -> ({X}, {X}) {{
  %dg, %du = liger.{op}_grad %dy, %g, %u{attrs} : {X}
  return %dg, %du : {X}, {X}
}}
"""


@dataclasses.dataclass(frozen=True)
class GeGLUSpec(SwiGLUSpec):
    op: ClassVar[str] = "geglu"
    approximate: str = "tanh"

    def _checked(self):
        return dict(super()._checked(),
                    approximate=check_choice("approximate", self.approximate, ("tanh", "none")))

    def _attrs(self):
        return " approximate = %s" % self.approximate


@dataclasses.dataclass(frozen=True)
class SoftmaxSpec(_RowSpec):
    op: ClassVar[str] = "softmax"

    def module_text(self):
        X = "tensor<?x%dx%s>" % (self.hidden, self.dtype)
        return f"""func.func @fwd(%x: {X}) -> {X} {{
  %y = liger.softmax %x : {X}
  return %y : {X}
}}
func.func @bwd(%dy: {X}, %y: {X}) -> {X} {{
  %dx = liger.softmax_grad %dy, %y : {X}
  return %dx : {X}
}}
"""


@dataclasses.dataclass(frozen=True)
class RoPESpec(Spec):
    op: ClassVar[str] = "rope"
    q_heads: int
    k_heads: int
    head_dim: int
    dtype: str
    broadcast_tables: bool
    target: str = DEFAULT_TARGET

    def _checked(self):
        head_dim = _size("head_dim", self.head_dim)
        if head_dim % 2:
            raise LigerValueError("head_dim must be even (RoPE rotates the two halves of a "
                                  "head), got %d" % head_dim)
        return dict(_common(self), q_heads=_size("q_heads", self.q_heads),
                    k_heads=_size("k_heads", self.k_heads), head_dim=head_dim,
                    broadcast_tables=check_bool("broadcast_tables", self.broadcast_tables))

    def module_text(self):
        dt, d = self.dtype, self.head_dim
        Q = "tensor<?x%dx?x%dx%s>" % (self.q_heads, d, dt)
        K = "tensor<?x%dx?x%dx%s>" % (self.k_heads, d, dt)
        C = "tensor<%sx?x%dx%s>" % ("1" if self.broadcast_tables else "?", d, dt)
        return "\n".join(f"""func.func @{fn}(%q: {Q}, %k: {K}, %c: {C}, %s: {C}) -> ({Q}, {K}) {{
  %a, %b = {name} %q, %k, %c, %s : {Q}, {K}, {C}
  return %a, %b : {Q}, {K}
}}""" for fn, name in (("fwd", "liger.rope"), ("bwd", "liger.rope_grad"))) + "\n"


def scale_function(rows, factor):
    """@scale: rows of type `rows` (a gradient a loss formed in its forward
    for a unit incoming gradient) times the incoming gradient, of type
    `factor` (tensor<f32>, or one f32 per row). Its kernel (scale_rowwise_0)
    may write over its input, and then leaves alone the rows whose factor
    is 1 (liger.scale): the loss's backward scales in place without asking
    the device whether the gradient is 1."""
    return f"""func.func @scale(%d: {rows}, %g: {factor}) -> {rows} {{
  %s = liger.scale %d, %g : {rows}, {factor}
  return %s : {rows}
}}
"""


@dataclasses.dataclass(frozen=True)
class CrossEntropySpec(Spec):
    """The cross-entropy of logits and its gradient (liger.ops.cross_
    entropy): the loss's attributes, class weights [vocab] (`weighted`) and
    the z-loss term returned apart (`return_z_loss`)."""

    op: ClassVar[str] = "cross_entropy"
    vocab: int
    dtype: str
    target_dtype: str = "i64"
    ignore_index: int = -100
    label_smoothing: float = 0.0
    reduction: str = "mean"
    softcap: float = 0.0
    lse_square_scale: float = 0.0
    weighted: bool = False
    target: str = DEFAULT_TARGET
    return_z_loss: bool = False

    REDUCTIONS: ClassVar[tuple] = ("mean", "sum", "none")
    # The fields written only when set: the specs before them keep their
    # text (and their bundles' keys).
    OPTIONAL_FLAGS: ClassVar[tuple] = ("return_z_loss",)

    def _checked(self):
        target_dtype = dtype_name(self.target_dtype, "target_dtype", TARGET_DTYPES)
        checked = dict(_common(self), vocab=_size("vocab", self.vocab),
                       target_dtype=target_dtype,
                       ignore_index=check_ignore_index(self.ignore_index, target_dtype),
                       label_smoothing=check_float("label_smoothing", self.label_smoothing,
                                                   0.0, 1.0),
                       reduction=check_choice("reduction", self.reduction, self.REDUCTIONS),
                       softcap=check_softcap(self.softcap),
                       lse_square_scale=check_float("lse_square_scale",
                                                    self.lse_square_scale, 0.0),
                       weighted=check_bool("weighted", self.weighted))
        for flag in self.OPTIONAL_FLAGS:
            checked[flag] = check_bool(flag, getattr(self, flag))
        return checked

    def _string_fields(self, fields):
        return {k: v for k, v in fields.items() if k not in self.OPTIONAL_FLAGS or v}

    def loss_type(self):
        """The type of the loss and of its incoming gradient: one f32 per
        token for reduction "none", else a scalar."""
        return "tensor<?xf32>" if self.reduction == "none" else "tensor<f32>"

    def attributes(self):
        """The cross-entropy attributes, in the ops' syntax order."""
        attrs = "ignore_index = %d label_smoothing = %.9e reduction = %s" % (
            self.ignore_index, self.label_smoothing, self.reduction)
        if self.softcap > 0:
            attrs += " softcap = %.9e" % self.softcap
        return attrs + " lse_square_scale = %.9e" % self.lse_square_scale

    def z_loss_parts(self):
        """With `return_z_loss`, what the loss op's z-loss result adds to a
        module: (its value after the loss's, its type after the loss's, the
        op's unit attribute); empty strings without."""
        if not self.return_z_loss:
            return ("",) * 3
        return ", %z", ", " + self.loss_type(), " z_loss"

    def module_text(self):
        X = "tensor<?x%dx%s>" % (self.vocab, self.dtype)
        T = "tensor<?x%s>" % self.target_dtype
        L = self.loss_type()
        W = "tensor<%dxf32>" % self.vocab
        wparam = ", %%w: %s" % W if self.weighted else ""
        wuse = " weight(%%w : %s)" % W if self.weighted else ""
        z, ztype, zattr = self.z_loss_parts()
        attrs = self.attributes()
        # The loss (and the z-loss term apart) and its gradient for the
        # incoming gradient %g: one kernel (liger-fuse-cross-entropy-grad).
        return f"""func.func @fwd(%x: {X}, %t: {T}{wparam}, %g: {L}) -> ({L}{ztype}, {X}) {{
  %l{z} = liger.cross_entropy %x, %t{wuse} {attrs}{zattr} : {X}, {T}
  %d = liger.cross_entropy_grad %x, %t, %g{wuse} {attrs} : {X}, {T}, {L}
  return %l{z}, %d : {L}{ztype}, {X}
}}
""" + scale_function(X, L)


def raise_problem(problem):
    """Raises a rule's (exception class, message), where it gives one (the
    *_problem functions' form)."""
    if problem:
        kind, message = problem
        raise kind(message)


def lm_head_problem(vocab, hidden, dtype, op="liger.ops.fused_linear_cross_entropy",
                    instead="liger.ops.cross_entropy on the logits"):
    """Why the matmul kernels of `op` (an lm_head's fused loss) cannot take
    an lm_head [vocab, hidden] of `dtype`, as (exception class, message), or
    None: they are 16-bit (wgmma's and mma.sync's), and their TMA and
    cp.async copies move 16-byte rows (both sizes multiples of 8 at 2 bytes
    an element). `instead` names what to use then."""
    if dtype_name(dtype) == "f32":
        return LigerTypeError, ("%s takes bf16 or f16 (its matmul kernels are wgmma's and "
                                "mma.sync's); for f32 use %s" % (op, instead))
    if int(vocab) % 8 or int(hidden) % 8:
        return LigerValueError, ("%s needs an lm_head whose vocabulary and hidden sizes are "
                                 "multiples of 8 (its matmul kernels move 16-byte rows), got "
                                 "[%d, %d]; use %s" % (op, int(vocab), int(hidden), instead))
    return None


def fused_linear_cross_entropy_unsupported_shape(vocab, hidden):
    """Why liger.ops.fused_linear_cross_entropy's kernels cannot take a 16-bit
    lm_head [vocab, hidden] (lm_head_problem's message), or None."""
    problem = lm_head_problem(vocab, hidden, "bf16")
    return problem[1] if problem else None


@dataclasses.dataclass(frozen=True)
class FusedLinearCrossEntropySpec(CrossEntropySpec):
    """The lm_head's loss and its gradient (liger.ops.fused_linear_cross_
    entropy): the cross-entropy attributes, the hidden size, dW summed in
    f32 (`dw_f32`), a bias [vocab] of the dtype added to the logits
    (`bias`; its gradient is the column sums of the logits' gradient) and
    the z-loss term returned apart (`return_z_loss`)."""

    op: ClassVar[str] = "fused_linear_cross_entropy"
    hidden: int = 0
    dw_f32: bool = False
    bias: bool = False

    # (Written only when set, as CrossEntropySpec's.)
    OPTIONAL_FLAGS: ClassVar[tuple] = ("dw_f32", "bias", "return_z_loss")

    def _checked(self):
        checked = super()._checked()
        checked["hidden"] = _size("hidden", self.hidden)
        raise_problem(lm_head_problem(checked["vocab"], checked["hidden"], checked["dtype"]))
        if checked["weighted"] and checked["lse_square_scale"] > 0 and \
                checked["reduction"] == "mean":
            raise LigerValueError(
                "liger.ops.fused_linear_cross_entropy: class weights with a z-loss and "
                "reduction=mean divide the two terms by different totals; use "
                "liger.ops.cross_entropy on materialized logits")
        return checked

    def compile_options(self):
        """The matmul templates and the loss plan (liger-compile's default;
        --loss-dw-f32 sums dW in f32)."""
        return dict(super().compile_options(), matmul_kernels=True, loss_dw_f32=self.dw_f32)

    def module_text(self):
        """The lm_head's loss and its gradient as the two liger ops, in one
        function @loss (incoming gradient %g). liger-compile
        plans them (liger-plan-loss: the functions of one chunk — logits
        (with the bias, which that function then takes after W), the summed
        loss (and the z-loss term apart) with its gradient over the logits,
        dx, dW first and accumulating, or with dw_f32 dW accumulated in f32
        alone — and the manifest's plan naming their kernels). With
        reduction "none" the loss, the z-loss and %g are per token, [N]
        f32. @loss's results: the loss, the z-loss (return_z_loss), dh, dW
        and the bias's gradient (bias). @scale: dh or dW [V, H] (rows of
        the hidden size) times a scalar (scale_function), the backward's
        of the gradients a reduced loss formed in its forward."""
        X = "tensor<?x%dx%s>" % (self.hidden, self.dtype)
        W = "tensor<%dx%dx%s>" % (self.vocab, self.hidden, self.dtype)
        T = "tensor<?x%s>" % self.target_dtype
        B = "tensor<%dx%s>" % (self.vocab, self.dtype)
        CW = "tensor<%dxf32>" % self.vocab
        bparam, buse, btype, db = (", %%b: %s" % B, " bias(%%b : %s)" % B, ", " + B, ", %db") \
            if self.bias else ("",) * 4
        wparam = ", %%cw: %s" % CW if self.weighted else ""
        wuse = " class_weight(%%cw : %s)" % CW if self.weighted else ""
        L = self.loss_type()
        z, ztype, zattr = self.z_loss_parts()
        attrs = self.attributes()
        return f"""func.func @loss(%h: {X}, %w: {W}, %t: {T}{bparam}{wparam}, %g: {L}) -> ({L}{ztype}, {X}, {W}{btype}) {{
  %l{z} = liger.fused_linear_cross_entropy %h, %w, %t{buse}{wuse} {attrs}{zattr} : {X}, {W}, {T}
  %dh, %dw{db} = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g{buse}{wuse} {attrs} : {X}, {W}, {T}, {L}
  return %l{z}, %dh, %dw{db} : {L}{ztype}, {X}, {W}{btype}
}}
""" + scale_function(X, "tensor<f32>")


# --- the matmul template's kernels (liger.ops.lora_linear, gated_mlp) --------

# K's multiple on each GPU target: TMA's 16-byte rows on sm_90a (wgmma),
# whole 64-byte tile_k slices on the mma.sync targets. The reference
# lowering (target "cpu") is held to sm_90a's rules, so that a CPU test
# refuses what the GPU would.
MATMUL_K_MULTIPLE = {"sm_90a": 8, "sm_80": 32, "sm_86": 32}


def _matmul_rules(target):
    """The target whose template rules a spec for `target` follows (the
    reference lowering, "cpu", follows sm_90a's)."""
    return target if target in MATMUL_K_MULTIPLE else DEFAULT_TARGET


def _matmul_fields(spec, op, k_name, n_name):
    """The fields every matmul template's spec checks: bf16 or f16, K (the
    reduction, field `k_name`) a multiple of the target's MATMUL_K_MULTIPLE,
    N (the columns of each result, field `n_name`) a multiple of 8."""
    checked = _common(spec)
    if checked["dtype"] == "f32":
        raise LigerTypeError(
            "liger.ops.%s takes bf16 or f16 (its kernels are the matmul template's: wgmma "
            "and mma.sync), got f32" % op)
    k = _size(k_name, getattr(spec, k_name))
    n = _size(n_name, getattr(spec, n_name))
    rules = _matmul_rules(checked["target"])
    multiple = MATMUL_K_MULTIPLE[rules]
    if k % multiple:
        raise LigerValueError(
            "%s must be a multiple of %d on %s (the matmul template reads K in %d-byte rows), "
            "got %d"
            % (k_name, multiple, rules, multiple * 2, k))
    if n % 8:
        raise LigerValueError("%s must be a multiple of 8 (the matmul template's column tiles), "
                              "got %d"
                              % (n_name, n))
    return dict(checked, **{k_name: k, n_name: n})


# --- LoRA projection (liger.ops.lora_linear) --------------------------------

# The ranks the LoRA kernel takes: its second product is k16 MMAs over the
# rank, and on wgmma B's [tile_n, rank] tile arrives through TMA swizzled by
# its rows, which must be one swizzle span (32, 64 or 128 bytes).
LORA_RANKS = (16, 32, 64)


@dataclasses.dataclass(frozen=True)
class LoRALinearSpec(Spec):
    """PEFT's LoRA projection `x · Wᵀ + b + (x · Aᵀ) · Bᵀ · scale` (liger.
    lora_linear) of x [?, in_features] with W [out_features, in_features],
    A [rank, in_features], B [out_features, rank] and, where `bias`, b
    [out_features], all of `dtype`: one kernel of the matmul template.
    The rules are that template's
    (_matmul_fields, and the rank)."""

    op: ClassVar[str] = "lora_linear"
    in_features: int
    out_features: int
    rank: int
    dtype: str
    scale: float
    bias: bool
    target: str = DEFAULT_TARGET

    def _checked(self):
        checked = _matmul_fields(self, self.op, "in_features", "out_features")
        rank = _size("rank", self.rank)
        if rank not in LORA_RANKS:
            raise LigerValueError(
                "rank must be 16, 32 or 64 (the kernel's second product is k16 MMAs over the "
                "rank, B's rows one TMA swizzle span), got %d" % rank)
        scale = check_float("scale", self.scale)
        if scale == 0:
            raise LigerValueError("scale must not be 0 (the projection is then the base "
                                  "layer alone: use torch.nn.functional.linear)")
        return dict(checked, rank=rank, scale=scale,
                    bias=check_bool("bias", self.bias))

    def compile_options(self):
        """The matmul template (liger-compile's default)."""
        return dict(super().compile_options(), matmul_kernels=True)

    def module_text(self):
        """@fwd: the projection, whose kernel (fwd_matmul_0) takes x, W, A,
        B and the bias in that order and writes y [?, out_features]. @bwd:
        its input's gradient dx = dy · W + scale · (dy · B) · A, which is
        the projection of dy with Wᵀ, Bᵀ and Aᵀ; its kernel (bwd_matmul_0)
        reads W itself (MN-major) and takes W, dy, Bᵀ [rank, out_features]
        and Aᵀ [in_features, rank] in that order (the caller transposes
        the two factors: rank-wide, they are small)."""
        dt, k, n, r = self.dtype, self.in_features, self.out_features, self.rank
        X, Y = "tensor<?x%dx%s>" % (k, dt), "tensor<?x%dx%s>" % (n, dt)
        W, A, B = ("tensor<%dx%dx%s>" % (n, k, dt), "tensor<%dx%dx%s>" % (r, k, dt),
                   "tensor<%dx%dx%s>" % (n, r, dt))
        WT, AT, BT = ("tensor<%dx%dx%s>" % (k, n, dt), "tensor<%dx%dx%s>" % (k, r, dt),
                      "tensor<%dx%dx%s>" % (r, n, dt))
        C = "tensor<%dx%s>" % (n, dt)
        c_param, c_use, c_type = (", %%c: %s" % C, ", %c", ", " + C) if self.bias else ("",) * 3
        return f"""func.func @fwd(%x: {X}, %w: {W}, %a: {A}, %b: {B}{c_param}) -> {Y} {{
  %y = liger.lora_linear %x, %w, %a, %b{c_use} scale = {self.scale:.9e} : {X}, {W}, {A}, {B}{c_type}
  return %y : {Y}
}}
func.func @bwd(%w: {W}, %dy: {Y}, %bt: {BT}, %at: {AT}) -> {X} {{
  %e = tensor.empty() : {WT}
  %wt = linalg.transpose ins(%w : {W}) outs(%e : {WT}) permutation = [1, 0]
  %dx = liger.lora_linear %dy, %wt, %bt, %at scale = {self.scale:.9e} : {Y}, {WT}, {BT}, {AT}
  return %dx : {X}
}}
"""



# --- the gated MLP (liger.ops.gated_mlp) -------------------------------------

GATED_ACTIVATIONS = ("swiglu", "geglu")


@dataclasses.dataclass(frozen=True)
class GatedMLPSpec(Spec):
    """A gated MLP `down(act(x · Wgᵀ) * (x · Wuᵀ))` of x [?, hidden] with
    gate and up weights [intermediate, hidden] and the down weight [hidden,
    intermediate], all of `dtype`: act is SiLU (`swiglu`) or GELU (`geglu`,
    `approximate`). Two kernels of the matmul template: the forward's
    gate/up pair with the activation in its
    epilogue, keeping gate and up for the backward (@fwd), and the
    backward's dh = dy · W_down with the activation's gradient in its
    epilogue, writing dgate and dup without storing dh (@bwd). The down
    projection and the weight gradients are the caller's GEMMs."""

    op: ClassVar[str] = "gated_mlp"
    hidden: int
    intermediate: int
    dtype: str
    activation: str = "swiglu"
    approximate: str = "tanh"
    target: str = DEFAULT_TARGET

    def _checked(self):
        # Both kernels reduce over hidden (x · Wᵀ, dy · W_down) and write
        # [rows, intermediate] results.
        checked = _matmul_fields(self, self.op, "hidden", "intermediate")
        activation = check_choice("activation", self.activation, GATED_ACTIVATIONS)
        approximate = check_choice("approximate", self.approximate, ("tanh", "none"))
        return dict(checked, activation=activation,
                    approximate=approximate if activation == "geglu" else "tanh")

    def _string_fields(self, fields):
        if self.activation == "swiglu":  # (SiLU has no approximation)
            fields = dict(fields)
            del fields["approximate"]
        return fields

    def compile_options(self):
        """The matmul template (liger-compile's default)."""
        return dict(super().compile_options(), matmul_kernels=True)

    def module_text(self):
        """@fwd (x, W_gate, W_up) -> (gate, up, h), the kernel's results in
        its group's order (fwd_matmul_0); @bwd (dy, W_down, gate, up) ->
        (dgate, dup) (bwd_matmul_0)."""
        dt, h, i = self.dtype, self.hidden, self.intermediate
        X, I = "tensor<?x%dx%s>" % (h, dt), "tensor<?x%dx%s>" % (i, dt)
        W, D = "tensor<%dx%dx%s>" % (i, h, dt), "tensor<%dx%dx%s>" % (h, i, dt)
        op = self.activation
        attrs = " approximate = %s" % self.approximate if op == "geglu" else ""
        return f"""func.func @fwd(%x: {X}, %wg: {W}, %wu: {W}) -> ({I}, {I}, {I}) {{
  %g = liger.linear %x, %wg : {X}, {W}
  %u = liger.linear %x, %wu : {X}, {W}
  %h = liger.{op} %g, %u{attrs} : {I}
  return %g, %u, %h : {I}, {I}, {I}
}}
func.func @bwd(%dy: {X}, %wd: {D}, %g: {I}, %u: {I}) -> ({I}, {I}) {{
  %dh = liger.linear_grad_input %dy, %wd : {X}, {D}
  %dg, %du = liger.{op}_grad %dh, %g, %u{attrs} : {I}
  return %dg, %du : {I}, {I}
}}
"""



# --- q/k projections with RoPE (liger.ops.linear_rope) ----------------------

# The head sizes the RoPE epilogue takes, per target: (a multiple of, at
# most). A column tile holds whole heads (wgmma: at most 256 columns;
# mma.sync: 128, split over 4 warps of n8 tiles), each half of a head whole
# n8 blocks (liger-lower-to-gpu's checkBody holds the same rule).
ROPE_HEAD_DIMS = {"sm_90a": (16, 256), "sm_80": (32, 128), "sm_86": (32, 128)}

@dataclasses.dataclass(frozen=True)
class LinearRoPESpec(Spec):
    """The attention's q and k projections of x [?, ?, hidden] (batch,
    sequence) with RoPE: `rope(split(x · Wqᵀ + bq), split(x · Wkᵀ + bk),
    cos, sin)` with Wq [q_heads · head_dim, hidden], Wk [k_heads · head_dim,
    hidden], biases where `bias`, the head split [B, T, H · D] -> [B, H, T,
    D] and tables [1 (`broadcast_tables`) or B, T, head_dim], all of
    `dtype`: one kernel of the matmul template (liger-fuse-qkv-rope's group,
    RoPE in the epilogue; @fwd). The backward's RoPE gradient is
    RoPESpec's kernel; its GEMMs are the caller's."""

    op: ClassVar[str] = "linear_rope"
    hidden: int
    q_heads: int
    k_heads: int
    head_dim: int
    dtype: str
    bias: bool = False
    broadcast_tables: bool = True
    target: str = DEFAULT_TARGET

    def _checked(self):
        checked = _matmul_fields(self, self.op, "hidden", "head_dim")
        head_dim, rules = checked["head_dim"], _matmul_rules(checked["target"])
        multiple, widest = ROPE_HEAD_DIMS[rules]
        if head_dim % multiple or head_dim > widest:
            raise LigerValueError(
                "head_dim must be a multiple of %d of at most %d on %s (a column tile of the "
                "RoPE epilogue holds whole heads), got %d" % (multiple, widest, rules, head_dim))
        return dict(checked, q_heads=_size("q_heads", self.q_heads),
                    k_heads=_size("k_heads", self.k_heads), bias=check_bool("bias", self.bias),
                    broadcast_tables=check_bool("broadcast_tables", self.broadcast_tables))

    def compile_options(self):
        """The matmul template (liger-compile's default)."""
        return dict(super().compile_options(), matmul_kernels=True)

    def rope_spec(self):
        """The spec of the backward's RoPE gradient kernel (RoPESpec's @bwd)."""
        return RoPESpec(self.q_heads, self.k_heads, self.head_dim, self.dtype,
                        self.broadcast_tables, self.target)

    def module_text(self):
        """@fwd (x, Wq[, bq], Wk[, bk], cos, sin) -> (q, k), one kernel
        (fwd_matmul_0) taking its operands in that order (the group's)."""
        dt, h, d, hq, hk = self.dtype, self.hidden, self.head_dim, self.q_heads, self.k_heads
        X = "tensor<?x?x%dx%s>" % (h, dt)
        WQ, WK = "tensor<%dx%dx%s>" % (hq * d, h, dt), "tensor<%dx%dx%s>" % (hk * d, h, dt)
        BQ, BK = "tensor<%dx%s>" % (hq * d, dt), "tensor<%dx%s>" % (hk * d, dt)
        PQ, PK = "tensor<?x?x%dx%s>" % (hq * d, dt), "tensor<?x?x%dx%s>" % (hk * d, dt)
        SQ, SK = "tensor<?x?x%dx%dx%s>" % (hq, d, dt), "tensor<?x?x%dx%dx%s>" % (hk, d, dt)
        Q, K = "tensor<?x%dx?x%dx%s>" % (hq, d, dt), "tensor<?x%dx?x%dx%s>" % (hk, d, dt)
        C = "tensor<%sx?x%dx%s>" % ("1" if self.broadcast_tables else "?", d, dt)
        if self.bias:
            q_param, k_param = ", %%bq: %s" % BQ, ", %%bk: %s" % BK
            q_use, k_use, q_type, k_type = ", %bq", ", %bk", ", " + BQ, ", " + BK
        else:
            q_param, k_param, q_use, k_use, q_type, k_type = ("",) * 6
        return f"""func.func @fwd(%x: {X}, %wq: {WQ}{q_param}, %wk: {WK}{k_param}, %cos: {C}, %sin: {C}) -> ({Q}, {K}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : {X}
  %t = tensor.dim %x, %c1 : {X}
  %q = liger.linear %x, %wq{q_use} : {X}, {WQ}{q_type}
  %k = liger.linear %x, %wk{k_use} : {X}, {WK}{k_type}
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%b, %t, {hq}, {d}] : {PQ} into {SQ}
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%b, %t, {hk}, {d}] : {PK} into {SK}
  %qi = tensor.empty(%b, %t) : {Q}
  %ki = tensor.empty(%b, %t) : {K}
  %qh = linalg.transpose ins(%q4 : {SQ}) outs(%qi : {Q}) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : {SK}) outs(%ki : {K}) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cos, %sin : {Q}, {K}, {C}
  return %qr, %kr : {Q}, {K}
}}
"""

# --- attention (liger.ops.attention) ----------------------------------------

# The head dimensions the attention template takes: the forward's a
# multiple of 64 up to 256 (its tiles' 128-byte rows), the backward's 64 or
# 128 (it holds dk and dv of 64 key rows in registers).
ATTENTION_HEAD_DIMS = (64, 256)
ATTENTION_GRAD_HEAD_DIMS = (64, 128)


def attention_unsupported(target, dtype, head_dim, backward=False, queries=None, keys=None):
    """Why the attention template's kernels cannot run liger.attention of
    `dtype` ("bf16", "f16", "f32") heads of `head_dim` on `target` (with
    `backward`, its liger.attention_grad from the saved output and lse too;
    with `queries` and `keys`, a call's sequence lengths T and S), as a
    reason for a message, or None where they can. The reference lowering
    ("cpu") takes every configuration.

    The one place of this rule on the Python side: it mirrors
    attentionTemplateProblem (lib/Conversion/LigerToGPU/AttentionKernel.cpp),
    which liger-compile applies (a group it does not take is left
    uncompiled, warned); keep the two in step. The lengths are the
    launcher's rule: the kernels' heads parameters share one symbol, "seq"
    (bound once)."""
    if target == REFERENCE_TARGET:
        return None
    if target != "sm_90a":
        return "the attention template needs wgmma and TMA (sm_90a), the target is %s" % target
    if dtype not in ("bf16", "f16"):
        return "the attention template takes bf16 or f16 (wgmma's operands), got %s" % dtype
    step, widest = ATTENTION_HEAD_DIMS
    if head_dim % step or head_dim > widest:
        return "head dimension %d: the attention template takes multiples of %d up to %d " \
            "(its tiles' 128-byte rows)" % (head_dim, step, widest)
    if backward and head_dim not in ATTENTION_GRAD_HEAD_DIMS:
        return "head dimension %d with a backward: the attention template's backward takes " \
            "%s (it holds dk and dv of 64 key rows in registers)" % (
                head_dim, " or ".join(str(d) for d in ATTENTION_GRAD_HEAD_DIMS))
    if queries is not None and keys is not None and queries != keys:
        return "keys and queries of different lengths: the attention template's kernels " \
            "take one sequence length (their launcher binds it once)"
    return None


@dataclasses.dataclass(frozen=True)
class AttentionSpec(Spec):
    """liger.attention of q [?, q_heads, ?, head_dim] over k and v [?,
    kv_heads, ?, head_dim] (grouped-query heads: q_heads a multiple of
    kv_heads), all of `dtype`, `causal` (the mask aligned bottom-right) or
    not, at `scale` (0: the default, 1/sqrt(head_dim)), with a sliding
    `window` (causal only: each query sees the `window` keys up to its
    diagonal; 0: none), the scores capped at `softcap` (c · tanh(s / c),
    Gemma 2's attn_logit_softcapping; 0: none); the batch and the sequence
    lengths are dynamic. @fwd (q, k, v) -> (out, lse): the
    forward with its log-sum-exp; @bwd (dout, q, k, v, out, lse) -> (dq, dk,
    dv): liger.attention_grad from the saved output and lse. Each is one
    kernel of the attention template (fwd_attention_0, bwd_attention_0),
    its parameters the function's in order. On a GPU target the spec holds
    the template's rules for the forward (attention_unsupported), and the
    module has @bwd only where the template takes the backward too (head
    dimension 64 or 128); the reference lowering takes every
    configuration."""

    op: ClassVar[str] = "attention"
    q_heads: int
    kv_heads: int
    head_dim: int
    dtype: str
    causal: bool = False
    scale: float = 0.0
    window: int = 0
    softcap: float = 0.0
    target: str = DEFAULT_TARGET

    def _checked(self):
        checked = dict(_common(self), q_heads=_size("q_heads", self.q_heads),
                       kv_heads=_size("kv_heads", self.kv_heads),
                       head_dim=_size("head_dim", self.head_dim),
                       causal=check_bool("causal", self.causal),
                       scale=check_float("scale", self.scale, 0.0),
                       window=check_int("window", self.window, 0),
                       softcap=check_softcap(self.softcap))
        if checked["window"] and not checked["causal"]:
            raise LigerValueError("window=%d needs causal=True (a sliding window bounds the "
                                  "keys below each query's diagonal)" % checked["window"])
        if checked["q_heads"] % checked["kv_heads"]:
            raise LigerValueError("q_heads must be a multiple of kv_heads (each key/value head "
                                  "serves a group of query heads), got %d and %d"
                                  % (checked["q_heads"], checked["kv_heads"]))
        why = attention_unsupported(checked["target"], checked["dtype"], checked["head_dim"])
        if why:
            raise LigerValueError("no attention kernel on %s: %s; liger.ops.attention runs "
                                  "PyTorch's scaled_dot_product_attention there (with a "
                                  "softcap, its eager math)" % (checked["target"], why))
        return checked

    def _string_fields(self, fields):
        # (the default scale, no window and no softcap: not written)
        return {k: v for k, v in fields.items()
                if k not in ("scale", "window", "softcap") or v}

    def has_backward(self):
        """Whether the module has @bwd: the template takes the backward on
        the target (the reference lowering, always)."""
        return attention_unsupported(self.target, self.dtype, self.head_dim, True) is None

    def module_text(self):
        dt, d = self.dtype, self.head_dim
        Q = "tensor<?x%dx?x%dx%s>" % (self.q_heads, d, dt)
        K = "tensor<?x%dx?x%dx%s>" % (self.kv_heads, d, dt)
        L = "tensor<?x%dx?xf32>" % self.q_heads
        attrs = (" causal" if self.causal else "") + \
            (" window = %d" % self.window if self.window else "") + \
            (" softcap = %.9e" % self.softcap if self.softcap else "") + \
            (" scale = %.9e" % self.scale if self.scale else "")
        text = f"""func.func @fwd(%q: {Q}, %k: {K}, %v: {K}) -> ({Q}, {L}) {{
  %o, %lse = liger.attention %q, %k, %v{attrs} return_lse : {Q}, {K}, {K}
  return %o, %lse : {Q}, {L}
}}
"""
        if not self.has_backward():
            return text
        return text + f"""func.func @bwd(%do: {Q}, %q: {Q}, %k: {K}, %v: {K}, %o: {Q}, %lse: {L}) -> ({Q}, {K}, {K}) {{
  %dq, %dk, %dv = liger.attention_grad %do, %q, %k, %v saved(%o, %lse : {Q}, {L}){attrs} : {Q}, {Q}, {K}, {K}
  return %dq, %dk, %dv : {Q}, {K}, {K}
}}
"""


# --- divergences (liger.ops.kl_div, liger.ops.jsd) -------------------------
#
# Their kernels are row kernels: per token (or per element for a KL
# divergence with reduction "none"); the operators add the tokens up.

KL_REDUCTIONS = ("none", "sum", "mean", "batchmean")


@dataclasses.dataclass(frozen=True)
class KLDivSpec(Spec):
    """liger.kl_div's sums per token (`pointwise`: each element, for
    reduction "none") and their gradient: @fwd the loss, @bwd its gradient
    from the target and the incoming gradient, and (per token) @fwd_grad
    both in one row kernel reading each row once, for each token's share
    of the incoming gradient."""

    op: ClassVar[str] = "kl_div"
    vocab: int
    dtype: str
    log_target: bool = False
    eps: float = 1e-10
    pointwise: bool = False
    target: str = DEFAULT_TARGET

    def _checked(self):
        return dict(_common(self), vocab=_size("vocab", self.vocab),
                    log_target=check_bool("log_target", self.log_target),
                    eps=check_float("eps", self.eps, 0.0, lo_open=True),
                    pointwise=check_bool("pointwise", self.pointwise))

    def module_text(self):
        X = "tensor<?x%dx%s>" % (self.vocab, self.dtype)
        L = "tensor<?x%dxf32>" % self.vocab if self.pointwise else "tensor<?xf32>"
        form = "reduction = none" if self.pointwise else "reduction = sum"
        form += " log_target" if self.log_target else ""
        per_token = "" if self.pointwise else " per_token"
        loss = f"liger.kl_div %x, %t {form} eps = {self.eps:.9e}{per_token} : {X}"
        grad = f"liger.kl_div_grad %t, %g {form}{per_token} : {X}, {L}"
        text = f"""func.func @fwd(%x: {X}, %t: {X}) -> {L} {{
  %l = {loss}
  return %l : {L}
}}
func.func @bwd(%t: {X}, %g: {L}) -> {X} {{
  %d = {grad}
  return %d : {X}
}}
"""
        if self.pointwise:  # (each element's incoming gradient: @bwd's)
            return text
        return text + scale_function(X, "tensor<f32>") + f"""func.func @fwd_grad(%x: {X}, %t: {X}, %g: {L}) -> ({L}, {X}) {{
  %r, %d = liger.fusion rowwise(%x, %t, %g) : ({X}, {X}, {L}) -> ({L}, {X}) {{
  ^bb0(%a: {X}, %b: {X}, %c: {L}):
    %0 = {loss.replace("%x, %t", "%a, %b")}
    %1 = {grad.replace("%t, %g", "%b, %c")}
    liger.yield %0, %1 : {L}, {X}
  }}
  return %r, %d : {L}, {X}
}}
"""


@dataclasses.dataclass(frozen=True)
class JSDSpec(Spec):
    """liger.jsd's loss per token, with its gradient in the same kernel,
    with shift labels of `labels` ("i32" or "i64") or none ("none"). With a
    `temperature` (> 0) the rows are logits, taken to log_softmax(z / T) in
    the kernel, and the gradient is the student's logits' (the fused linear
    JSD's form); 0: the rows are log-probabilities."""

    op: ClassVar[str] = "jsd"
    vocab: int
    dtype: str
    beta: float = 0.5
    ignore_index: int = -100
    labels: str = "none"
    target: str = DEFAULT_TARGET
    temperature: float = 0.0

    def _checked(self):
        labels = check_choice("labels", self.labels, ("none",) + TARGET_DTYPES)
        return dict(_common(self), vocab=_size("vocab", self.vocab),
                    beta=check_float("beta", self.beta, 0.0, 1.0),
                    ignore_index=check_ignore_index(self.ignore_index, labels),
                    labels=labels,
                    temperature=check_float("temperature", self.temperature, 0.0))

    def _string_fields(self, fields):
        # (log-probabilities, temperature 0: not written)
        return {k: v for k, v in fields.items() if k != "temperature" or v}

    def module_text(self):
        """@fwd: the loss per token and its gradient for each token's share
        %g of the incoming gradient, one row kernel reading the row once
        (a rowwise group of the two ops); @loss: the loss alone, where no
        gradient is wanted."""
        X = "tensor<?x%dx%s>" % (self.vocab, self.dtype)
        G = "tensor<?xf32>"
        T = "tensor<?x%s>" % self.labels
        labelled = self.labels != "none"
        lparam = ", %%l: %s" % T if labelled else ""
        luse = " labels(%%e : %s)" % T if labelled else ""
        attrs = "beta = %.9e ignore_index = %d" % (self.beta, self.ignore_index) + \
            (" temperature = %.9e" % self.temperature if self.temperature else "") + " per_token"
        ins = "%x, %y, %g" + (", %l" if labelled else "")
        in_types = ", ".join([X, X, G] + ([T] if labelled else []))
        args = ", ".join(["%%a: %s" % X, "%%b: %s" % X, "%%c: %s" % G] +
                         (["%%e: %s" % T] if labelled else []))
        return f"""func.func @fwd(%x: {X}, %y: {X}, %g: {G}{lparam}) -> ({G}, {X}) {{
  %r, %d = liger.fusion rowwise({ins}) : ({in_types}) -> ({G}, {X}) {{
  ^bb0({args}):
    %0 = liger.jsd %a, %b{luse} {attrs} : {X}
    %1 = liger.jsd_grad %a, %b, %c{luse} {attrs} : {X}, {G}
    liger.yield %0, %1 : {G}, {X}
  }}
  return %r, %d : {G}, {X}
}}
func.func @loss(%x: {X}, %y: {X}{lparam}) -> {G} {{
  %r = liger.jsd %x, %y{luse.replace("%e", "%l")} {attrs} : {X}
  return %r : {G}
}}
""" + scale_function(X, "tensor<f32>")


SPECS = {cls.op: cls for cls in (RMSNormSpec, AddRMSNormSpec, LayerNormSpec, SwiGLUSpec,
                                 GeGLUSpec, SoftmaxSpec, RoPESpec, CrossEntropySpec,
                                 FusedLinearCrossEntropySpec, LoRALinearSpec, GatedMLPSpec,
                                 LinearRoPESpec, AttentionSpec, KLDivSpec, JSDSpec)}


def parse_spec(text, target=DEFAULT_TARGET):
    """The spec of `op:key=value,...` (as `str(spec)` writes it) for
    `target`: every field named once, every value validated."""
    op, _, rest = str(text).partition(":")
    cls = SPECS.get(op)
    if cls is None:
        raise LigerValueError("unknown op %r in spec %r (liger.ops has %s)" % (
            op, text, ", ".join(SPECS)))
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "target"}
    values = {}
    try:
        for item in filter(None, rest.split(",")):
            key, sep, value = item.partition("=")
            if not sep or key not in fields:
                raise ValueError("no field %r (%s has %s)" % (key, op, ", ".join(sorted(fields))))
            if key in values:
                raise ValueError("%s given twice" % key)
            values[key] = _parse_value(fields[key].type, value)
        missing = [n for n, f in fields.items() if n not in values
                   and f.default is dataclasses.MISSING]
        if missing:
            raise ValueError("missing %s" % ", ".join(sorted(missing)))
    except ValueError as e:
        raise LigerValueError("malformed op spec %r: %s" % (text, e)) from None
    return cls(target=target, **values)


def _parse_value(kind, text):
    if kind in (int, "int"):
        return int(text)
    if kind in (float, "float"):
        return float(text)
    if kind in (bool, "bool"):
        if text not in ("0", "1"):
            raise ValueError("expected 0 or 1, got %r" % text)
        return text == "1"
    return text


def as_spec(spec, target=DEFAULT_TARGET):
    """A Spec as it is, or the spec of the text `spec` for `target`."""
    return spec if isinstance(spec, Spec) else parse_spec(spec, target)


# --- builders: what a call computes and what `precompile` takes ------------

def rms_norm_spec(hidden, dtype, weight_dtype=None, eps=1e-6, offset=0.0, casting="llama",
                  target=DEFAULT_TARGET):
    return RMSNormSpec(hidden, dtype_name(dtype), dtype_name(weight_dtype or dtype,
                                                             "weight_dtype"),
                       eps, offset, casting, target)


def add_rms_norm_spec(hidden, dtype, weight_dtype=None, eps=1e-6, offset=0.0, casting="llama",
                      target=DEFAULT_TARGET):
    return AddRMSNormSpec(hidden, dtype_name(dtype), dtype_name(weight_dtype or dtype,
                                                                "weight_dtype"),
                          eps, offset, casting, target)


def layer_norm_spec(hidden, dtype, weight_dtype=None, eps=1e-5, bias=True,
                    target=DEFAULT_TARGET):
    return LayerNormSpec(hidden, dtype_name(dtype), dtype_name(weight_dtype or dtype,
                                                               "weight_dtype"),
                         eps, bias, target)


def swiglu_spec(hidden, dtype, target=DEFAULT_TARGET):
    return SwiGLUSpec(hidden, dtype_name(dtype), target)


def geglu_spec(hidden, dtype, approximate="tanh", target=DEFAULT_TARGET):
    return GeGLUSpec(hidden, dtype_name(dtype), target, approximate)


def softmax_spec(hidden, dtype, target=DEFAULT_TARGET):
    return SoftmaxSpec(hidden, dtype_name(dtype), target)


def rope_spec(q_heads, k_heads, head_dim, dtype, broadcast_tables=True, target=DEFAULT_TARGET):
    return RoPESpec(q_heads, k_heads, head_dim, dtype_name(dtype), broadcast_tables, target)


def cross_entropy_spec(vocab, dtype, target_dtype="i64", ignore_index=-100,
                       label_smoothing=0.0, reduction="mean", softcap=None,
                       lse_square_scale=0.0, weighted=False, return_z_loss=False,
                       target=DEFAULT_TARGET):
    return CrossEntropySpec(vocab, dtype_name(dtype), dtype_name(target_dtype, "target_dtype",
                                                                 TARGET_DTYPES),
                            ignore_index, label_smoothing, reduction, softcap,
                            lse_square_scale, weighted, target, return_z_loss)


def fused_linear_cross_entropy_spec(vocab, hidden, dtype, target_dtype="i64", ignore_index=-100,
                                    label_smoothing=0.0, reduction="mean", softcap=None,
                                    lse_square_scale=0.0, weighted=False, dw_f32=False,
                                    bias=False, return_z_loss=False, target=DEFAULT_TARGET):
    return FusedLinearCrossEntropySpec(
        vocab, dtype_name(dtype), dtype_name(target_dtype, "target_dtype", TARGET_DTYPES),
        ignore_index, label_smoothing, reduction, softcap, lse_square_scale, weighted, target,
        return_z_loss, hidden, dw_f32, bias)


def module_text(spec):
    """The liger module of a spec (or of its `op:key=value,...` text)."""
    return as_spec(spec).module_text()


def kl_div_spec(vocab, dtype, log_target=False, eps=1e-10, pointwise=False,
                target=DEFAULT_TARGET):
    return KLDivSpec(vocab, dtype_name(dtype), log_target, eps, pointwise, target)


def check_temperature(temperature):
    """A distillation temperature: a finite number above 0 (the logits are
    divided by it; a negative one would reverse their order)."""
    temperature = check_float("temperature", temperature)
    if temperature <= 0:
        raise LigerValueError("temperature must be > 0 (the logits are divided by it), got %r"
                              % temperature)
    return temperature


def jsd_spec(vocab, dtype, beta=0.5, ignore_index=-100, labels=None, temperature=None,
             target=DEFAULT_TARGET):
    """`labels`: the shift labels' dtype (torch or "i32"/"i64"), None for
    none. `temperature`: None for rows of log-probabilities, T > 0 for rows
    of logits (log_softmax(z / T) in the kernel, the gradient the logits')."""
    return JSDSpec(vocab, dtype_name(dtype), beta, ignore_index,
                   "none" if labels is None else dtype_name(labels, "shift_labels' dtype",
                                                            TARGET_DTYPES), target,
                   0.0 if temperature is None else check_temperature(temperature))


def lora_linear_spec(in_features, out_features, rank, dtype, scale=1.0, bias=False,
                     target=DEFAULT_TARGET):
    """A LoRA projection [out_features, in_features] of `rank` (PEFT's
    scale: lora_alpha / rank), with a bias or not."""
    return LoRALinearSpec(in_features, out_features, rank, dtype_name(dtype), scale, bias,
                          target)


def gated_mlp_spec(hidden, intermediate, dtype, activation="swiglu", approximate="tanh",
                   target=DEFAULT_TARGET):
    """A gated MLP of `hidden` features and `intermediate` gated ones:
    `activation` "swiglu" or "geglu" (GELU's `approximate`, "tanh" or
    "none")."""
    return GatedMLPSpec(hidden, intermediate, dtype_name(dtype), activation, approximate,
                        target)


def linear_rope_spec(hidden, q_heads, k_heads, head_dim, dtype, bias=False,
                     broadcast_tables=True, target=DEFAULT_TARGET):
    """The q/k projections of `hidden` features into `q_heads` and `k_heads`
    heads of `head_dim` with RoPE, with biases or not, tables [1, T, D]
    (`broadcast_tables`) or [B, T, D]."""
    return LinearRoPESpec(hidden, q_heads, k_heads, head_dim, dtype_name(dtype), bias,
                          broadcast_tables, target)


def attention_spec(q_heads, kv_heads, head_dim, dtype, causal=False, scale=None, window=None,
                   softcap=None, target=DEFAULT_TARGET):
    """Attention of `q_heads` query heads over `kv_heads` key/value heads of
    `head_dim`, causal (bottom-right aligned) or not, at `scale` (None or 0:
    1/sqrt(head_dim)), with a sliding `window` (causal; None or 0: none),
    the scores capped at `softcap` (None or 0: none)."""
    return AttentionSpec(q_heads, kv_heads, head_dim, dtype_name(dtype), causal,
                         0.0 if scale is None else scale, window or 0,
                         0.0 if softcap is None else softcap, target=target)
