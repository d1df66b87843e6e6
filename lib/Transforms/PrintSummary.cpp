//===- PrintSummary.cpp - report of the liger ops of each function --------===//
//
// The liger-print-summary pass: counts the liger ops of each function, the
// weights they read and the FLOPs per token of the projections, and prints
// the report to standard output. Read-only.
//
//===----------------------------------------------------------------------===//

#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace mlir::liger {
#define GEN_PASS_DEF_PRINTSUMMARYPASS
#include "liger/Transforms/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {

/// What one kind of op contributes to the report.
struct KindStats {
  int64_t count = 0;
  int64_t weightElements = 0;
  int64_t flopsPerToken = 0;
};

/// The parameter tensors an op reads (weights, LoRA factors, biases), in
/// operand order; empty for ops without parameters.
SmallVector<Value> getParameterOperands(Operation *op) {
  SmallVector<Value> params;
  auto add = [&](Value v) {
    if (v)
      params.push_back(v);
  };
  TypeSwitch<Operation *>(op)
      .Case<RMSNormOp, AddRMSNormOp, RMSNormGradOp, LayerNormGradOp>(
          [&](auto norm) { add(norm.getWeight()); })
      .Case<LayerNormOp>([&](LayerNormOp norm) {
        add(norm.getWeight());
        add(norm.getBias());
      })
      .Case<LinearOp>([&](LinearOp linear) {
        add(linear.getWeight());
        add(linear.getBias());
      })
      .Case<LoRALinearOp>([&](LoRALinearOp lora) {
        add(lora.getWeight());
        add(lora.getLoraA());
        add(lora.getLoraB());
        add(lora.getBias());
      })
      .Case<FusedLinearCrossEntropyOp>([&](FusedLinearCrossEntropyOp flce) {
        add(flce.getWeight());
        add(flce.getBias());
      })
      .Case<FusedLinearCrossEntropyGradOp>(
          [&](FusedLinearCrossEntropyGradOp grad) {
            add(grad.getWeight());
            add(grad.getBias());
          });
  return params;
}

int64_t getStaticElements(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape() ? type.getNumElements() : 0;
}

int64_t getStaticBytes(Value v) {
  int64_t elements = getStaticElements(v);
  return elements ? elements *
                        static_cast<int64_t>(
                            getElementTypeOrSelf(v).getIntOrFloatBitWidth() / 8)
                  : 0;
}

/// Matrix FLOPs per token: 2·N·K per projection, plus 2·r·(K + N) for LoRA,
/// three times 2·V·H for the lm_head's backward.
int64_t getFlopsPerToken(Operation *op) {
  auto matrix = [](Value w) -> int64_t { return 2 * getStaticElements(w); };
  return TypeSwitch<Operation *, int64_t>(op)
      .Case<LinearOp>([&](LinearOp l) { return matrix(l.getWeight()); })
      .Case<LoRALinearOp>([&](LoRALinearOp l) {
        return matrix(l.getWeight()) + matrix(l.getLoraA()) +
               matrix(l.getLoraB());
      })
      .Case<FusedLinearCrossEntropyOp>(
          [&](FusedLinearCrossEntropyOp l) { return matrix(l.getWeight()); })
      // The logits (recomputed by its meaning), G · W and Gᵀ · h.
      .Case<FusedLinearCrossEntropyGradOp>([&](FusedLinearCrossEntropyGradOp l) {
        return 3 * matrix(l.getWeight());
      })
      .Default([](Operation *) { return int64_t(0); });
}

/// 1234567 -> "1,234,567".
std::string withThousands(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

struct PrintSummaryPass
    : public liger::impl::PrintSummaryPassBase<PrintSummaryPass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::raw_ostream &os = llvm::outs();
    getOperation().walk([&](FunctionOpInterface func) {
      if (func.isExternal())
        return;
      summarize(func, os);
    });
    os.flush();
  }

  void summarize(FunctionOpInterface func, llvm::raw_ostream &os) {
    // std::map keeps the report sorted by op name whatever the op order.
    std::map<StringRef, KindStats> liger;
    std::map<StringRef, int64_t> others;
    int64_t ligerCount = 0, otherCount = 0, flops = 0, ungrouped = 0;
    std::map<StringRef, int64_t> groups;
    llvm::SetVector<Value> weights;
    func.getFunctionBody().walk([&](Operation *op) {
      // Terminators (func.return, scf.yield) carry no computation.
      if (op->hasTrait<OpTrait::IsTerminator>())
        return;
      StringRef name = op->getName().getStringRef();
      if (auto group = dyn_cast<FusionOp>(op)) {
        ++groups[stringifyFusionKind(group.getKind())];
        return;
      }
      if (!isa_and_nonnull<LigerDialect>(op->getDialect())) {
        ++others[name];
        ++otherCount;
        return;
      }
      ++numLigerOps;
      ++ligerCount;
      if (!op->getParentOfType<FusionOp>())
        ++ungrouped;
      KindStats &stats = liger[name];
      ++stats.count;
      for (Value w : getParameterOperands(op)) {
        w = valueOutsideGroups(w);
        stats.weightElements += getStaticElements(w);
        weights.insert(w);
      }
      int64_t opFlops = getFlopsPerToken(op);
      stats.flopsPerToken += opFlops;
      flops += opFlops;
    });

    os << "liger summary of @" << func.getName() << "\n";
    int64_t numGroups = 0;
    for (auto &entry : groups)
      numGroups += entry.second;
    os << "  kernels: " << numGroups + ungrouped;
    if (numGroups) {
      os << " (fusion groups: ";
      llvm::interleaveComma(groups, os, [&](const auto &entry) {
        os << entry.second << " " << entry.first;
      });
      os << "; liger ops outside groups: " << ungrouped << ")";
    } else {
      os << " (one per liger op; no fusion groups)";
    }
    os << "\n";
    os << "  liger ops: " << ligerCount << "\n";
    for (auto &[name, stats] : liger) {
      os << "    " << llvm::left_justify(name, 28)
         << llvm::right_justify(std::to_string(stats.count), 4);
      if (stats.weightElements)
        os << "   weights " << withThousands(stats.weightElements)
           << " elements";
      if (stats.flopsPerToken)
        os << "   FLOP/token " << withThousands(stats.flopsPerToken);
      os << "\n";
    }
    os << "  other ops: " << otherCount;
    if (!others.empty()) {
      os << " (";
      llvm::interleaveComma(others, os, [&](const auto &entry) {
        os << entry.first << " x" << entry.second;
      });
      os << ")";
    }
    os << "\n";
    int64_t elements = 0, bytes = 0;
    for (Value w : weights) {
      elements += getStaticElements(w);
      bytes += getStaticBytes(w);
    }
    os << "  weights: " << withThousands(elements) << " elements, "
       << llvm::format("%.2f", bytes / (1024.0 * 1024.0)) << " MiB\n";
    os << "  projection FLOP/token: " << withThousands(flops) << "\n";
  }
};

} // namespace
