//===- ReferenceLowering.cpp - the reference lowering in kernels ---------===//
//
// Implements liger/Conversion/LigerToGPU/ReferenceLowering.h.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/ReferenceLowering.h"
#include "liger/Conversion/LigerToLinalg/LigerToLinalg.h"
#include "liger/Dialect/Liger/IR/LigerDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::liger;

LogicalResult mlir::liger::lowerToReference(func::FuncOp fn) {
  MLIRContext *ctx = fn.getContext();
  RewritePatternSet patterns(ctx);
  populateLowerToLinalgPatterns(patterns);
  ConversionTarget target(*ctx);
  target.addIllegalDialect<LigerDialect>();
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
  return applyPartialConversion(fn, target, std::move(patterns));
}

FailureOr<SmallVector<Value>>
mlir::liger::cloneElementwiseBody(OpBuilder &b, Location loc, Block &body,
                                  ValueRange args, int64_t width,
                                  std::string &why) {
  IRMapping mapping;
  mapping.map(body.getArguments(), args);
  for (Operation &op : body.without_terminator()) {
    if (!isa<arith::ArithDialect, math::MathDialect>(op.getDialect()) ||
        op.getNumRegions() != 0) {
      why = ("'" + op.getName().getStringRef() +
             "' in a body is not elementwise arithmetic")
                .str();
      return failure();
    }
    if (width > 0) {
      if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
        auto type = VectorType::get({width}, cst.getType());
        mapping.map(cst.getResult(),
                    arith::ConstantOp::create(
                        b, loc, DenseElementsAttr::get(type, cst.getValue())));
        continue;
      }
    }
    OperationState state(loc, op.getName());
    for (Value operand : op.getOperands())
      state.addOperands(mapping.lookupOrDefault(operand));
    for (Type t : op.getResultTypes())
      state.addTypes(width > 0 ? Type(VectorType::get({width}, t)) : t);
    state.addAttributes(op.getAttrs());
    Operation *clone = b.create(state);
    mapping.map(op.getResults(), clone->getResults());
  }
  SmallVector<Value> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(mapping.lookupOrDefault(v));
  return results;
}
