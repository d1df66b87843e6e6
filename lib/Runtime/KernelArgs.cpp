//===- KernelArgs.cpp - which tensors a kernel takes, and makes -----------===//
//
// The launch-time rules of the kernel ABI, for every launcher (the runtime's
// launch, the C API, Python, the LibTorch adapter): checkArgs, and the
// shapes of a kernel's outputs and workspaces for given inputs. One binder
// (bindShapes) reads the row count, batch, sequence and CTA count from the
// tensors, so that the checks and the shapes cannot disagree. Nothing is
// allocated and no message is built unless a check fails.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/KernelAbi.h"

#include <algorithm>

using namespace liger::runtime;

Status liger::runtime::makeTensorArg(void *data, DType dtype,
                                     const int64_t *sizes, int64_t rank,
                                     const char *what, size_t index,
                                     TensorArg *arg) {
  auto invalid = [&](const std::string &why) {
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             std::string(what) + " #" + std::to_string(index) +
                                 " " + why);
  };
  if (rank < 0 || rank > static_cast<int64_t>(kMaxRank))
    return invalid("has rank " + std::to_string(rank) +
                   "; liger kernels take tensors of rank 0 to " +
                   std::to_string(kMaxRank));
  if (rank > 0 && !sizes)
    return invalid("has rank " + std::to_string(rank) + " but no sizes");
  (void)arg->shape.assign(sizes, static_cast<size_t>(rank));
  for (int64_t d : arg->shape)
    if (d < 0)
      return invalid("has a negative size: " + shapeString(arg->shape));
  arg->data = data;
  arg->dtype = dtype;
  return Status::ok();
}

int64_t liger::runtime::workspaceCtas(const KernelSpec &kernel, int64_t rows,
                                      int smCount) {
  int64_t most = static_cast<int64_t>(std::max(smCount, 1)) *
                 std::max<int64_t>(kernel.ctasPerSm, 1);
  return std::max<int64_t>(1, std::min(rows, most));
}

namespace {
/// a * b of a caller's sizes, INT64_MAX where it would overflow: more rows
/// than a launch takes (checkArgs says so).
int64_t product(int64_t a, int64_t b) {
  int64_t p;
  return __builtin_mul_overflow(a, b, &p) ? INT64_MAX : p;
}

/// Whether a parameter of `kind` has the batch and sequence of the
/// kernel's heads tensors: [batch, heads, seq, D] and [batch, heads, seq].
bool bindsBatchAndSeq(ParamKind kind) {
  return kind == ParamKind::Heads || kind == ParamKind::HeadScalars;
}

/// The rank of a bindsBatchAndSeq kind.
size_t headsRank(ParamKind kind) { return kind == ParamKind::Heads ? 4 : 3; }

/// Whether `s` is a shape of `p`, a bindsBatchAndSeq kind: its rank and
/// static sizes, with any batch and sequence.
bool isHeadsShape(const KernelParam &p, const Shape &s) {
  return s.size() == headsRank(p.kind) && s[1] == p.outer &&
         (p.kind != ParamKind::Heads || s[3] == p.length);
}

/// The shape `p` (a bindsBatchAndSeq kind) takes, for messages: "[batch, 8,
/// seq, 64]", "[batch, 8, seq]".
std::string headsShapeText(const KernelParam &p) {
  return "[batch, " + std::to_string(p.outer) + ", seq" +
         (p.kind == ParamKind::Heads ? ", " + std::to_string(p.length) : "") +
         "]";
}

/// What the tensors given for the first parameters of a kernel bind.
struct Bindings {
  int64_t rows = -1;            ///< the common row count
  const Shape *first = nullptr; ///< the first rows tensor's shape
  int64_t batch = -1, seq = -1; ///< of the [B, H, T, ...] tensors
  bool fromHeads = false;       ///< batch and seq come from such a tensor
  int64_t ctas = -1;            ///< of the partials workspaces
};

class Checker {
public:
  explicit Checker(const KernelSpec &kernel) : kernel(kernel) {}

  Status invalid(const std::string &what) const {
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             "kernel '" + kernel.name + "': " + what);
  }
  /// "'input0' (#0)".
  std::string nameOf(size_t i) const {
    return "'" + kernel.params[i].name + "' (#" + std::to_string(i) + ")";
  }
  /// Parameter `i` is sized by a batch and sequence no tensor gave.
  Status noBatchAndSeq(size_t i) const {
    return invalid(nameOf(i) + " needs the batch and sequence of a [batch, "
                               "heads, seq, D] tensor or of [batch, seq, K] "
                               "rows, and there is none");
  }

  /// Binds and checks the shapes of `n` tensors for the first `n`
  /// parameters against their kinds.
  Status bindShapes(const Shape *const *shapes, size_t n, Bindings *b) const;

  const KernelSpec &kernel;
};

Status Checker::bindShapes(const Shape *const *shapes, size_t n,
                           Bindings *b) const {
  // [B, H, T, D] and [B, H, T] tensors first: they share B and T.
  for (size_t i = 0; i < n; ++i) {
    const KernelParam &p = kernel.params[i];
    const Shape &s = *shapes[i];
    if (!bindsBatchAndSeq(p.kind))
      continue;
    if (!isHeadsShape(p, s))
      return invalid(nameOf(i) + " must have shape " + headsShapeText(p) +
                     ", got " + shapeString(s));
    if (!b->fromHeads) {
      b->batch = s[0];
      b->seq = s[2];
      b->fromHeads = true;
    } else if (s[0] != b->batch || s[2] != b->seq) {
      return invalid(nameOf(i) + " has batch and sequence " + shapeString(s) +
                     ", the earlier tensors " + std::to_string(b->batch) +
                     " and " + std::to_string(b->seq));
    }
  }
  bool anyTables = false;
  for (size_t i = 0; i < n; ++i) {
    const KernelParam &p = kernel.params[i];
    const Shape &s = *shapes[i];
    int64_t leading = 1;
    switch (p.kind) {
    case ParamKind::Rows:
      if (s.empty() || s.back() != p.length)
        return invalid(nameOf(i) + " must have " + std::to_string(p.length) +
                       " elements in its last dimension, got shape " +
                       shapeString(s));
      for (size_t d = 0; d + 1 < s.size(); ++d)
        leading = product(leading, s[d]);
      if (!b->first)
        b->first = &s;
      break;
    case ParamKind::RowScalars:
      leading = s.elements();
      break;
    case ParamKind::Feature:
      if (s.size() != 1 || s[0] != p.length)
        return invalid(nameOf(i) + " must have shape [" +
                       std::to_string(p.length) + "], got " + shapeString(s));
      continue;
    case ParamKind::Scalar:
      if (!s.empty())
        return invalid(nameOf(i) + " must be a scalar, got shape " +
                       shapeString(s));
      continue;
    case ParamKind::Matrix:
      if (s.size() != 2 || s[0] != p.outer || s[1] != p.length)
        return invalid(nameOf(i) + " must have shape [" +
                       std::to_string(p.outer) + ", " +
                       std::to_string(p.length) + "], got " + shapeString(s));
      continue;
    case ParamKind::Partials:
      if (s.size() != 2 || s[1] != p.length || s[0] < 1 || s[0] > 0x7fffffff)
        return invalid(nameOf(i) + " (a workspace) must have shape [ctas, " +
                       std::to_string(p.length) + "] with ctas >= 1, got " +
                       shapeString(s));
      if (b->ctas >= 0 && s[0] != b->ctas)
        return invalid(nameOf(i) + " has " + std::to_string(s[0]) +
                       " CTA rows, the earlier workspaces " +
                       std::to_string(b->ctas));
      b->ctas = s[0];
      continue;
    case ParamKind::Heads:
    case ParamKind::HeadScalars:
      continue; // bound above
    case ParamKind::Tables:
      anyTables = true;
      continue; // once the batch and sequence are known
    }
    if (b->rows < 0)
      b->rows = leading;
    else if (leading != b->rows)
      return invalid(nameOf(i) + " has " + std::to_string(leading) +
                     " rows, the earlier tensors " + std::to_string(b->rows));
  }
  // Without [B, H, T, D] tensors, [B, T, K] rows give B and T (a
  // projection's head split).
  if (!b->fromHeads && b->first && b->first->size() == 3) {
    b->batch = (*b->first)[0];
    b->seq = (*b->first)[1];
  }
  if (b->fromHeads && b->rows >= 0 && b->rows != product(b->batch, b->seq))
    return invalid("has " + std::to_string(b->rows) +
                   " rows, but its [batch, heads, seq, D] tensors have batch "
                   "x seq = " +
                   std::to_string(product(b->batch, b->seq)));
  for (size_t i = 0; anyTables && i < n; ++i) {
    const KernelParam &p = kernel.params[i];
    const Shape &s = *shapes[i];
    if (p.kind != ParamKind::Tables)
      continue;
    if (b->batch < 0)
      return noBatchAndSeq(i);
    if (p.outer == 1 && !s.empty() && s[0] != 1)
      return invalid(nameOf(i) +
                     " must have batch 1 (the kernel was compiled for "
                     "broadcast tables), got shape " +
                     shapeString(s));
    if (s.size() != 3 || (s[0] != 1 && s[0] != b->batch) || s[1] != b->seq ||
        s[2] != p.length)
      return invalid(nameOf(i) + " must have shape [1 or " +
                     std::to_string(b->batch) + ", " + std::to_string(b->seq) +
                     ", " + std::to_string(p.length) + "], got " +
                     shapeString(s));
  }
  if (b->fromHeads)
    b->rows = product(b->batch, b->seq); // one CTA per token
  return Status::ok();
}

/// Up to this many tensors, checks keep their shape pointers on the stack.
constexpr size_t kInlineTensors = 32;

/// The shape pointers of `n` tensors: on the stack for the usual kernel.
class ShapeList {
public:
  template <typename GetShape> ShapeList(size_t n, GetShape get) {
    list_ = n <= kInlineTensors ? inline_ : (heap_.resize(n), heap_.data());
    for (size_t i = 0; i < n; ++i)
      list_[i] = &get(i);
  }
  const Shape *const *data() const { return list_; }

private:
  const Shape *inline_[kInlineTensors];
  std::vector<const Shape *> heap_;
  const Shape **list_;
};

/// "takes 2 input tensors (input0, input1), got 3".
Status checkInputCount(const Checker &c, size_t numInputs) {
  size_t want = c.kernel.numInputs();
  if (numInputs == want)
    return Status::ok();
  std::string names;
  for (const KernelParam &p : c.kernel.params)
    if (p.isInput())
      names += (names.empty() ? "" : ", ") + p.name;
  return c.invalid("takes " + std::to_string(want) + " input tensors (" +
                   names + "), got " + std::to_string(numInputs));
}
} // namespace

Status liger::runtime::checkArgs(const KernelSpec &kernel,
                                 const TensorArg *args, size_t numArgs,
                                 LaunchDims *dims) {
  Checker c(kernel);
  if (numArgs != kernel.params.size())
    return c.invalid("expects " + std::to_string(kernel.params.size()) +
                     (kernel.hasWorkspaces()
                          ? " tensors (inputs, outputs, then workspaces), got "
                          : " tensors (inputs then outputs), got ") +
                     std::to_string(numArgs));
  for (size_t i = 0; i < numArgs; ++i) {
    const KernelParam &p = kernel.params[i];
    const TensorArg &a = args[i];
    if (a.dtype != p.dtype)
      return c.invalid(c.nameOf(i) + " must be " + dtypeName(p.dtype) +
                       ", got " + dtypeName(a.dtype));
    if (!a.data && a.shape.elements() != 0)
      return c.invalid(c.nameOf(i) + " is a null pointer");
    if (reinterpret_cast<uintptr_t>(a.data) % kernel.alignmentBytes != 0)
      return c.invalid(c.nameOf(i) + " must be " +
                       std::to_string(kernel.alignmentBytes) +
                       "-byte aligned (the kernel uses vector loads)");
  }
  Bindings b;
  ShapeList shapes(numArgs,
                   [&](size_t i) -> const Shape & { return args[i].shape; });
  LIGER_RETURN_IF_ERROR(c.bindShapes(shapes.data(), numArgs, &b));
  // verifyManifest saw to it that every kernel has a parameter counting rows.
  if (b.rows > 0x7fffffff)
    return c.invalid("too many rows for one launch (" + std::to_string(b.rows) +
                     ")");
  // A kernel that reduces over the rows (a weight gradient) writes a
  // matrix; with no rows it would not run and leave that matrix unwritten.
  if (b.rows == 0)
    for (const KernelParam &p : kernel.params)
      if (p.isOutput() && p.kind == ParamKind::Matrix)
        return c.invalid("reduces over the rows into '" + p.name +
                         "': with 0 rows it would not be written (pass at "
                         "least one row)");
  dims->rows = b.rows;
  dims->ctas = b.ctas;
  return Status::ok();
}

Status
liger::runtime::outputShapeRules(const KernelSpec &kernel,
                                 const size_t *inputRanks, size_t numInputs,
                                 std::vector<std::vector<DimSource>> *rules) {
  Checker c(kernel);
  LIGER_RETURN_IF_ERROR(checkInputCount(c, numInputs));
  // The leading dimensions of the first rows input (else of the first
  // row_scalars input), and where B and T of [B, H, T, ...] outputs are.
  int leadingInput = -1, headsInput = -1;
  size_t leadingRank = 0;
  for (size_t i = 0; i < numInputs; ++i) {
    const KernelParam &p = kernel.params[i];
    if (p.kind == ParamKind::Rows && inputRanks[i] == 0)
      return c.invalid(c.nameOf(i) + " must have " + std::to_string(p.length) +
                       " elements in its last dimension, got a scalar");
    if (bindsBatchAndSeq(p.kind) && inputRanks[i] != headsRank(p.kind))
      return c.invalid(c.nameOf(i) + " must have shape " + headsShapeText(p) +
                       ", got rank " + std::to_string(inputRanks[i]));
    if (bindsBatchAndSeq(p.kind) && headsInput < 0)
      headsInput = static_cast<int>(i);
    bool rows = p.kind == ParamKind::Rows;
    if ((rows || p.kind == ParamKind::RowScalars) &&
        (leadingInput < 0 ||
         (rows && kernel.params[leadingInput].kind != ParamKind::Rows))) {
      leadingInput = static_cast<int>(i);
      leadingRank = inputRanks[i] - (rows ? 1 : 0);
    }
  }
  rules->clear();
  for (size_t i = numInputs; i < kernel.params.size(); ++i) {
    const KernelParam &p = kernel.params[i];
    if (!p.isOutput())
      continue;
    std::vector<DimSource> rule;
    auto leading = [&]() -> Status {
      if (leadingInput < 0)
        return c.invalid("has no row-shaped input to size its output " +
                         c.nameOf(i));
      for (size_t d = 0; d < leadingRank; ++d)
        rule.push_back({0, leadingInput, static_cast<int>(d)});
      return Status::ok();
    };
    switch (p.kind) {
    case ParamKind::Rows:
      LIGER_RETURN_IF_ERROR(leading());
      rule.push_back({p.length});
      break;
    case ParamKind::RowScalars:
      LIGER_RETURN_IF_ERROR(leading());
      break;
    case ParamKind::Feature:
      rule.push_back({p.length});
      break;
    case ParamKind::Scalar:
      break;
    case ParamKind::Matrix:
      rule = {{p.outer}, {p.length}};
      break;
    case ParamKind::Heads:
    case ParamKind::HeadScalars: {
      // B and T of the [B, H, T, ...] inputs, else of [B, T, K] rows (a
      // projection's head split).
      DimSource batch{0, headsInput, 0}, seq{0, headsInput, 2};
      if (headsInput < 0) {
        if (leadingInput < 0 || leadingRank != 2)
          return c.invalid(
              std::string("writes ") +
              (p.kind == ParamKind::Heads ? "[B, H, T, D]" : "[B, H, T]") +
              " from [B, T, K] rows, got " +
              (leadingInput < 0
                   ? std::string("no rows input")
                   : "rows of rank " + std::to_string(leadingRank + 1)));
        batch = {0, leadingInput, 0};
        seq = {0, leadingInput, 1};
      }
      rule = {batch, {p.outer}, seq};
      if (p.kind == ParamKind::Heads)
        rule.push_back({p.length});
      break;
    }
    case ParamKind::Tables:
    case ParamKind::Partials:
      break; // never outputs (verifyManifest)
    }
    rules->push_back(std::move(rule));
  }
  return Status::ok();
}

Status liger::runtime::inferOutputShapes(const KernelSpec &kernel,
                                         const Shape *inputs, size_t numInputs,
                                         std::vector<Shape> *outputs) {
  Checker c(kernel);
  LIGER_RETURN_IF_ERROR(checkInputCount(c, numInputs));
  // The rules first (what the ranks alone say), then the sizes.
  size_t ranks[kInlineTensors];
  std::vector<size_t> heapRanks;
  size_t *rank = numInputs <= kInlineTensors
                     ? ranks
                     : (heapRanks.resize(numInputs), heapRanks.data());
  for (size_t i = 0; i < numInputs; ++i)
    rank[i] = inputs[i].size();
  std::vector<std::vector<DimSource>> rules;
  LIGER_RETURN_IF_ERROR(outputShapeRules(kernel, rank, numInputs, &rules));
  Bindings b;
  ShapeList shapes(numInputs,
                   [&](size_t i) -> const Shape & { return inputs[i]; });
  LIGER_RETURN_IF_ERROR(c.bindShapes(shapes.data(), numInputs, &b));
  outputs->assign(rules.size(), Shape());
  for (size_t o = 0; o < rules.size(); ++o)
    for (const DimSource &d : rules[o])
      (void)(*outputs)[o].push_back(d.input < 0 ? d.size
                                                : inputs[d.input][d.dim]);
  return Status::ok();
}

Status liger::runtime::inferWorkspaceShapes(const KernelSpec &kernel,
                                            const Shape *inputs,
                                            size_t numInputs, int smCount,
                                            std::vector<Shape> *workspaces) {
  workspaces->clear();
  if (!kernel.hasWorkspaces())
    return Status::ok();
  Checker c(kernel);
  LIGER_RETURN_IF_ERROR(checkInputCount(c, numInputs));
  Bindings b;
  ShapeList shapes(numInputs,
                   [&](size_t i) -> const Shape & { return inputs[i]; });
  LIGER_RETURN_IF_ERROR(c.bindShapes(shapes.data(), numInputs, &b));
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    const KernelParam &p = kernel.params[i];
    if (!p.isWorkspace())
      continue;
    if (p.kind != ParamKind::Heads && b.rows < 0)
      return c.invalid("has no row-shaped input to count the rows of its "
                       "workspaces from");
    if (p.kind == ParamKind::Partials) {
      workspaces->push_back({workspaceCtas(kernel, b.rows, smCount), p.length});
      continue;
    }
    if (p.kind == ParamKind::Rows) {
      workspaces->push_back({b.rows, p.length});
      continue;
    }
    if (p.kind == ParamKind::RowScalars) {
      workspaces->push_back({b.rows});
      continue;
    }
    // [B, heads, T, D], B and T bound as for a heads output.
    if (b.batch < 0)
      return c.noBatchAndSeq(i);
    workspaces->push_back({b.batch, p.outer, b.seq, p.length});
  }
  return Status::ok();
}
