//===- RoPEKernel.cpp - liger.rope / liger.rope_grad as a GPU kernel ------===//
//
// RoPE gathers (each element needs its rotate-half partner and a table row
// chosen by batch and position), which the row program does not do, so it
// has its own template: one CTA per token t of batch b; work item i is a
// head (of q, then of k) and a W-wide chunk c of the first half, and
// computes both halves:
//
//   rope:      out[c]     = x[c] cos[c]         - x[c + D/2] sin[c]
//              out[c+D/2] = x[c + D/2] cos[c+D/2] + x[c] sin[c+D/2]
//   rope_grad: out[c]     = g[c] cos[c]         + g[c + D/2] sin[c + D/2]
//              out[c+D/2] = g[c + D/2] cos[c+D/2] - g[c] sin[c]
//
// (docs/Reference/Semantics.md), f32 math, one rounding. The tables' batch
// is 1 (broadcast) or B, decided at run time.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/GpuBuilder.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::liger;
namespace rt = ::liger::runtime;

FailureOr<rt::KernelSpec> mlir::liger::buildRoPEKernel(FusionOp group,
                                                      gpu::GPUModuleOp module,
                                                      StringRef name) {
  Block &body = group.getBody().front();
  Operation *op = &body.front();
  bool inverse = isa<RoPEGradOp>(op);
  // The group is exactly the op; each of its operands (q, k, cos, sin) is
  // a group input, in any order, one input possibly read by several.
  if (!isa<RoPEOp, RoPEGradOp>(op) || op->getNextNode() != body.getTerminator())
    return group.emitOpError("cannot be lowered to a RoPE kernel: it must "
                             "hold one liger.rope or liger.rope_grad");
  if (!llvm::equal(group.getYield().getValues(), op->getResults()))
    return group.emitOpError("cannot be lowered to a RoPE kernel: it must "
                             "yield its op's two results in order");
  // The first operand that reads each group input (the group is isolated
  // and holds only the op: every operand is one of its inputs).
  SmallVector<int64_t> firstReader(body.getNumArguments(), -1);
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    unsigned arg = cast<BlockArgument>(operand).getArgNumber();
    if (firstReader[arg] < 0)
      firstReader[arg] = i;
  }
  for (auto [i, reader] : llvm::enumerate(firstReader))
    if (reader < 0)
      return group.emitOpError("cannot be lowered to a RoPE kernel: its input ")
             << i << " is not read by its op";
  auto qType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto kType = cast<RankedTensorType>(op->getOperand(1).getType());
  auto tType = cast<RankedTensorType>(op->getOperand(2).getType());
  Type elem = qType.getElementType();
  int64_t hq = qType.getDimSize(1), hkv = kType.getDimSize(1);
  int64_t d = qType.getDimSize(3), half = d / 2;
  int64_t bytes = std::max<unsigned>(1, elem.getIntOrFloatBitWidth() / 8);
  // A chunk and its partner half a head apart: the row program's rule over
  // the half head (one element where no wider vector divides it).
  int64_t width = selectRowVectorWidth(RowTemplate::RowProgram, half, elem);
  int64_t chunksPerHead = half / width;
  int64_t items = (hq + hkv) * chunksPerHead;
  int64_t threads = std::clamp<int64_t>((items + 31) / 32 * 32, 32, 256);

  MLIRContext *ctx = group.getContext();
  Location loc = group.getLoc();
  auto memrefOf = [](RankedTensorType t) {
    return MemRefType::get(t.getShape(), t.getElementType());
  };
  // The parameters: the group's inputs, then q's and k's outputs.
  SmallVector<Type> params;
  for (BlockArgument arg : body.getArguments())
    params.push_back(memrefOf(cast<RankedTensorType>(arg.getType())));
  params.push_back(memrefOf(qType));
  params.push_back(memrefOf(kType));
  GpuBuilder b(loc, OpBuilder(ctx));
  gpu::GPUFuncOp kernel = b.beginKernel(module, name, params, threads);
  Block &entry = kernel.getBody().front();
  auto paramOf = [&](unsigned operand) {
    return entry.getArgument(
        cast<BlockArgument>(op->getOperand(operand)).getArgNumber());
  };
  Value q = paramOf(0), k = paramOf(1);
  Value cosT = paramOf(2), sinT = paramOf(3);
  unsigned numInputs = body.getNumArguments();
  Value qOut = entry.getArgument(numInputs);
  Value kOut = entry.getArgument(numInputs + 1);
  Value tid = b.threadId();
  Value token = b.blockId(gpu::Dimension::x);
  Value seq = memref::DimOp::create(b, loc, q, 2);
  Value batch = arith::DivUIOp::create(b, loc, token, seq);
  Value pos = arith::RemUIOp::create(b, loc, token, seq);
  Value tableBatch = memref::DimOp::create(b, loc, cosT, 0);
  Value broadcast = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          tableBatch, b.index(1));
  Value tb = arith::SelectOp::create(b, loc, broadcast, b.index(0), batch);
  auto vecType = VectorType::get({width}, elem);
  auto f32Vec = VectorType::get({width}, b.getF32Type());
  llvm::MaybeAlign align(std::min<int64_t>(16, width * bytes));

  // Loop-invariant constants, created before the loop that uses them.
  Value cChunks = b.index(chunksPerHead), cWidth = b.index(width);
  Value cHalf = b.index(half), cHq = b.index(hq);
  auto loop = scf::ForOp::create(b, loc, tid, b.index(items), b.index(threads));
  {
    GpuBuilder lb = b.atStart(loop.getBody());
    Value item = loop.getInductionVar();
    Value head = arith::DivUIOp::create(lb, loc, item, cChunks);
    Value c = arith::MulIOp::create(
        lb, loc, arith::RemUIOp::create(lb, loc, item, cChunks), cWidth);
    Value c2 = arith::AddIOp::create(lb, loc, c, cHalf);
    Value isQ =
        arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, head, cHq);
    auto branch = scf::IfOp::create(lb, loc, isQ, /*withElseRegion=*/true);
    auto emit = [&](GpuBuilder nb, Value in, Value out, Value h) {
      auto ext = [&](Value v) -> Value {
        return v.getType() == f32Vec
                   ? v
                   : Value(arith::ExtFOp::create(nb, loc, f32Vec, v));
      };
      auto load = [&](Value m, ValueRange indices) {
        return ext(vector::LoadOp::create(nb, loc, vecType, m, indices,
                                          /*nontemporal=*/false, align));
      };
      Value x1 = load(in, {batch, h, pos, c});
      Value x2 = load(in, {batch, h, pos, c2});
      Value cos1 = load(cosT, {tb, pos, c}), cos2 = load(cosT, {tb, pos, c2});
      Value sin1 = load(sinT, {tb, pos, c}), sin2 = load(sinT, {tb, pos, c2});
      Value o1, o2;
      if (!inverse) {
        o1 = nb.ropeTerm(x1, cos1, x2, sin1, /*subtract=*/true);
        o2 = nb.ropeTerm(x2, cos2, x1, sin2, /*subtract=*/false);
      } else {
        o1 = nb.ropeTerm(x1, cos1, x2, sin2, /*subtract=*/false);
        o2 = nb.ropeTerm(x2, cos2, x1, sin1, /*subtract=*/true);
      }
      auto store = [&](Value v, ValueRange indices) {
        if (v.getType() != vecType)
          v = arith::TruncFOp::create(nb, loc, vecType, v);
        vector::StoreOp::create(nb, loc, v, out, indices,
                                /*nontemporal=*/false, align);
      };
      store(o1, {batch, h, pos, c});
      store(o2, {batch, h, pos, c2});
    };
    emit(lb.with(branch.getThenBodyBuilder()), q, qOut, head);
    GpuBuilder eb = lb.with(branch.getElseBodyBuilder());
    emit(eb, k, kOut, arith::SubIOp::create(eb, loc, head, cHq));
  }
  gpu::ReturnOp::create(b, loc);

  rt::KernelSpec info;
  info.name = name.str();
  info.kernelTemplate = rt::KernelTemplate::RoPE;
  info.block[0] = threads;
  info.vectorWidth = width;
  info.grid[0] = {rt::GridDim::Tokens, 1};
  info.ops = op->getName().getStringRef().str();
  auto headParam = [&](StringRef pname, rt::ParamRole role, int64_t heads) {
    return abiParam(pname.str(), role, rt::ParamKind::Heads, elem, d, heads);
  };
  // For a table, `outer` records a static batch of 1 (the kernel then always
  // reads table row 0); 0 means the batch is read at run time.
  int64_t staticTableBatch = tType.getDimSize(0) == 1 ? 1 : 0;
  // Each input takes its kind from the first operand that reads it.
  for (auto [i, reader] : llvm::enumerate(firstReader)) {
    std::string pname = "input" + std::to_string(i);
    if (reader < 2) {
      info.params.push_back(
          headParam(pname, rt::ParamRole::Input, reader == 0 ? hq : hkv));
      continue;
    }
    info.params.push_back(abiParam(pname, rt::ParamRole::Input,
                                   rt::ParamKind::Tables,
                                   tType.getElementType(), d, staticTableBatch));
  }
  info.params.push_back(headParam("output0", rt::ParamRole::Output, hq));
  info.params.push_back(headParam("output1", rt::ParamRole::Output, hkv));
  return info;
}
