//===- LigerKernelAttrs.cpp - kernel_config and kernel_info ---------------===//
//
// The verifiers of #liger.kernel_config and #liger.kernel_info, their
// conversions to and from the kernel ABI's records, and the printers and
// parsers of the ABI's enumerations (by the ABI's spelling table).
//
//===----------------------------------------------------------------------===//

#include "liger/Dialect/Liger/IR/LigerKernelAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::liger;
namespace rt = ::liger::runtime;

#include "liger/Dialect/Liger/IR/LigerKernelEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "liger/Dialect/Liger/IR/LigerKernelAttrs.cpp.inc"

/// The attribute among `Attrs` named `mnemonic`, parsed; none when none is.
template <typename... Attrs>
static std::optional<Attribute> parseOneOf(AsmParser &parser,
                                           StringRef mnemonic, Type type) {
  std::optional<Attribute> result;
  ((void)(!result && mnemonic == Attrs::getMnemonic() &&
          (result = Attrs::parse(parser, type), true)),
   ...);
  return result;
}

std::optional<Attribute>
mlir::liger::parseKernelAttribute(AsmParser &parser, StringRef mnemonic,
                                  Type type) {
  // The generated keyword switch reads the keyword itself, which the
  // dialect's parser has read already: dispatch on it here instead.
  (void)generatedAttributeParser;
  return parseOneOf<
#define GET_ATTRDEF_LIST
#include "liger/Dialect/Liger/IR/LigerKernelAttrs.cpp.inc"
      >(parser, mnemonic, type);
}

LogicalResult mlir::liger::printKernelAttribute(Attribute attr,
                                                AsmPrinter &printer) {
  return generatedAttributePrinter(attr, printer);
}

void LigerDialect::registerKernelAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "liger/Dialect/Liger/IR/LigerKernelAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// The ABI's enumerations, printed and parsed by its spellings
//===----------------------------------------------------------------------===//

AsmPrinter &rt::operator<<(AsmPrinter &printer, ParamRole role) {
  return printer << roleName(role);
}
AsmPrinter &rt::operator<<(AsmPrinter &printer, ParamKind kind) {
  return printer << kindName(kind);
}
AsmPrinter &rt::operator<<(AsmPrinter &printer, DType dtype) {
  return printer << dtypeName(dtype);
}
AsmPrinter &rt::operator<<(AsmPrinter &printer, KernelTemplate kernelTemplate) {
  return printer << templateName(kernelTemplate);
}
AsmPrinter &rt::operator<<(AsmPrinter &printer, TensorMapSwizzle swizzle) {
  return printer << swizzleBytes(swizzle);
}
AsmPrinter &rt::operator<<(AsmPrinter &printer, const GridDim &dim) {
  if (dim.kind == GridDim::Const)
    return printer << dim.value;
  return printer << '"' << gridDimText(dim) << '"';
}
llvm::hash_code rt::hash_value(const GridDim &dim) {
  return llvm::hash_combine(dim.kind, dim.value);
}

/// Parses a keyword spelt as `parse` reads it; `what` names it in the
/// message when it is not one.
template <typename E>
static FailureOr<E> parseSpelling(AsmParser &parser, bool (*parse)(std::string_view, E *),
                                  StringRef what) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  E value;
  if (!parse(std::string_view(keyword.data(), keyword.size()), &value))
    return parser.emitError(loc) << "unknown " << what << " '" << keyword
                                 << "'";
  return value;
}

FailureOr<rt::ParamRole> FieldParser<rt::ParamRole>::parse(AsmParser &parser) {
  return parseSpelling<rt::ParamRole>(parser, rt::parseRole, "parameter role");
}
FailureOr<rt::ParamKind> FieldParser<rt::ParamKind>::parse(AsmParser &parser) {
  return parseSpelling<rt::ParamKind>(parser, rt::parseKind, "parameter kind");
}
FailureOr<rt::KernelTemplate>
FieldParser<rt::KernelTemplate>::parse(AsmParser &parser) {
  return parseSpelling<rt::KernelTemplate>(parser, rt::parseTemplate,
                                           "kernel template");
}

std::optional<rt::DType> mlir::liger::abiDTypeOf(Type type) {
  std::string text;
  llvm::raw_string_ostream(text) << type;
  rt::DType dtype;
  if (!rt::parseDType(text, &dtype))
    return std::nullopt;
  return dtype;
}

FailureOr<rt::DType> FieldParser<rt::DType>::parse(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  Type type;
  if (parser.parseType(type))
    return failure();
  std::optional<rt::DType> dtype = abiDTypeOf(type);
  if (!dtype)
    return parser.emitError(loc)
           << "element type " << type
           << " is not one the kernel ABI carries (bf16, f16, f32, i32, i64)";
  return *dtype;
}

FailureOr<rt::TensorMapSwizzle>
FieldParser<rt::TensorMapSwizzle>::parse(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t bytes = 0;
  if (parser.parseInteger(bytes))
    return failure();
  rt::TensorMapSwizzle swizzle;
  if (!rt::parseSwizzleBytes(bytes, &swizzle))
    return parser.emitError(loc)
           << "a tensor map's swizzle is " << bytes
           << " bytes, not 32, 64 or 128";
  return swizzle;
}

FailureOr<rt::GridDim> FieldParser<rt::GridDim>::parse(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  rt::GridDim dim;
  int64_t size = 0;
  OptionalParseResult number = parser.parseOptionalInteger(size);
  if (number.has_value()) {
    if (failed(*number))
      return failure();
    dim.kind = rt::GridDim::Const;
    dim.value = size;
    return dim;
  }
  std::string text;
  if (parser.parseString(&text))
    return failure();
  if (!rt::parseGridDim(text, &dim) || dim.kind == rt::GridDim::Const)
    return parser.emitError(loc)
           << "unknown grid size \"" << text
           << "\" (an integer, or \"rows\", \"tokens\", \"ctas\", \"sms\", "
              "\"rows/N\")";
  return dim;
}

//===----------------------------------------------------------------------===//
// #liger.kernel_config
//===----------------------------------------------------------------------===//

LogicalResult KernelConfigAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, KernelTemplate kernelTemplate,
    std::optional<int64_t> threads, std::optional<int64_t> vectorWidth,
    std::optional<bool> reuseLoads, std::optional<int64_t> ctasPerSm,
    std::optional<int64_t> tileM, std::optional<int64_t> tileN,
    std::optional<int64_t> tileK, std::optional<int64_t> stages,
    std::optional<MatmulSchedule> schedule, std::optional<int64_t> cluster) {
  bool row = kernelTemplate == KernelTemplate::rowwise ||
             kernelTemplate == KernelTemplate::cross_entropy;
  bool matmul = kernelTemplate == KernelTemplate::matmul_wgmma ||
                kernelTemplate == KernelTemplate::matmul_mma_sync;
  bool attention = kernelTemplate == KernelTemplate::attention;
  // Each tunable, and the templates that take it.
  struct Tunable {
    StringRef name;
    bool present;
    bool taken;
  } tunables[] = {
      {"threads", threads.has_value(), row || matmul},
      {"vector_width", vectorWidth.has_value(), row},
      {"reuse_loads", reuseLoads.has_value(), row},
      {"ctas_per_sm", ctasPerSm.has_value(), row},
      {"tile_m", tileM.has_value(), matmul},
      {"tile_n", tileN.has_value(), matmul || attention},
      {"tile_k", tileK.has_value(), matmul},
      {"stages", stages.has_value(), matmul || attention},
      {"schedule", schedule.has_value(),
       kernelTemplate == KernelTemplate::matmul_wgmma},
      {"cluster", cluster.has_value(),
       kernelTemplate == KernelTemplate::matmul_wgmma ||
           kernelTemplate == KernelTemplate::rowwise},
  };
  for (const Tunable &t : tunables)
    if (t.present && !t.taken)
      return emitError() << "'" << t.name << "' is not a tunable of the "
                         << stringifyKernelTemplate(kernelTemplate)
                         << " template";
  if (row && (!threads || !vectorWidth))
    return emitError() << "the " << stringifyKernelTemplate(kernelTemplate)
                       << " template needs 'threads' and 'vector_width'";
  if (matmul && (!tileM || !tileN || !tileK || !stages))
    return emitError() << "the " << stringifyKernelTemplate(kernelTemplate)
                       << " template needs 'tile_m', 'tile_n', 'tile_k' and "
                          "'stages'";
  if (attention && (!tileN || !stages))
    return emitError() << "the attention template needs 'tile_n' and 'stages'";
  if (threads && (*threads < 32 || *threads > 1024 || *threads % 32))
    return emitError() << "'threads' must be a multiple of 32 in [32, 1024], "
                          "got "
                       << *threads;
  // A matmul's cluster shares a weight tile between two CTAs; a row
  // program's splits each row among its CTAs, at most the 8 of a portable
  // cluster.
  if (matmul && cluster && *cluster != 1 && *cluster != 2)
    return emitError() << "'cluster' must be 1 or 2, got " << *cluster;
  if (row && cluster &&
      (*cluster < 1 || *cluster > 8 || !llvm::isPowerOf2_64(*cluster)))
    return emitError() << "'cluster' of the rowwise template must be 1, 2, 4 "
                          "or 8, got "
                       << *cluster;
  if (ctasPerSm && (*ctasPerSm < 1 || *ctasPerSm > 64))
    return emitError() << "'ctas_per_sm' must be in [1, 64], got "
                       << *ctasPerSm;
  // An SM holds at most 2048 threads (sm_80 and sm_90): more CTAs than fit
  // would make ptxas drop the register bound and the grid run in waves.
  if (ctasPerSm && threads && *ctasPerSm * *threads > 2048)
    return emitError() << "'ctas_per_sm' (" << *ctasPerSm << ") CTAs of "
                       << *threads
                       << " threads exceed the 2048 threads an SM holds";
  return success();
}

//===----------------------------------------------------------------------===//
// #liger.kernel_info
//===----------------------------------------------------------------------===//

rt::KernelParam KernelParamAttr::toAbi() const {
  rt::KernelParam p;
  p.name = getName().str();
  p.role = getRole();
  p.kind = getKind();
  p.dtype = getDtype();
  p.length = getLength();
  p.outer = getOuter();
  return p;
}

/// The kernel ABI's spec of a kernel_info's fields, named `name` and
/// implementing a group of `function`: the one conversion, for the verifier
/// and for the bundle writer.
static rt::KernelSpec toSpec(StringRef name, StringRef function,
                             rt::KernelTemplate kernelTemplate, StringRef ops,
                             ArrayRef<rt::GridDim> grid, int64_t threads,
                             int64_t sharedMemoryBytes, int64_t vectorWidth,
                             ArrayRef<KernelParamAttr> params,
                             ArrayRef<TensorMapAttr> tensorMaps,
                             SideKernelAttr prepare, SideKernelAttr finish,
                             int64_t ctasPerSm, NarrowKernelAttr narrow) {
  // A launch shape, the kernel's and its narrow variant's alike.
  auto toShape = [](StringRef name, ArrayRef<rt::GridDim> grid, int64_t threads,
                    int64_t sharedMemoryBytes,
                    ArrayRef<TensorMapAttr> tensorMaps,
                    rt::LaunchShape &shape) {
    shape.name = name.str();
    for (auto [i, dim] : llvm::enumerate(grid.take_front(3)))
      shape.grid[i] = dim;
    shape.block[0] = threads;
    shape.dynamicSharedMemoryBytes = sharedMemoryBytes;
    for (TensorMapAttr m : tensorMaps) {
      rt::KernelTensorMap &map = shape.tensorMaps.emplace_back();
      map.param = static_cast<size_t>(m.getParam());
      map.boxRows = m.getBoxRows();
      map.boxCols = m.getBoxCols();
      map.swizzle = m.getSwizzle();
      map.zeroFill = m.getZeroFill();
    }
  };
  rt::KernelSpec spec;
  toShape(name, grid, threads, sharedMemoryBytes, tensorMaps, spec);
  spec.function = function.str();
  spec.ops = ops.str();
  spec.kernelTemplate = kernelTemplate;
  spec.vectorWidth = vectorWidth;
  spec.alignmentBytes = 16; // the templates' 16-byte vector accesses
  for (KernelParamAttr p : params)
    spec.params.push_back(p.toAbi());
  if (narrow)
    toShape(narrow.getName(), narrow.getGrid(), narrow.getThreads(),
            narrow.getSharedMemoryBytes(), narrow.getTensorMaps(), spec.narrow);
  for (auto [attr, side] : {std::make_pair(prepare, &spec.prepare),
                            std::make_pair(finish, &spec.finish)})
    if (attr) {
      side->name = attr.getName().str();
      side->grid = attr.getGrid();
      side->block[0] = attr.getThreads();
      side->dynamicSharedMemoryBytes = attr.getSharedMemoryBytes();
    }
  spec.ctasPerSm = ctasPerSm;
  return spec;
}

LogicalResult KernelInfoAttr::verify(
    function_ref<InFlightDiagnostic()> emitError,
    rt::KernelTemplate kernelTemplate, StringRef ops,
    ArrayRef<rt::GridDim> grid, int64_t threads, int64_t sharedMemoryBytes,
    int64_t vectorWidth, ArrayRef<KernelParamAttr> params,
    ArrayRef<TensorMapAttr> tensorMaps, SideKernelAttr prepare,
    SideKernelAttr finish, int64_t ctasPerSm, NarrowKernelAttr narrow) {
  if (grid.size() != 3)
    return emitError() << "liger.kernel_info: the grid has 3 entries, got "
                       << grid.size();
  if (narrow && narrow.getGrid().size() != 3)
    return emitError() << "liger.kernel_info: the narrow variant's grid has "
                          "3 entries, got "
                       << narrow.getGrid().size();
  for (auto [what, maps] : {std::make_pair("tensor_maps", tensorMaps),
                            std::make_pair("narrow.tensor_maps",
                                           narrow ? narrow.getTensorMaps()
                                                  : ArrayRef<TensorMapAttr>())})
    for (auto [i, m] : llvm::enumerate(maps))
      if (m.getParam() < 0)
        return emitError() << "liger.kernel_info: " << what << "[" << i
                           << "] names parameter #" << m.getParam();
  // The runtime's own rules for a kernel of a manifest; the name and
  // function are the bundle writer's to add.
  rt::Status status =
      rt::verifyKernel(toSpec("kernel", "function", kernelTemplate, ops, grid,
                              threads, sharedMemoryBytes, vectorWidth, params,
                              tensorMaps, prepare, finish, ctasPerSm, narrow),
                       "liger.kernel_info", "kernel");
  if (!status.isOk())
    return emitError() << status.message();
  return success();
}

KernelInfoAttr KernelInfoAttr::get(MLIRContext *ctx,
                                   const rt::KernelSpec &spec) {
  Builder b(ctx);
  SmallVector<KernelParamAttr> params;
  for (const rt::KernelParam &p : spec.params)
    params.push_back(KernelParamAttr::get(ctx, p.name, p.role, p.kind,
                                          p.dtype, p.length, p.outer));
  auto mapsOf = [&](const std::vector<rt::KernelTensorMap> &list) {
    SmallVector<TensorMapAttr> maps;
    for (const rt::KernelTensorMap &m : list)
      maps.push_back(TensorMapAttr::get(ctx, static_cast<int64_t>(m.param),
                                        m.boxRows, m.boxCols, m.swizzle,
                                        m.zeroFill));
    return maps;
  };
  SmallVector<TensorMapAttr> maps = mapsOf(spec.tensorMaps);
  NarrowKernelAttr narrow;
  if (spec.hasNarrow())
    narrow = NarrowKernelAttr::get(
        ctx, spec.narrow.name, ArrayRef<rt::GridDim>(spec.narrow.grid),
        spec.narrow.block[0], spec.narrow.dynamicSharedMemoryBytes,
        mapsOf(spec.narrow.tensorMaps));
  auto side = [&](const rt::SideKernelSpec &k) {
    return k.name.empty() ? SideKernelAttr()
                          : SideKernelAttr::get(ctx, k.name, k.grid, k.block[0],
                                                k.dynamicSharedMemoryBytes);
  };
  return get(ctx, spec.kernelTemplate, spec.ops,
             ArrayRef<rt::GridDim>(spec.grid), spec.block[0],
             spec.dynamicSharedMemoryBytes, spec.vectorWidth, params, maps,
             side(spec.prepare), side(spec.finish), spec.ctasPerSm, narrow);
}

rt::KernelSpec KernelInfoAttr::toKernelSpec(StringRef name,
                                            StringRef function) const {
  return toSpec(name, function, getKernelTemplate(), getOps(), getGrid(),
                getThreads(), getSharedMemoryBytes(), getVectorWidth(),
                getParams(), getTensorMaps(), getPrepare(), getFinish(),
                getCtasPerSm(), getNarrow());
}
