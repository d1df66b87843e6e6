//===- FusionUtils.cpp - fusion groups: builder, policy, report -----------===//
//
// Implements liger/Transforms/Fusion.h.
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::liger;

static std::string describeLoc(Location loc) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    os << file.getFilename().getValue().rsplit('/').second << ":"
       << file.getLine() << ":" << file.getColumn();
  else
    loc.print(os);
  return text;
}

std::string mlir::liger::describeOps(ArrayRef<Operation *> ops) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(ops, os, [&](Operation *op) {
    if (auto inner = dyn_cast<FusionOp>(op))
      os << "liger.fusion " << stringifyFusionKind(inner.getKind());
    else
      os << op->getName();
  });
  return text;
}

void FusionReport::recordFused(StringRef pass, StringRef what, FusionOp group,
                               size_t numExtraOutputs) {
  std::string line;
  llvm::raw_string_ostream os(line);
  os << "[" << pass << "] fused " << what << " into a "
     << stringifyFusionKind(group.getKind()) << " group";
  if (numExtraOutputs)
    os << " (" << numExtraOutputs << " extra result"
       << (numExtraOutputs > 1 ? "s" : "") << ")";
  os << " at " << describeLoc(group.getLoc());
  lines.push_back(line);
  ++numFused;
}

void FusionReport::recordLeftAlone(StringRef pass, Operation *op,
                                   const Twine &why) {
  std::string line;
  llvm::raw_string_ostream os(line);
  os << "[" << pass << "] left alone " << op->getName() << " at "
     << describeLoc(op->getLoc()) << ": " << why;
  if (seen.insert(line).second)
    lines.push_back(line);
}

void FusionReport::print(raw_ostream &os) const {
  for (const std::string &line : lines)
    os << line << "\n";
}

SmallVector<Value> mlir::liger::getExtraOutputs(ArrayRef<Operation *> ops,
                                                ArrayRef<Value> natural) {
  llvm::SmallPtrSet<Operation *, 8> members(ops.begin(), ops.end());
  SmallVector<Value> extra;
  for (Operation *op : ops)
    for (Value result : op->getResults())
      if (!llvm::is_contained(natural, result) &&
          llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !members.contains(user);
          }))
        extra.push_back(result);
  return extra;
}

Value mlir::liger::valueOutsideGroups(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return v;
  auto group = dyn_cast<FusionOp>(arg.getOwner()->getParentOp());
  return group ? valueOutsideGroups(group.getInputs()[arg.getArgNumber()]) : v;
}

bool mlir::liger::isInFusionGroup(Operation *op) {
  return op->getParentOfType<FusionOp>() != nullptr;
}

LogicalResult mlir::liger::leaveAlone(const FusionOptions &options,
                                      StringRef pass, Operation *op,
                                      const Twine &why) {
  if (options.report)
    options.report->recordLeftAlone(pass, op, why);
  return failure();
}

FailureOr<FusionOp>
mlir::liger::createFusionGroup(RewriterBase &rewriter,
                               const FusionCandidate &candidate,
                               std::string &whyNot) {
  // An op listed twice (a gated activation whose gate and up are one
  // projection) is one member of the group.
  llvm::SetVector<Operation *> unique(candidate.ops.begin(),
                                      candidate.ops.end());
  SmallVector<Operation *> ops(unique.takeVector());
  if (ops.empty()) {
    whyNot = "the candidate has no ops";
    return failure();
  }
  Block *block = ops.front()->getBlock();
  for (Operation *op : ops) {
    if (op->getBlock() != block) {
      whyNot = "the ops are not in one block";
      return failure();
    }
  }
  llvm::sort(ops,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  llvm::SmallPtrSet<Operation *, 8> members(ops.begin(), ops.end());
  Operation *last = ops.back();

  // Inputs: what the members read from outside, in order of first use. A
  // matmul group copies the constants its layout ops read (tensor.dim's
  // index) into its body: its kernel takes tensors only.
  llvm::SetVector<Value> inputs;
  llvm::SetVector<Operation *> constants;
  for (Operation *op : ops)
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (members.contains(def))
        continue;
      if (candidate.kind == FusionKind::matmul && def &&
          def->hasTrait<OpTrait::ConstantLike>())
        constants.insert(def);
      else
        inputs.insert(operand);
    }
  // Results: what the rest of the function reads, which must come after the
  // group's position.
  SmallVector<Value> outputs;
  for (Operation *op : ops) {
    for (Value result : op->getResults()) {
      bool usedOutside = false;
      for (Operation *user : result.getUsers()) {
        Operation *ancestor = block->findAncestorOpInBlock(*user);
        if (ancestor && members.contains(ancestor))
          continue;
        if (ancestor && ancestor != last && ancestor->isBeforeInBlock(last)) {
          whyNot = ("'" + user->getName().getStringRef() +
                    "' reads an intermediate before the last fused op")
                       .str();
          return failure();
        }
        usedOutside = true;
      }
      if (usedOutside)
        outputs.push_back(result);
    }
  }

  rewriter.setInsertionPoint(last);
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  auto group = FusionOp::create(rewriter, last->getLoc(), candidate.kind,
                                resultTypes, inputs.getArrayRef());
  Block &body = group.getBody().front();
  IRMapping mapping;
  for (auto [input, arg] : llvm::zip(inputs, body.getArguments()))
    mapping.map(input, arg);
  rewriter.setInsertionPointToEnd(&body);
  for (Operation *constant : constants)
    rewriter.clone(*constant, mapping);
  for (Operation *op : ops) {
    auto inner = dyn_cast<FusionOp>(op);
    if (!inner) {
      rewriter.clone(*op, mapping);
      continue;
    }
    // Merge a group: its body, with its arguments bound to its inputs.
    Block &innerBody = inner.getBody().front();
    for (auto [arg, input] :
         llvm::zip(innerBody.getArguments(), inner.getInputs()))
      mapping.map(arg, mapping.lookupOrDefault(input));
    for (Operation &nested : innerBody.without_terminator())
      rewriter.clone(nested, mapping);
    for (auto [result, yielded] :
         llvm::zip(inner.getResults(), inner.getYield().getValues()))
      mapping.map(result, mapping.lookup(yielded));
  }
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(mapping.lookup(v));
  YieldOp::create(rewriter, group.getLoc(), yielded);

  for (auto [output, result] : llvm::zip(outputs, group.getResults()))
    rewriter.replaceUsesWithIf(output, result, [&](OpOperand &use) {
      return !members.contains(block->findAncestorOpInBlock(*use.getOwner()));
    });
  for (Operation *op : llvm::reverse(ops))
    rewriter.eraseOp(op);
  return group;
}

FailureOr<FusionOp> mlir::liger::tryFuse(RewriterBase &rewriter,
                                         Operation *root,
                                         const FusionCandidate &candidate,
                                         const FusionOptions &options) {
  if (!candidate.extraOutputs.empty() && !options.allowExtraOutputs)
    return leaveAlone(options, candidate.pass, root,
                      "an intermediate is read outside the group and extra "
                      "results are off (allow-extra-outputs=false)");
  if (options.control && !options.control(candidate))
    return leaveAlone(options, candidate.pass, root, "refused by the policy");
  std::string whyNot;
  std::string what = describeOps(candidate.ops);
  FailureOr<FusionOp> group = createFusionGroup(rewriter, candidate, whyNot);
  if (failed(group))
    return leaveAlone(options, candidate.pass, root, whyNot);
  if (options.report)
    options.report->recordFused(candidate.pass, what, *group,
                                candidate.extraOutputs.size());
  return group;
}

FusionOp mlir::liger::commitFusion(RewriterBase &rewriter,
                                   const FusionCandidate &candidate,
                                   StringRef what,
                                   const FusionOptions &options) {
  std::string whyNot;
  FailureOr<FusionOp> group = createFusionGroup(rewriter, candidate, whyNot);
  assert(succeeded(group) && "the pattern checked that the group forms");
  if (options.report)
    options.report->recordFused(candidate.pass, what, *group,
                                candidate.extraOutputs.size());
  return *group;
}

int64_t mlir::liger::runFusionPatterns(
    Operation *op, bool report, bool allowExtraOutputs,
    function_ref<void(RewritePatternSet &, const FusionOptions &)> populate) {
  FusionReport fusionReport;
  FusionOptions options;
  options.report = &fusionReport;
  options.allowExtraOutputs = allowExtraOutputs;
  RewritePatternSet patterns(op->getContext());
  populate(patterns, options);
  GreedyRewriteConfig config;
  config.setUseTopDownTraversal(true);
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  (void)applyPatternsGreedily(op, std::move(patterns), config);
  if (report) {
    fusionReport.print(llvm::outs());
    llvm::outs().flush();
  }
  return fusionReport.getNumFused();
}
