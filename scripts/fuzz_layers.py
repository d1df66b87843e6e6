#!/usr/bin/env python3
"""Generated seeds for the fuzzer: every liger op, forward and gradient, at
odd sizes.

Each seed is one small module: one function holding one op of the dialect
(every forward op and every gradient op, the optional operands and results
spelled), at a hidden size (row length) of 7, 1000 or 50257, with the token
dimensions dynamic (bf16) or static (f32), and a few rowwise ops over a row
of 2^20; and per size one decoder layer
(norm, q/k/v projections, head split, RoPE, attention, output projection,
add + norm, gated MLP, residual, lm_head and loss, and the backward ops of
the norm, the MLP and the loss). The seeds are valid: the fuzzer checks that
liger-opt accepts every one before it mutates them.

    python3 scripts/fuzz_layers.py DIR     # writes DIR/<name>.mlir
"""
import os
import sys

HIDDEN_SIZES = (7, 1000, 50257)
# A long row, for the rowwise ops whose kernels unroll their row.
LONG_ROW = 1 << 20
LONG_ROW_OPS = ("silu", "softmax")
# Token dimensions: dynamic sizes with bf16, static sizes with f32.
TOKEN_MODES = (("dyn", "?", "?", "bf16"), ("static", "3", "5", "f32"))
LORA_RANK = 4
LOSS_HIDDEN = 64  # the lm_head's input features (the vocabulary is the size)


def t(dims, dtype):
    """tensor<dims x dtype>."""
    return "tensor<%s>" % "x".join([str(d) for d in dims] + [dtype])


class Case:
    """One function: typed arguments, a body that names the results."""

    def __init__(self, name):
        self.name = name
        self.args = []
        self.body = []
        self.results = []

    def arg(self, name, type_):
        self.args.append("%%%s: %s" % (name, type_))
        return "%" + name

    def line(self, text):
        self.body.append("  " + text)

    def ret(self, value, type_):
        self.results.append((value, type_))

    def text(self):
        values = ", ".join(v for v, _ in self.results)
        types = ", ".join(ty for _, ty in self.results)
        return "func.func @%s(%s) -> (%s) {\n%s\n  return %s : %s\n}\n" % (
            self.name, ", ".join(self.args), types, "\n".join(self.body),
            values, types)


def op_cases(h, tok, batch, dt):
    """One Case per op at row length `h`: (op name, Case)."""
    rows = [tok]                     # [T, H] activations
    x_t, w_t = t(rows + [h], dt), t([h], dt)
    stat_t = t(rows, "f32")          # per-row statistics (rstd)
    d = h + (h % 2)                  # a head size: RoPE needs it even
    seq = tok
    heads_q, heads_kv = 2, 1
    q_t = t([batch, heads_q, seq, d], dt)
    k_t = t([batch, heads_kv, seq, d], dt)
    table_t = t([1, seq, d], dt)
    idx_t = t(rows, "i64")
    cases = []

    def case(op):
        c = Case(op)
        cases.append((op, c))
        return c

    c = case("rms_norm")
    x, w = c.arg("x", x_t), c.arg("w", w_t)
    c.line("%%y, %%r = liger.rms_norm %s, %s eps = 1.0e-5 offset = 1.0 casting = gemma rstd : %s, %s" % (x, w, x_t, w_t))
    c.ret("%y", x_t), c.ret("%r", stat_t)

    c = case("add_rms_norm")
    x, r, w = c.arg("x", x_t), c.arg("res", x_t), c.arg("w", w_t)
    c.line("%%y, %%s, %%r = liger.add_rms_norm %s, %s, %s eps = 1.0e-5 rstd : %s, %s" % (x, r, w, x_t, w_t))
    c.ret("%y", x_t), c.ret("%s", x_t), c.ret("%r", stat_t)

    c = case("layer_norm")
    x, w, b = c.arg("x", x_t), c.arg("w", w_t), c.arg("b", w_t)
    c.line("%%y, %%m, %%r = liger.layer_norm %s, %s, %s eps = 1.0e-5 stats : %s, %s, %s" % (x, w, b, x_t, w_t, w_t))
    c.ret("%y", x_t), c.ret("%m", stat_t), c.ret("%r", stat_t)

    for op in ("rope", "rope_grad"):
        c = case(op)
        q, k = c.arg("q", q_t), c.arg("k", k_t)
        cos, sin = c.arg("cos", table_t), c.arg("sin", table_t)
        c.line("%%qr, %%kr = liger.%s %s, %s, %s, %s : %s, %s, %s" % (op, q, k, cos, sin, q_t, k_t, table_t))
        c.ret("%qr", q_t), c.ret("%kr", k_t)

    out = h
    c = case("linear")
    x, w, b = c.arg("x", x_t), c.arg("w", t([out, h], dt)), c.arg("b", t([out], dt))
    c.line("%%y = liger.linear %s, %s, %s : %s, %s, %s" % (x, w, b, x_t, t([out, h], dt), t([out], dt)))
    c.ret("%y", t(rows + [out], dt))

    c = case("lora_linear")
    x, w = c.arg("x", x_t), c.arg("w", t([out, h], dt))
    a, b = c.arg("a", t([LORA_RANK, h], dt)), c.arg("b", t([out, LORA_RANK], dt))
    c.line("%%y = liger.lora_linear %s, %s, %s, %s scale = 2.0 : %s, %s, %s, %s" % (
        x, w, a, b, x_t, t([out, h], dt), t([LORA_RANK, h], dt), t([out, LORA_RANK], dt)))
    c.ret("%y", t(rows + [out], dt))

    for op, attrs in (("silu", ""), ("gelu", " approximate = tanh"), ("softmax", "")):
        c = case(op)
        x = c.arg("x", x_t)
        c.line("%%y = liger.%s %s%s : %s" % (op, x, attrs, x_t))
        c.ret("%y", x_t)

    for op, attrs in (("swiglu", ""), ("geglu", " approximate = tanh"), ("add", ""), ("mul", "")):
        c = case(op)
        a, b = c.arg("a", x_t), c.arg("b", x_t)
        c.line("%%y = liger.%s %s, %s%s : %s" % (op, a, b, attrs, x_t))
        c.ret("%y", x_t)

    vocab_t = t([h], "f32")
    c = case("cross_entropy")
    lg, tg, cw = c.arg("logits", x_t), c.arg("target", idx_t), c.arg("cw", vocab_t)
    c.line("%%l = liger.cross_entropy %s, %s label_smoothing = 0.1 softcap = 30.0 : %s, %s" % (lg, tg, x_t, idx_t))
    c.line("%%n, %%z = liger.cross_entropy %s, %s weight(%s : %s) ignore_index = -1 reduction = none lse_square_scale = 1.0e-4 z_loss : %s, %s" % (
        lg, tg, cw, vocab_t, x_t, idx_t))
    c.ret("%l", t([], "f32")), c.ret("%n", stat_t), c.ret("%z", stat_t)

    c = case("cross_entropy_grad")
    lg, tg, g = c.arg("logits", x_t), c.arg("target", idx_t), c.arg("g", t([], "f32"))
    c.line("%%d = liger.cross_entropy_grad %s, %s, %s label_smoothing = 0.1 : %s, %s, %s" % (lg, tg, g, x_t, idx_t, t([], "f32")))
    c.ret("%d", x_t)

    hid_t, lm_t = t(rows + [LOSS_HIDDEN], dt), t([h, LOSS_HIDDEN], dt)
    c = case("fused_linear_cross_entropy")
    hh, w, tg, b = c.arg("h", hid_t), c.arg("w", lm_t), c.arg("target", idx_t), c.arg("b", t([h], dt))
    c.line("%%l = liger.fused_linear_cross_entropy %s, %s, %s bias(%s : %s) reduction = sum : %s, %s, %s" % (
        hh, w, tg, b, t([h], dt), hid_t, lm_t, idx_t))
    c.ret("%l", t([], "f32"))

    c = case("fused_linear_cross_entropy_grad")
    hh, w, tg, g = c.arg("h", hid_t), c.arg("w", lm_t), c.arg("target", idx_t), c.arg("g", t([], "f32"))
    c.line("%%dh, %%dw = liger.fused_linear_cross_entropy_grad %s, %s, %s, %s : %s, %s, %s, %s" % (
        hh, w, tg, g, hid_t, lm_t, idx_t, t([], "f32")))
    c.ret("%dh", hid_t), c.ret("%dw", lm_t)

    c = case("kl_div")
    p, q = c.arg("p", x_t), c.arg("q", x_t)
    c.line("%%l = liger.kl_div %s, %s log_target : %s" % (p, q, x_t))
    c.ret("%l", t([], "f32"))

    c = case("jsd")
    p, q, lab = c.arg("p", x_t), c.arg("q", x_t), c.arg("labels", idx_t)
    c.line("%%l = liger.jsd %s, %s labels(%s : %s) beta = 0.5 : %s" % (p, q, lab, idx_t, x_t))
    c.ret("%l", t([], "f32"))

    lse_t = t([batch, heads_q, seq], "f32")
    c = case("attention")
    q, k, v = c.arg("q", q_t), c.arg("k", k_t), c.arg("v", k_t)
    c.line("%%o = liger.attention %s, %s, %s causal : %s, %s, %s" % (q, k, v, q_t, k_t, k_t))
    c.line("%%p, %%lse = liger.attention %s, %s, %s causal window = 3 softcap = 2.0 scale = 0.5 return_lse : %s, %s, %s" % (q, k, v, q_t, k_t, k_t))
    c.ret("%o", q_t), c.ret("%p", q_t), c.ret("%lse", lse_t)

    c = case("attention_grad")
    do, q, k, v = c.arg("do", q_t), c.arg("q", q_t), c.arg("k", k_t), c.arg("v", k_t)
    o, lse = c.arg("o", q_t), c.arg("lse", lse_t)
    c.line("%%dq, %%dk, %%dv = liger.attention_grad %s, %s, %s, %s causal : %s, %s, %s, %s" % (
        do, q, k, v, q_t, q_t, k_t, k_t))
    c.line("%%sq, %%sk, %%sv = liger.attention_grad %s, %s, %s, %s saved(%s, %s : %s, %s) causal window = 3 softcap = 2.0 scale = 0.5 : %s, %s, %s, %s" % (
        do, q, k, v, o, lse, q_t, lse_t, q_t, q_t, k_t, k_t))
    c.ret("%dq", q_t), c.ret("%dk", k_t), c.ret("%dv", k_t)
    c.ret("%sq", q_t), c.ret("%sk", k_t), c.ret("%sv", k_t)

    c = case("rms_norm_grad")
    dy, x, w, r = c.arg("dy", x_t), c.arg("x", x_t), c.arg("w", w_t), c.arg("rstd", stat_t)
    c.line("%%dx, %%dw = liger.rms_norm_grad %s, %s, %s, %s casting = gemma : %s, %s, %s" % (dy, x, w, r, x_t, w_t, stat_t))
    c.ret("%dx", x_t), c.ret("%dw", w_t)

    c = case("layer_norm_grad")
    dy, x, w = c.arg("dy", x_t), c.arg("x", x_t), c.arg("w", w_t)
    m, r = c.arg("mean", stat_t), c.arg("rstd", stat_t)
    c.line("%%dx, %%dw, %%db = liger.layer_norm_grad %s, %s, %s, %s, %s : %s, %s, %s" % (dy, x, w, m, r, x_t, w_t, stat_t))
    c.ret("%dx", x_t), c.ret("%dw", w_t), c.ret("%db", w_t)

    for op, attrs in (("swiglu_grad", ""), ("geglu_grad", " approximate = tanh")):
        c = case(op)
        dh, g, u = c.arg("dh", x_t), c.arg("g", x_t), c.arg("u", x_t)
        c.line("%%dg, %%du = liger.%s %s, %s, %s%s : %s" % (op, dh, g, u, attrs, x_t))
        c.ret("%dg", x_t), c.ret("%du", x_t)

    c = case("softmax_grad")
    dy, y = c.arg("dy", x_t), c.arg("y", x_t)
    c.line("%%dx = liger.softmax_grad %s, %s : %s" % (dy, y, x_t))
    c.ret("%dx", x_t)

    c = case("linear_grad_input")
    dy, w = c.arg("dy", x_t), c.arg("w", t([h, LOSS_HIDDEN], dt))
    c.line("%%dx = liger.linear_grad_input %s, %s : %s, %s" % (dy, w, x_t, t([h, LOSS_HIDDEN], dt)))
    c.ret("%dx", t(rows + [LOSS_HIDDEN], dt))

    c = case("linear_grad_weight")
    dy, x, acc = c.arg("dy", x_t), c.arg("x", hid_t), c.arg("acc", t([h, LOSS_HIDDEN], "f32"))
    c.line("%%dw = liger.linear_grad_weight %s, %s : %s, %s" % (dy, x, x_t, hid_t))
    c.line("%%da = liger.linear_grad_weight %s, %s accumulate %s : %s, %s, %s" % (dy, x, acc, x_t, hid_t, t([h, LOSS_HIDDEN], "f32")))
    c.ret("%dw", t([h, LOSS_HIDDEN], dt)), c.ret("%da", t([h, LOSS_HIDDEN], "f32"))
    return cases


def layer_case(h, batch, seq, dt):
    """A decoder layer at hidden size `h` (two q heads, one kv head), its
    lm_head loss, and the backward ops of its norm, MLP and loss."""
    d = 8 if h < 64 else 64
    nq, nkv, inter = 2, 1, 2 * h + 1
    c = Case("decoder_layer")
    act = [batch, seq]
    x = c.arg("x", t(act + [h], dt))
    cos, sin = c.arg("cos", t([1, seq, d], dt)), c.arg("sin", t([1, seq, d], dt))
    w_in, w_post = c.arg("w_in", t([h], dt)), c.arg("w_post", t([h], dt))
    wq, wk = c.arg("wq", t([nq * d, h], dt)), c.arg("wk", t([nkv * d, h], dt))
    wv, wo = c.arg("wv", t([nkv * d, h], dt)), c.arg("wo", t([h, nq * d], dt))
    wg, wu = c.arg("wg", t([inter, h], dt)), c.arg("wu", t([inter, h], dt))
    wd, lm = c.arg("wd", t([h, inter], dt)), c.arg("lm", t([h, h], dt))
    rows = "?" if "?" in (batch, seq) else str(int(batch) * int(seq))
    tg, dl = c.arg("target", t([rows], "i64")), c.arg("dl", t([], "f32"))
    xt = t(act + [h], dt)

    def dims(last):
        return t(act + [last], dt)

    dynamic = "?" in (batch, seq)
    sizes = "(%b, %t)" if dynamic else "()"
    shape_bt = "%b, %t" if dynamic else "%s, %s" % (batch, seq)

    c.line("%c0 = arith.constant 0 : index")
    c.line("%c1 = arith.constant 1 : index")
    c.line("%%b = tensor.dim %s, %%c0 : %s" % (x, xt))
    c.line("%%t = tensor.dim %s, %%c1 : %s" % (x, xt))
    c.line("%%n1, %%r1 = liger.rms_norm %s, %s eps = 1.0e-5 rstd : %s, %s" % (x, w_in, xt, t([h], dt)))
    for name, w, n in (("q", wq, nq), ("k", wk, nkv), ("v", wv, nkv)):
        c.line("%%%s = liger.linear %%n1, %s : %s, %s" % (name, w, xt, t([n * d, h], dt)))
        c.line("%%%s4 = tensor.expand_shape %%%s [[0], [1], [2, 3]] output_shape [%s, %d, %d] : %s into %s" % (
            name, name, shape_bt, n, d, dims(n * d), t(act + [n, d], dt)))
        c.line("%%%s_init = tensor.empty%s : %s" % (name, sizes, t([batch, n, seq, d], dt)))
        c.line("%%%sh = linalg.transpose ins(%%%s4 : %s) outs(%%%s_init : %s) permutation = [0, 2, 1, 3]" % (
            name, name, t(act + [n, d], dt), name, t([batch, n, seq, d], dt)))
    qh_t, kh_t = t([batch, nq, seq, d], dt), t([batch, nkv, seq, d], dt)
    c.line("%%qr, %%kr = liger.rope %%qh, %%kh, %s, %s : %s, %s, %s" % (cos, sin, qh_t, kh_t, t([1, seq, d], dt)))
    c.line("%%attn = liger.attention %%qr, %%kr, %%vh causal : %s, %s, %s" % (qh_t, kh_t, kh_t))
    c.line("%%o_init = tensor.empty%s : %s" % (sizes, t(act + [nq, d], dt)))
    c.line("%%o4 = linalg.transpose ins(%%attn : %s) outs(%%o_init : %s) permutation = [0, 2, 1, 3]" % (
        qh_t, t(act + [nq, d], dt)))
    c.line("%%o = tensor.collapse_shape %%o4 [[0], [1], [2, 3]] : %s into %s" % (t(act + [nq, d], dt), dims(nq * d)))
    c.line("%%ao = liger.linear %%o, %s : %s, %s" % (wo, dims(nq * d), t([h, nq * d], dt)))
    c.line("%%n2, %%h = liger.add_rms_norm %%ao, %s, %s eps = 1.0e-5 : %s, %s" % (x, w_post, xt, t([h], dt)))
    c.line("%%gate = liger.linear %%n2, %s : %s, %s" % (wg, xt, t([inter, h], dt)))
    c.line("%%up = liger.linear %%n2, %s : %s, %s" % (wu, xt, t([inter, h], dt)))
    c.line("%%act = liger.swiglu %%gate, %%up : %s" % dims(inter))
    c.line("%%down = liger.linear %%act, %s : %s, %s" % (wd, dims(inter), t([h, inter], dt)))
    c.line("%%out = liger.add %%down, %%h : %s" % xt)
    # The loss and the backward ops on [tokens, hidden] rows.
    rt = t([rows, h], dt)
    c.line("%%flat = tensor.collapse_shape %%out [[0, 1], [2]] : %s into %s" % (xt, rt))
    c.line("%%xf = tensor.collapse_shape %s [[0, 1], [2]] : %s into %s" % (x, xt, rt))
    c.line("%%rf = tensor.collapse_shape %%r1 [[0, 1]] : %s into %s" % (t(act, "f32"), t([rows], "f32")))
    c.line("%%logits = liger.linear %%flat, %s : %s, %s" % (lm, rt, t([h, h], dt)))
    c.line("%%loss = liger.cross_entropy %%logits, %s : %s, %s" % (tg, rt, t([rows], "i64")))
    c.line("%%dlogits = liger.cross_entropy_grad %%logits, %s, %s : %s, %s, %s" % (tg, dl, rt, t([rows], "i64"), t([], "f32")))
    c.line("%%dact = liger.linear_grad_input %%dlogits, %s : %s, %s" % (lm, rt, t([h, h], dt)))
    c.line("%%dg, %%du = liger.swiglu_grad %%dact, %%dact, %%dact : %s" % rt)
    c.line("%%dx, %%dw = liger.rms_norm_grad %%dg, %%xf, %s, %%rf : %s, %s, %s" % (w_in, rt, t([h], dt), t([rows], "f32")))
    c.ret("%out", xt), c.ret("%loss", t([], "f32")), c.ret("%dx", rt), c.ret("%dw", t([h], dt)), c.ret("%du", rt)
    return c


def corpus():
    """[(name, module text)] of every generated seed, in a fixed order."""
    seeds = []
    for h in HIDDEN_SIZES:
        for mode, tok, static_batch, dt in TOKEN_MODES:
            batch = tok if tok == "?" else "2"
            for op, case in op_cases(h, tok, batch, dt):
                seeds.append(("%s-h%d-%s" % (op, h, mode), case.text()))
            seq = tok if tok == "?" else static_batch
            layer = layer_case(h, batch, seq, dt)
            seeds.append(("decoder_layer-h%d-%s" % (h, mode), layer.text()))
    for op, case in op_cases(LONG_ROW, "?", "?", "bf16"):
        if op in LONG_ROW_OPS:
            seeds.append(("%s-h%d-dyn" % (op, LONG_ROW), case.text()))
    return seeds


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, text in corpus():
        with open(os.path.join(sys.argv[1], name + ".mlir"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
