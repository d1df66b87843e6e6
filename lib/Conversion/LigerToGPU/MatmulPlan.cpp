//===- MatmulPlan.cpp - a matmul group, analysed once ---------------------===//
//
// Reads a matmul group's body into a MatmulPlan: which product it is (a
// projection or gate/up pair with an elementwise epilogue, a q/k pair with
// RoPE, or a gradient product), its sizes, and every group input's role.
// Bodies the templates do not implement are recorded, not diagnosed: the
// configuration is chosen for every matmul group, and the lowering warns.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulPlan.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::liger;

LogicalResult mlir::liger::leaveForLaterTemplate(FusionOp group,
                                                 const Twine &why) {
  group.emitWarning("left for a later matmul template: ") << why;
  return failure();
}

/// The sizes every projection of the group agrees on, and the hard errors:
/// a weight of dynamic shape, projections of different widths, no
/// projection.
static LogicalResult readSizes(MatmulPlan &plan) {
  FusionOp group = plan.group;
  auto take = [&](Operation *op, Value input, Value weight) -> LogicalResult {
    auto x = cast<RankedTensorType>(input.getType());
    auto w = cast<RankedTensorType>(weight.getType());
    if (!w.hasStaticShape())
      return op->emitOpError("needs a static weight shape for a matmul kernel");
    if (plan.k && plan.k != w.getDimSize(1))
      return group.emitOpError("holds projections of different widths (")
             << plan.k << " and " << w.getDimSize(1)
             << "), which one matmul kernel does not compute";
    plan.k = w.getDimSize(1);
    plan.widths.push_back(w.getDimSize(0));
    plan.elementBytes = std::max<int64_t>(1, x.getElementTypeBitWidth() / 8);
    int64_t m = 1;
    for (int64_t d : x.getShape().drop_back())
      m = (m == ShapedType::kDynamic || ShapedType::isDynamic(d))
              ? ShapedType::kDynamic
              : m * d;
    plan.m = m;
    return success();
  };
  WalkResult walk = group.getBody().walk([&](Operation *op) {
    LogicalResult result = success();
    if (auto linear = dyn_cast<LinearOp>(op)) {
      result = take(op, linear.getInput(), linear.getWeight());
    } else if (auto lora = dyn_cast<LoRALinearOp>(op)) {
      result = take(op, lora.getInput(), lora.getWeight());
      plan.loraRank =
          cast<RankedTensorType>(lora.getLoraA().getType()).getDimSize(0);
    } else if (auto g = dyn_cast<LinearGradInputOp>(op)) {
      // dx [T, K] = dy [T, N] · W [N, K]: the reduction runs over N.
      auto w = cast<RankedTensorType>(g.getWeight().getType());
      result = take(op, g.getGrad(), g.getWeight());
      plan.k = w.getDimSize(0);
      plan.widths = {w.getDimSize(1)};
    } else if (auto g = dyn_cast<LinearGradWeightOp>(op)) {
      // dW [N, K] = dyᵀ [N, T] · x [T, K]: the reduction runs over the
      // tokens (a dynamic trip count), the rows are dy's features.
      auto dy = cast<RankedTensorType>(g.getGrad().getType());
      auto x = cast<RankedTensorType>(g.getInput().getType());
      plan.m = dy.getDimSize(1);
      plan.k = ShapedType::kDynamic;
      plan.widths = {x.getDimSize(1)};
      plan.elementBytes = std::max<int64_t>(1, x.getElementTypeBitWidth() / 8);
      plan.accumulateTile =
          g.getAccumulate() && getElementTypeOrSelf(g.getAccumulate().getType())
                                       .getIntOrFloatBitWidth() == 16;
    } else if (auto r = dyn_cast<RoPEOp>(op)) {
      plan.headDim = cast<RankedTensorType>(r.getQ().getType()).getDimSize(3);
    }
    return failed(result) ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (plan.widths.empty())
    return group.emitOpError("is a matmul group without a projection");
  return success();
}

/// A gradient product: dW alone (the group verifier's rule), dx alone or
/// with an elementwise epilogue (a gated activation's gradient after the
/// down projection's dx).
static void readGradient(MatmulPlan &plan, Operation *op) {
  if (auto dx = dyn_cast<LinearGradInputOp>(op)) {
    plan.body = MatmulBody::GradInput;
    plan.projections.push_back(
        {op, dx.getGrad(), dx.getWeight(), Value(), dx.getResult()});
    if (!isa<BlockArgument>(dx.getGrad()) || !isa<BlockArgument>(dx.getWeight()))
      plan.unsupported = "the gradient product dx = dy · W must read dy and W "
                         "among the group's inputs";
  } else {
    auto dW = cast<LinearGradWeightOp>(op);
    plan.body = MatmulBody::GradWeight;
    plan.projections.push_back(
        {op, dW.getGrad(), dW.getInput(), Value(), dW.getResult()});
    plan.accumulator = dW.getAccumulate();
  }
  plan.x = plan.projections.front().input;
  plan.n = plan.widths.front();
}

/// rope(split(x̂ · Wqᵀ), split(x̂ · Wkᵀ), cos, sin), the head splits being
/// expand_shape + transpose [B, T, H·D] -> [B, H, T, D]. The kernel computes
/// the concatenation [Wq; Wk] (each column tile inside one of them), rotates
/// and stores head-major.
static void readQKRoPE(MatmulPlan &plan, RoPEOp op) {
  plan.body = MatmulBody::QKRoPE;
  auto unsupported = [&](const Twine &why) {
    if (plan.unsupported.empty())
      plan.unsupported = why.str();
  };
  // transpose [0, 2, 1, 3] <- expand_shape [[0], [1], [2, 3]] <- linear.
  auto trace = [](Value v) -> LinearOp {
    auto t = v.getDefiningOp<linalg::TransposeOp>();
    if (!t || t.getPermutation() != ArrayRef<int64_t>{0, 2, 1, 3})
      return {};
    auto e = t.getInput().getDefiningOp<tensor::ExpandShapeOp>();
    if (!e || e.getReassociationIndices() !=
                  SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}})
      return {};
    return e.getSrc().getDefiningOp<LinearOp>();
  };
  FusionOp group = plan.group;
  LinearOp q = trace(op.getQ()), k = trace(op.getK());
  StringLiteral shapeRule =
      "a RoPE epilogue takes liger.rope of the head splits ([B, T, H*D] -> "
      "[B, H, T, D]) of two liger.linear on one input, weights, biases and "
      "tables among the group's inputs, yielding the rotated q and k";
  if (!q || !k || q.getInput() != k.getInput() ||
      group.getYield().getValues() != op->getResults() ||
      !isa<BlockArgument>(op.getCos()) || !isa<BlockArgument>(op.getSin()) ||
      !isa<BlockArgument>(q.getWeight()) ||
      !isa<BlockArgument>(k.getWeight()) ||
      (q.getBias() && !isa<BlockArgument>(q.getBias())) ||
      (k.getBias() && !isa<BlockArgument>(k.getBias())))
    return unsupported(shapeRule);
  plan.rope = op;
  for (LinearOp l : {q, k})
    plan.projections.push_back(
        {l, l.getInput(), l.getWeight(), l.getBias(), l.getResult()});
  RMSNormOp norm = q.getInput().getDefiningOp<RMSNormOp>();
  plan.norm = norm;
  if (norm && (!isa<BlockArgument>(norm.getInput()) ||
               !isa<BlockArgument>(norm.getWeight())))
    return unsupported("the RMSNorm before a RoPE pair must read group inputs");
  for (Operation &o : group.getBody().front().without_terminator())
    if (!isa<tensor::DimOp, tensor::ExpandShapeOp, tensor::EmptyOp,
             linalg::TransposeOp>(o) &&
        !o.hasTrait<OpTrait::ConstantLike>() && &o != op.getOperation() &&
        &o != q.getOperation() && &o != k.getOperation() &&
        &o != norm.getOperation())
      return unsupported("'" + o.getName().getStringRef() +
                         "' is not part of a q/k projection pair with RoPE");
  // (A projection input computed by an op the loop allows, a constant.)
  Value x = norm ? norm.getInput() : q.getInput();
  if (!isa<BlockArgument>(x))
    return unsupported(shapeRule);
  plan.x = x;
  plan.normWeight = norm ? norm.getWeight() : Value();
  plan.cos = op.getCos();
  plan.sin = op.getSin();
  plan.nq = cast<RankedTensorType>(q.getWeight().getType()).getDimSize(0);
  plan.k = cast<RankedTensorType>(x.getType()).getShape().back();
  plan.n =
      plan.nq + cast<RankedTensorType>(k.getWeight().getType()).getDimSize(0);
}

/// One liger.linear or liger.lora_linear (bias optional) on the group's
/// inputs, or a gate/up pair on one input, optionally after an RMSNorm of
/// it, then elementwise ops, one result.
static void readProjections(MatmulPlan &plan) {
  auto unsupported = [&](const Twine &why) {
    if (plan.unsupported.empty())
      plan.unsupported = why.str();
  };
  FusionOp group = plan.group;
  SmallVector<MatmulProjection, 2> &projs = plan.projections;
  for (Operation &op : group.getBody().front()) {
    if (auto l = dyn_cast<LinearOp>(op))
      projs.push_back(
          {l, l.getInput(), l.getWeight(), l.getBias(), l.getResult()});
    if (auto l = dyn_cast<LoRALinearOp>(op)) {
      plan.lora = l;
      projs.push_back(
          {l, l.getInput(), l.getWeight(), l.getBias(), l.getResult()});
    }
  }
  LoRALinearOp lora = plan.lora;
  if (projs.size() > 2)
    return unsupported("the group holds " + Twine(projs.size()) +
                       " projections; one, or a gate/up pair, is what the "
                       "template computes");
  // A weight transposed in the group ([K, N] -> [N, K]) is read MN-major
  // from the transpose's input (the transpose and its tensor.empty are then
  // no ops of the kernel's: nothing else may read them).
  for (MatmulProjection &p : projs) {
    if (!p.weight.getDefiningOp<linalg::TransposeOp>())
      continue;
    auto t = dyn_cast_or_null<linalg::TransposeOp>(
        getMNMajorWeightTranspose(p.weight));
    if (!t || !isa<BlockArgument>(t.getInput()) || projs.size() != 1 ||
        (lora &&
         (lora.getLoraA() == t.getInput() || lora.getLoraB() == t.getInput())))
      return unsupported("a transposed weight is read MN-major by one "
                         "projection alone, as linalg.transpose [1, 0] of a "
                         "group input that is not also a LoRA factor, into "
                         "a tensor.empty, read by the projection only");
    p.weight = t.getInput();
    plan.weightTranspose = t;
  }
  if (lora && projs.size() != 1)
    return unsupported("a LoRA projection is implemented alone, not in a pair");
  if (lora && (!isa<BlockArgument>(lora.getLoraA()) ||
               !isa<BlockArgument>(lora.getLoraB())))
    return unsupported("the LoRA factors must be among the group's inputs");
  const MatmulProjection &linear = projs.front();
  bool sameInputs = llvm::all_of(projs, [&](const MatmulProjection &other) {
    return other.input == linear.input &&
           other.weight.getType() == linear.weight.getType() &&
           (!other.bias || isa<BlockArgument>(other.bias)) &&
           isa<BlockArgument>(other.weight);
  });
  // An RMSNorm prologue: x -> rms_norm(x, g) -> the projection(s) only.
  RMSNormOp norm = linear.input.getDefiningOp<RMSNormOp>();
  if (norm && (!isa<BlockArgument>(norm.getInput()) ||
               !isa<BlockArgument>(norm.getWeight()) ||
               llvm::any_of(norm.getResult().getUsers(), [](Operation *u) {
                 return !isa<LinearOp, LoRALinearOp>(u);
               })))
    norm = RMSNormOp();
  Value x = norm ? norm.getInput() : linear.input;
  if (!sameInputs || !isa<BlockArgument>(x))
    return unsupported("the matmul templates implement one liger.linear or "
                       "liger.lora_linear (weight and bias among the group's "
                       "inputs) on the group's inputs (or a gate/up pair on "
                       "one input, optionally after an RMSNorm of it), with "
                       "an elementwise epilogue; other prologues come with "
                       "the next templates");
  plan.norm = norm;
  plan.x = x;
  plan.normWeight = norm ? norm.getWeight() : Value();
  plan.n = plan.widths.front();
}

/// The role of every group input (the kernel's parameters follow it).
static void readOperands(MatmulPlan &plan) {
  Block &body = plan.group.getBody().front();
  unsigned rank = cast<RankedTensorType>(plan.x.getType()).getRank();
  for (BlockArgument arg : body.getArguments()) {
    using Role = MatmulOperandRole;
    MatmulOperand operand;
    auto projection = [&](auto pred) {
      const MatmulProjection *p = llvm::find_if(plan.projections, pred);
      if (p == plan.projections.end())
        return false;
      operand.projection = p - plan.projections.begin();
      return true;
    };
    auto type = cast<RankedTensorType>(arg.getType());
    if (arg == plan.x) {
      operand.role = Role::X;
    } else if (plan.body == MatmulBody::QKRoPE) {
      if (arg == plan.normWeight)
        operand.role = Role::NormWeight;
      else if (projection([&](const MatmulProjection &l) {
                 return l.weight == arg || l.bias == arg;
               }))
        operand.role = plan.projections[operand.projection].weight == arg
                           ? Role::Weight
                           : Role::Bias;
      else if (arg == plan.cos || arg == plan.sin)
        operand.role = arg == plan.cos ? Role::Cos : Role::Sin;
    } else if (plan.body != MatmulBody::Projection &&
               arg == plan.projections.front().weight) {
      operand.role = Role::Weight;
    } else if (plan.body != MatmulBody::Projection && arg == plan.accumulator) {
      operand.role = Role::Accumulator;
    } else if (plan.body == MatmulBody::GradWeight) {
      operand.role = Role::Unread;
    } else if (plan.lora && arg == plan.lora.getLoraA()) {
      operand.role = Role::LoRAA;
    } else if (plan.lora && arg == plan.lora.getLoraB()) {
      operand.role = Role::LoRAB;
    } else if (projection(
                   [&](const MatmulProjection &l) { return l.bias == arg; })) {
      operand.role = Role::Bias;
    } else if (arg == plan.normWeight) {
      operand.role = Role::NormWeight;
    } else if (projection([&](const MatmulProjection &l) {
                 return l.weight == arg || l.input == arg;
               })) {
      operand.role = Role::Weight;
    } else if (type.getRank() == rank && type.getShape().back() == plan.n) {
      operand.role = Role::EpilogueRows;
    } else if (type.getRank() == 1 && type.getShape().back() == plan.n) {
      operand.role = Role::EpilogueFeature;
    } else {
      operand.role = Role::Unshaped;
    }
    plan.operands.push_back(operand);
  }
}

/// The results of a Projection or GradInput body: each is written per
/// element at (row, column) like the product, so each is [rows, N] of the
/// product's rank.
static void readOutputs(MatmulPlan &plan) {
  if (plan.body == MatmulBody::QKRoPE || plan.body == MatmulBody::GradWeight)
    return;
  auto product = cast<RankedTensorType>(plan.projections.front().result.getType());
  for (auto [i, value] : llvm::enumerate(plan.group.getYield().getValues())) {
    Type type = value.getType();
    auto t = dyn_cast<RankedTensorType>(type);
    // (A group input returned as it is must be one the epilogue reads at
    // the product's pairs.)
    bool passedThrough =
        isa<BlockArgument>(value) &&
        plan.operandOf(value).role != MatmulOperandRole::EpilogueRows;
    if (!t || t.getRank() != product.getRank() ||
        t.getShape().back() != plan.n || passedThrough) {
      llvm::raw_string_ostream os(plan.unsupported);
      if (passedThrough)
        os << "result #" << i << " is the group's input #"
           << cast<BlockArgument>(value).getArgNumber()
           << " as it is, which the kernel does not read per element of "
              "the product";
      else
        os << "result #" << i << " (" << type
           << ") is not [rows, N] like the product: the kernel writes its "
              "results per element of the product";
      return;
    }
  }
}

bool mlir::liger::isLoneMatmulOp(Operation *op) {
  return isa<LinearOp, LinearGradInputOp, LinearGradWeightOp>(op);
}

FailureOr<MatmulPlan> mlir::liger::analyzeMatmulGroup(FusionOp group) {
  MatmulPlan plan;
  plan.group = group;
  // A group of dead ops (a lone projection whose value nothing reads, as
  // liger-lower-to-gpu finds it before any canonicalization) has no result
  // to write.
  if (group.getNumResults() == 0)
    return group.emitOpError("is a matmul group with no results: nothing "
                             "reads its projections' values (canonicalize "
                             "first to drop dead ops)");
  plan.outputElementType = getElementTypeOrSelf(group.getResult(0).getType());
  if (failed(readSizes(plan)))
    return failure();
  Block &body = group.getBody().front();
  Operation *gradient = nullptr;
  RoPEOp rope;
  for (Operation &op : body) {
    if (isa<LinearGradInputOp, LinearGradWeightOp>(op))
      gradient = &op;
    if (auto r = dyn_cast<RoPEOp>(op))
      rope = r;
  }
  if (gradient)
    readGradient(plan, gradient);
  else if (rope)
    readQKRoPE(plan, rope);
  else
    readProjections(plan);
  if (!plan.unsupported.empty())
    return plan;
  plan.elementType = cast<RankedTensorType>(plan.x.getType()).getElementType();
  // (A transposed weight and the tensor.empty it writes into are the
  // kernel's MN-major reads, not epilogue ops.)
  auto readsWeight = [&](Operation &op) {
    return plan.weightTranspose &&
           (&op == plan.weightTranspose ||
            &op == cast<linalg::TransposeOp>(plan.weightTranspose)
                       .getInit()
                       .getDefiningOp());
  };
  if (plan.body != MatmulBody::QKRoPE)
    for (Operation &op : body.without_terminator())
      if (!isa<LinearOp, LoRALinearOp, LinearGradInputOp, LinearGradWeightOp>(
              op) &&
          &op != plan.norm.getOperation() && !readsWeight(op))
        plan.epilogueOps.push_back(&op);
  readOperands(plan);
  readOutputs(plan);
  return plan;
}
