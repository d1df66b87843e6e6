"""Questions about aten FX graphs that recognition and the importer both ask.

The frontend reads graphs of aten ops, with each node's value described by
`node.meta["val"]` (a fake tensor: shape, dtype), as torch.export's training
IR and make_fx give them. Nodes that do not change a value (a cast to the
dtype it already has, a full slice, `contiguous`, a dropout of probability
0, a reshape to the same shape, a concatenation with empty tensors) are
*identities*: both look through them, so the same model gives the same
records in f32 (where HF's `.to(torch.float32)` is a no-op) and in bf16.
"""

from typing import Any, Iterable, List, Optional, Sequence, Tuple

import sympy
import torch

aten = torch.ops.aten

# Casts: (op, how to read its target dtype).
_CASTS = {aten.to.dtype, aten.to.dtype_layout, aten._to_copy.default, aten.type_as.default,
          aten.to.device, aten.to.other}
_PRIMS_CONVERT = getattr(torch.ops.prims, "convert_element_type", None)
# Nodes with no output that only assert things about their input.
ASSERTS = {aten._assert_tensor_metadata.default, aten.sym_constrain_range_for_size.default}
_COPIES = {aten.contiguous.default, aten.clone.default, aten.alias.default,
           aten.detach.default, aten.lift_fresh_copy.default}
_RESHAPES = {aten.view.default, aten.reshape.default, aten._unsafe_view.default}

DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16",
          torch.int64: "i64", torch.int32: "i32", torch.bool: "i1"}
FLOATS = (torch.float32, torch.bfloat16, torch.float16)
INT_MAX = 2 ** 63 - 1


def val(node) -> Any:
    """The fake tensor (or number) a node computes, or None."""
    return node.meta.get("val") if hasattr(node, "meta") else None


def is_tensor(node) -> bool:
    return isinstance(val(node), torch.Tensor)


def dtype(node) -> Optional[torch.dtype]:
    v = val(node)
    return v.dtype if isinstance(v, torch.Tensor) else None


def shape(node) -> Tuple[Any, ...]:
    return tuple(val(node).shape)


def rank(node) -> int:
    return len(val(node).shape)


def is_op(node, *targets) -> bool:
    return getattr(node, "op", None) == "call_function" and node.target in targets


def where(node) -> str:
    """Where a node comes from: its module path (e.g. `model.layers.0.mlp`), else its name."""
    stack = node.meta.get("nn_module_stack") if hasattr(node, "meta") else None
    if stack:
        path = list(stack.values())[-1][0]
        path = path.replace("L['self'].", "").replace("L__self__", "")
        if path:
            return path.lstrip(".")
    return node.name


def arg(node, index: int, name: str, default=None):
    """Argument `index` (or keyword `name`) of a call node."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def same_dim(a, b) -> bool:
    """Two sizes are equal: ints, or symbolic sizes with the same expression."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return sympy.simplify(size_expr(a) - size_expr(b)) == 0


def size_expr(size):
    """A size as a sympy expression (a symbol for a traced dynamic size)."""
    if isinstance(size, torch.SymInt):
        return size.node.expr
    return sympy.Integer(int(size))


def is_static(size) -> bool:
    return isinstance(size, int)


def same_shape(a, b) -> bool:
    sa, sb = shape(a), shape(b)
    return len(sa) == len(sb) and all(same_dim(x, y) for x, y in zip(sa, sb))


def cast_of(node) -> Optional[Tuple[Any, torch.dtype, torch.dtype]]:
    """(source, from dtype, to dtype) when `node` is a dtype cast, else None."""
    if not (is_op(node, *_CASTS) or (_PRIMS_CONVERT is not None and is_op(node, _PRIMS_CONVERT))):
        return None
    source = node.args[0]
    if not (is_tensor(source) and is_tensor(node)):
        return None
    if val(node).device != val(source).device:
        return None
    return source, dtype(source), dtype(node)


def is_full_slice(node) -> bool:
    if not is_op(node, aten.slice.Tensor):
        return False
    src = node.args[0]
    dim = arg(node, 1, "dim", 0)
    start = arg(node, 2, "start", None)
    end = arg(node, 3, "end", None)
    step = arg(node, 4, "step", 1)
    size = shape(src)[dim]
    if step != 1 or start not in (None, 0):
        return False
    if end is None or (isinstance(end, int) and end >= INT_MAX):
        return True
    return same_dim(end, size) if isinstance(end, (int, torch.SymInt)) else False


def identity_source(node) -> Optional[Any]:
    """The node whose value `node` repeats unchanged, or None."""
    if not is_op(node, *(_CASTS | _COPIES | _RESHAPES | {aten.slice.Tensor, aten.cat.default,
                                                       aten.dropout.default, aten.expand.default})) \
            and not (_PRIMS_CONVERT is not None and is_op(node, _PRIMS_CONVERT)):
        return None
    if not is_tensor(node):
        return None
    cast = cast_of(node)
    if cast is not None:
        source, before, after = cast
        return source if before == after else None
    if is_op(node, *_COPIES):
        return node.args[0]
    if is_op(node, aten.dropout.default):
        p, train = arg(node, 1, "p"), arg(node, 2, "train")
        return node.args[0] if (p == 0 or train is False) else None
    if is_op(node, *_RESHAPES, aten.expand.default):
        source = node.args[0]
        return source if same_shape(source, node) else None
    if is_op(node, aten.slice.Tensor):
        return node.args[0] if is_full_slice(node) else None
    if is_op(node, aten.cat.default):
        inputs = node.args[0]
        dim = arg(node, 1, "dim", 0)
        kept = [t for t in inputs if not (is_static(shape(t)[dim]) and shape(t)[dim] == 0)]
        return kept[0] if len(kept) == 1 and same_shape(kept[0], node) else None
    return None


def strip(node) -> Any:
    """`node` with the identities in front of it removed."""
    while True:
        source = identity_source(node) if hasattr(node, "op") else None
        if source is None:
            return node
        node = source


def users(node) -> List[Any]:
    """The readers of a node's value, looking through identities (and assertions)."""
    out: List[Any] = []
    for user in node.users:
        if is_op(user, *ASSERTS):
            continue
        if identity_source(user) is node:
            out.extend(users(user))
        else:
            out.append(user)
    return out


def identity_chain(node) -> List[Any]:
    """The identities that repeat `node` (transitively)."""
    out: List[Any] = []
    for user in node.users:
        if is_op(user, *ASSERTS):
            out.append(user)
        elif identity_source(user) is node:
            out.append(user)
            out.extend(identity_chain(user))
    return out


def single_user(node) -> Optional[Any]:
    readers = users(node)
    return readers[0] if len(readers) == 1 else None


def scalar(value) -> Optional[float]:
    """A Python number argument (not a tensor), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def binary(node, *targets) -> Optional[Tuple[Any, Any]]:
    """The two operands of an add/mul/... call (alpha 1), else None."""
    if not is_op(node, *targets):
        return None
    if node.kwargs.get("alpha", 1) != 1 or (len(node.args) > 2 and node.args[2] != 1):
        return None
    return node.args[0], node.args[1]


def other(pair: Sequence[Any], one) -> Any:
    return pair[1] if pair[0] is one else pair[0]


def mlir_type(node) -> str:
    """`tensor<?x?x64xbf16>`: symbolic sizes print as `?`."""
    v = val(node)
    return tensor_type(v.shape, v.dtype)


def tensor_type(sizes: Iterable[Any], element: torch.dtype) -> str:
    dims = ["%d" % s if is_static(s) else "?" for s in sizes]
    return "tensor<%s>" % "x".join(dims + [DTYPES[element]])


def produced_within(node, ancestor, depth: int) -> bool:
    """`node` is computed from `ancestor` within `depth` steps."""
    if node is ancestor:
        return True
    if depth == 0 or getattr(node, "op", None) != "call_function":
        return False
    for a in node.all_input_nodes:
        if produced_within(a, ancestor, depth - 1):
            return True
    return False
