"""Questions about aten FX graphs that recognition and the importer both ask.

The frontend reads graphs of aten ops, with each node's value described by
`node.meta["val"]` (a fake tensor: shape, dtype), as torch.export's training
IR and make_fx give them. Nodes that do not change a value (a cast to the
dtype it already has, a full slice, `contiguous`, a dropout of probability
0, a reshape to the same shape, a concatenation with empty tensors) are
*identities*: both look through them, so the same model gives the same
records in f32 (where HF's `.to(torch.float32)` is a no-op) and in bf16.
"""

import operator
import re
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
        path = _module_path(list(stack.values())[-1][0])
        if path.strip("."):
            return path.strip(".")
    return node.name


def _module_path(path: str) -> str:
    """A module path as dynamo spells it (through its frame's locals and
    module dicts) as the model's own: `model.layers.0.mlp`."""
    path = re.sub(r"__dict__\['_modules'\]\['([^']*)'\]|_modules\['([^']*)'\]",
                  lambda m: m.group(1) or m.group(2), path)
    return re.sub(r"^L\['self'\]\.?|^L__self__\.?|^L\['\w+'\](\[\d+\])?\.?", "", path)


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


def transposed(node) -> Optional[Any]:
    """The 2-D tensor `node` transposes (`t`, `permute [1, 0]`, `transpose`
    of its two dimensions), looking through identities, or None."""
    if not is_tensor(node) or len(shape(node)) != 2:
        return None
    swaps = is_op(node, aten.t.default) \
        or (is_op(node, aten.permute.default) and [d % 2 for d in node.args[1]] == [1, 0]) \
        or (is_op(node, aten.transpose.int) and sorted(d % 2 for d in node.args[1:3]) == [0, 1])
    if swaps:
        source = strip(node.args[0])
        return source if is_tensor(source) and len(shape(source)) == 2 else None
    return None


SPLITS = (aten.chunk.default, aten.split.Tensor, aten.split_with_sizes.default)


def row_slice(node) -> Optional[Tuple[Any, int, int]]:
    """(source, first row, rows) when `node` takes static rows of the last
    dimension of `source`: a slice, or a part of a split or chunk (a fused
    projection's q, k and v, or gate and up)."""
    start = None
    if is_op(node, aten.slice.Tensor) and arg(node, 4, "step", 1) == 1:
        source = strip(node.args[0])
        if arg(node, 1, "dim", 0) in (-1, rank(source) - 1):
            start = arg(node, 2, "start", 0) or 0
    elif getattr(node, "op", None) == "call_function" and node.target is operator.getitem \
            and is_op(node.args[0], *SPLITS):
        parts, index = node.args[0], node.args[1]
        source = strip(parts.args[0])
        dim = arg(parts, 2, "dim", 0)
        if dim not in (-1, rank(source) - 1) or not is_static(shape(source)[-1]):
            return None
        total = shape(source)[-1]
        if is_op(parts, aten.chunk.default):
            step = -(-total // parts.args[1])
            sizes = [min(step, total - i) for i in range(0, total, step)]
        elif is_op(parts, aten.split.Tensor):
            sizes = [min(parts.args[1], total - i) for i in range(0, total, parts.args[1])]
        else:
            sizes = list(parts.args[1])
        start = sum(sizes[:index])
    else:
        return None
    if not (isinstance(start, int) and is_tensor(node) and is_static(shape(node)[-1])):
        return None
    return source, start, shape(node)[-1]


def identity_source(node) -> Optional[Any]:
    """The node whose value `node` repeats unchanged, or None."""
    if getattr(node, "op", None) == "call_function" and transposed(node) is not None \
            and transposed(node.args[0]) is not None:
        return transposed(node.args[0])  # a transpose of a transpose
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
        kept = [t for t in node.args[0] if not _empty(t)]
        return kept[0] if len(kept) == 1 and same_shape(kept[0], node) else None
    return None


def _empty(node) -> bool:
    """A tensor with no elements (a static size of 0; concatenation skips
    them, the legacy 1-D empty tensor of any rank included)."""
    return any(is_static(s) and s == 0 for s in shape(node))


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


def erase_unread(graph, roots) -> None:
    """Erases each of `roots` that nothing reads, and then, transitively,
    the inputs that only erased nodes read (calls and attributes free of
    side effects; a graph's inputs stay): what a rewrite leaves behind."""
    stack, erased = list(roots), set()
    while stack:
        n = stack.pop()
        if n in erased or n.users or n.op not in ("call_function", "get_attr") or n.is_impure():
            continue
        inputs = n.all_input_nodes
        graph.erase_node(n)
        erased.add(n)
        stack.extend(inputs)
