//===- KernelAbi.cpp - the kernel ABI's names, shapes and rules ----------===//
//
// The spellings of the ABI's enumerations, the shape pattern of each
// parameter kind, grids and archs, and verifyManifest: every rule of the
// ABI, reached by the bundle writer before it writes and by the runtime
// after it reads (ManifestJson.cpp holds the JSON side, KernelArgs.cpp the
// launch-time rules).
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/KernelAbi.h"

#include "ManifestError.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

using namespace liger::runtime;

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

namespace {
template <typename E> struct Spelling {
  E value;
  const char *name;
};

constexpr Spelling<DType> kDTypes[] = {{DType::bf16, "bf16"},
                                       {DType::f16, "f16"},
                                       {DType::f32, "f32"},
                                       {DType::i32, "i32"},
                                       {DType::i64, "i64"}};
constexpr Spelling<ParamRole> kRoles[] = {{ParamRole::Input, "input"},
                                          {ParamRole::Output, "output"},
                                          {ParamRole::Workspace, "workspace"}};
constexpr Spelling<ParamKind> kKinds[] = {
    {ParamKind::Rows, "rows"},
    {ParamKind::RowScalars, "row_scalars"},
    {ParamKind::Feature, "feature"},
    {ParamKind::Scalar, "scalar"},
    {ParamKind::Heads, "heads"},
    {ParamKind::Tables, "tables"},
    {ParamKind::Partials, "partials"},
    {ParamKind::Matrix, "matrix"},
    {ParamKind::HeadScalars, "head_scalars"}};
constexpr Spelling<KernelTemplate> kTemplates[] = {
    {KernelTemplate::Rowwise, "rowwise"},
    {KernelTemplate::RoPE, "rope"},
    {KernelTemplate::CrossEntropy, "cross_entropy"},
    {KernelTemplate::Matmul, "matmul"},
    {KernelTemplate::Attention, "attention"}};
constexpr Spelling<LossStage> kStages[] = {{LossStage::Logits, "logits"},
                                           {LossStage::CE, "ce"},
                                           {LossStage::DX, "dx"},
                                           {LossStage::DW0, "dw0"},
                                           {LossStage::DW, "dw"}};
constexpr Spelling<LossPlanKind> kPlanKinds[] = {
    {LossPlanKind::FusedLinearCrossEntropy, "fused_linear_cross_entropy"}};

template <typename E, size_t N>
const char *nameOf(const Spelling<E> (&table)[N], E value) {
  for (const Spelling<E> &s : table)
    if (s.value == value)
      return s.name;
  return "?";
}

template <typename E, size_t N>
bool parseName(const Spelling<E> (&table)[N], std::string_view name, E *value) {
  for (const Spelling<E> &s : table)
    if (name == s.name) {
      *value = s.value;
      return true;
    }
  return false;
}
} // namespace

const char *liger::runtime::dtypeName(DType v) { return nameOf(kDTypes, v); }
const char *liger::runtime::roleName(ParamRole v) { return nameOf(kRoles, v); }
const char *liger::runtime::kindName(ParamKind v) { return nameOf(kKinds, v); }
const char *liger::runtime::templateName(KernelTemplate v) {
  return nameOf(kTemplates, v);
}
const char *liger::runtime::lossStageName(LossStage v) {
  return nameOf(kStages, v);
}
const char *liger::runtime::lossPlanKindName(LossPlanKind v) {
  return nameOf(kPlanKinds, v);
}
bool liger::runtime::parseDType(std::string_view n, DType *v) {
  return parseName(kDTypes, n, v);
}
bool liger::runtime::parseRole(std::string_view n, ParamRole *v) {
  return parseName(kRoles, n, v);
}
bool liger::runtime::parseKind(std::string_view n, ParamKind *v) {
  return parseName(kKinds, n, v);
}
bool liger::runtime::parseTemplate(std::string_view n, KernelTemplate *v) {
  return parseName(kTemplates, n, v);
}
bool liger::runtime::parseLossStage(std::string_view n, LossStage *v) {
  return parseName(kStages, n, v);
}
bool liger::runtime::parseLossPlanKind(std::string_view n, LossPlanKind *v) {
  return parseName(kPlanKinds, n, v);
}

size_t liger::runtime::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::bf16:
  case DType::f16:
    return 2;
  case DType::f32:
  case DType::i32:
    return 4;
  case DType::i64:
    return 8;
  }
  return 0;
}

int64_t liger::runtime::swizzleBytes(TensorMapSwizzle swizzle) {
  static const int64_t kSpan[] = {0, 32, 64, 128};
  return kSpan[static_cast<int>(swizzle)];
}

bool liger::runtime::parseSwizzleBytes(int64_t bytes,
                                       TensorMapSwizzle *swizzle) {
  for (TensorMapSwizzle s :
       {TensorMapSwizzle::B32, TensorMapSwizzle::B64, TensorMapSwizzle::B128})
    if (swizzleBytes(s) == bytes) {
      *swizzle = s;
      return true;
    }
  return false;
}

std::string liger::runtime::tensorMapBoxProblem(DType dtype, int64_t boxCols,
                                                TensorMapSwizzle swizzle) {
  int64_t bytes = boxCols * static_cast<int64_t>(dtypeSize(dtype));
  if (bytes % 16 != 0)
    return "the box's innermost size is " + std::to_string(bytes) +
           " bytes; it must be a multiple of 16";
  int64_t span = swizzleBytes(swizzle);
  if (span && bytes > span)
    return "the box's innermost size (" + std::to_string(bytes) +
           " bytes) exceeds the " + std::to_string(span) + "-byte swizzle span";
  return "";
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

Shape::Shape(std::initializer_list<int64_t> sizes) {
  (void)assign(sizes.begin(), sizes.size());
}

bool Shape::assign(const int64_t *sizes, size_t rank) {
  if (rank > kMaxRank) {
    rank_ = 0;
    return false;
  }
  std::copy(sizes, sizes + rank, sizes_);
  rank_ = rank;
  return true;
}

bool Shape::push_back(int64_t size) {
  if (rank_ == kMaxRank)
    return false;
  sizes_[rank_++] = size;
  return true;
}

int64_t Shape::elements() const {
  int64_t n = 1;
  for (int64_t d : *this)
    if (__builtin_mul_overflow(n, d, &n))
      return INT64_MAX; // a caller's sizes: more than any launch takes
  return n;
}

bool Shape::operator==(const Shape &other) const {
  return rank_ == other.rank_ && std::equal(begin(), end(), other.begin());
}

std::string liger::runtime::shapeString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool ShapeEntry::operator==(const ShapeEntry &other) const {
  if (!symbol || !other.symbol)
    return !symbol && !other.symbol && size == other.size;
  return std::strcmp(symbol, other.symbol) == 0;
}

namespace {
/// One entry of a kind's shape pattern.
enum class Tok { Rows, Ctas, Batch, Seq, Length, Outer, OneOrTableBatch };

/// A kind's shape pattern: at most four entries.
struct Pattern {
  const Tok *tokens;
  size_t size;
  const Tok *begin() const { return tokens; }
  const Tok *end() const { return tokens + size; }
};

/// The manifest shape of each kind, which is also the memref its kernels
/// take: the one place that says which sizes a kind has and where.
Pattern patternOf(ParamKind kind) {
  static constexpr Tok kRows[] = {Tok::Rows, Tok::Length};
  static constexpr Tok kRowScalars[] = {Tok::Rows};
  static constexpr Tok kFeature[] = {Tok::Length};
  static constexpr Tok kHeads[] = {Tok::Batch, Tok::Outer, Tok::Seq,
                                   Tok::Length};
  static constexpr Tok kHeadScalars[] = {Tok::Batch, Tok::Outer, Tok::Seq};
  static constexpr Tok kTables[] = {Tok::OneOrTableBatch, Tok::Seq,
                                    Tok::Length};
  static constexpr Tok kPartials[] = {Tok::Ctas, Tok::Length};
  static constexpr Tok kMatrix[] = {Tok::Outer, Tok::Length};
  switch (kind) {
  case ParamKind::Rows:
    return {kRows, 2};
  case ParamKind::RowScalars:
    return {kRowScalars, 1};
  case ParamKind::Feature:
    return {kFeature, 1};
  case ParamKind::Scalar:
    return {nullptr, 0};
  case ParamKind::Heads:
    return {kHeads, 4};
  case ParamKind::Tables:
    return {kTables, 3};
  case ParamKind::Partials:
    return {kPartials, 2};
  case ParamKind::Matrix:
    return {kMatrix, 2};
  case ParamKind::HeadScalars:
    return {kHeadScalars, 3};
  }
  return {nullptr, 0};
}

const char *symbolOf(Tok tok) {
  switch (tok) {
  case Tok::Rows:
    return "rows";
  case Tok::Ctas:
    return "ctas";
  case Tok::Batch:
    return "batch";
  case Tok::Seq:
    return "seq";
  case Tok::OneOrTableBatch:
    return "table_batch";
  case Tok::Length:
  case Tok::Outer:
    break;
  }
  return nullptr;
}

bool hasTok(ParamKind kind, Tok tok) {
  Pattern p = patternOf(kind);
  return std::find(p.begin(), p.end(), tok) != p.end();
}
} // namespace

std::vector<ShapeEntry> liger::runtime::manifestShape(const KernelParam &p) {
  std::vector<ShapeEntry> shape;
  for (Tok tok : patternOf(p.kind)) {
    if (tok == Tok::Length)
      shape.push_back({p.length, nullptr});
    else if (tok == Tok::Outer || (tok == Tok::OneOrTableBatch && p.outer))
      shape.push_back({p.outer, nullptr});
    else
      shape.push_back({0, symbolOf(tok)});
  }
  return shape;
}

std::string liger::runtime::shapePattern(ParamKind kind) {
  std::string text = "[";
  for (Tok tok : patternOf(kind)) {
    text += text.size() > 1 ? ", " : "";
    if (tok == Tok::Length)
      text += kind == ParamKind::Matrix                               ? "K"
              : kind == ParamKind::Heads || kind == ParamKind::Tables ? "D"
                                                                      : "H";
    else if (tok == Tok::Outer)
      text += kind == ParamKind::Matrix ? "N" : "heads";
    else if (tok == Tok::OneOrTableBatch)
      text += "1 or \"table_batch\"";
    else
      text += "\"" + std::string(symbolOf(tok)) + "\"";
  }
  return text + "]";
}

bool liger::runtime::paramSizesFromShape(ParamKind kind,
                                         const std::vector<ShapeEntry> &shape,
                                         int64_t *length, int64_t *outer) {
  Pattern pattern = patternOf(kind);
  if (shape.size() != pattern.size)
    return false;
  *length = 0;
  *outer = 0;
  for (size_t i = 0; i < pattern.size; ++i) {
    const ShapeEntry &e = shape[i];
    switch (pattern.tokens[i]) {
    case Tok::Length:
      if (e.symbol)
        return false;
      *length = e.size;
      break;
    case Tok::Outer:
      if (e.symbol)
        return false;
      *outer = e.size;
      break;
    case Tok::OneOrTableBatch:
      if (!e.symbol && e.size == 1)
        *outer = 1;
      else if (!e.symbol || std::strcmp(e.symbol, "table_batch") != 0)
        return false;
      break;
    default:
      if (!e.symbol || std::strcmp(e.symbol, symbolOf(pattern.tokens[i])) != 0)
        return false;
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Parameter passing
//===----------------------------------------------------------------------===//

size_t liger::runtime::descriptorWords(const KernelParam &param) {
  return 3 + 2 * patternOf(param.kind).size;
}

/// Writes the memref sizes of `param` for `arg` at `out`; returns the rank.
static size_t writeSizes(const KernelParam &param, const TensorArg &arg,
                         const LaunchDims &dims, int64_t *out) {
  Pattern pattern = patternOf(param.kind);
  for (size_t i = 0; i < pattern.size; ++i) {
    switch (pattern.tokens[i]) {
    case Tok::Rows:
      out[i] = dims.rows;
      break;
    case Tok::Ctas:
      out[i] = dims.ctas;
      break;
    case Tok::Length:
      out[i] = param.length;
      break;
    case Tok::Outer:
      out[i] = param.outer;
      break;
    case Tok::Batch:
    case Tok::Seq:
    case Tok::OneOrTableBatch:
      out[i] = arg.shape[i]; // checkArgs checked the rank
      break;
    }
  }
  return pattern.size;
}

Shape liger::runtime::memrefSizes(const KernelParam &param,
                                  const TensorArg &arg,
                                  const LaunchDims &dims) {
  int64_t sizes[kMaxRank];
  Shape shape;
  (void)shape.assign(sizes, writeSizes(param, arg, dims, sizes));
  return shape;
}

void liger::runtime::tensorMapGeometry(const KernelParam &param,
                                       const KernelTensorMap &map,
                                       const TensorArg &arg,
                                       const LaunchDims &dims, Shape *shape,
                                       Shape *box) {
  Shape sizes = memrefSizes(param, arg, dims);
  if (param.kind != ParamKind::Heads) {
    *shape = sizes; // [rows, K] or [N, K]
    *box = {map.boxRows, map.boxCols};
    return;
  }
  // [batch, heads, seq, D] with (batch, head) pairs as one dimension: each
  // box stays within one pair's [seq, D], the 2-D case once per pair. Only
  // a batch with no sequence can overflow; saturated (Shape::elements),
  // validation refuses it.
  *shape = {Shape{sizes[0], sizes[1]}.elements(), sizes[2], sizes[3]};
  *box = {1, map.boxRows, map.boxCols};
}

int64_t *liger::runtime::packDescriptor(const KernelParam &param,
                                        const TensorArg &arg,
                                        const LaunchDims &dims, int64_t *out) {
  auto ptr = static_cast<int64_t>(reinterpret_cast<intptr_t>(arg.data));
  out[0] = ptr; // allocated
  out[1] = ptr; // aligned
  out[2] = 0;   // offset
  int64_t *sizes = out + 3;
  size_t rank = writeSizes(param, arg, dims, sizes);
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    sizes[rank + i] = stride;
    stride *= sizes[i];
  }
  return sizes + 2 * rank;
}

//===----------------------------------------------------------------------===//
// Grids and archs
//===----------------------------------------------------------------------===//

bool GridDim::operator==(const GridDim &other) const {
  return kind == other.kind && value == other.value;
}

/// A positive decimal integer below 2^62, without sign or leading zeros.
static bool parsePositive(std::string_view text, int64_t *value) {
  if (text.empty() || text.size() > 18 || text[0] == '0' ||
      text.find_first_not_of("0123456789") != std::string_view::npos)
    return false;
  int64_t v = 0;
  for (char c : text)
    v = v * 10 + (c - '0');
  *value = v;
  return true;
}

bool liger::runtime::parseGridDim(std::string_view text, GridDim *dim) {
  int64_t value = 0;
  if (text == "rows" || text == "tokens" || text == "ctas" || text == "sms") {
    *dim = {text == "rows"     ? GridDim::Rows
            : text == "tokens" ? GridDim::Tokens
            : text == "ctas"   ? GridDim::Ctas
                               : GridDim::Sms,
            1};
    return true;
  }
  if (text.substr(0, 5) == "rows/" && parsePositive(text.substr(5), &value)) {
    *dim = {GridDim::Rows, value};
    return true;
  }
  if (parsePositive(text, &value)) {
    *dim = {GridDim::Const, value};
    return true;
  }
  return false;
}

std::string liger::runtime::gridDimText(const GridDim &dim) {
  switch (dim.kind) {
  case GridDim::Const:
    return std::to_string(dim.value);
  case GridDim::Rows:
    return dim.value == 1 ? "rows" : "rows/" + std::to_string(dim.value);
  case GridDim::Tokens:
    return "tokens";
  case GridDim::Ctas:
    return "ctas";
  case GridDim::Sms:
    return "sms";
  }
  return "?";
}

bool liger::runtime::parseArch(std::string_view name, Arch *arch) {
  if (name.substr(0, 3) != "sm_")
    return false;
  std::string_view digits = name.substr(3);
  bool specific = !digits.empty() && digits.back() == 'a';
  if (specific)
    digits.remove_suffix(1);
  int64_t value = 0;
  if (digits.size() < 2 || digits.size() > 3 || !parsePositive(digits, &value))
    return false;
  *arch = {static_cast<int>(value / 10), static_cast<int>(value % 10),
           specific};
  return true;
}

bool liger::runtime::archRunsOn(const Arch &arch, int major, int minor) {
  if (arch.archSpecific)
    return major == arch.major && minor == arch.minor;
  return major == arch.major && minor >= arch.minor;
}

//===----------------------------------------------------------------------===//
// The spec's helpers
//===----------------------------------------------------------------------===//

int KernelSpec::entryPoints(EntryPoint (&out)[kNumLaunchStages]) const {
  int n = 0;
  if (hasPrepare())
    out[n++] = {LaunchStage::Prepare, &prepare.name, prepare.block,
                prepare.dynamicSharedMemoryBytes};
  out[n++] = {LaunchStage::Main, &name, block, dynamicSharedMemoryBytes};
  if (hasNarrow())
    out[n++] = {LaunchStage::Narrow, &narrow.name, narrow.block,
                narrow.dynamicSharedMemoryBytes};
  if (hasFinish())
    out[n++] = {LaunchStage::Finish, &finish.name, finish.block,
                finish.dynamicSharedMemoryBytes};
  return n;
}

bool liger::runtime::chooseNarrow(int64_t ctas, int64_t narrowCtas,
                                  int64_t sms) {
  if (ctas < 1 || narrowCtas < 1 || sms < 1 || ctas > kMaxNarrowCtas ||
      narrowCtas > kMaxNarrowCtas)
    return false;
  auto waves = [&](int64_t n) { return (n + sms - 1) / sms; };
  // At most 2^30 CTAs each: the products stay below 2^63.
  return 3 * waves(narrowCtas) * ctas < 2 * waves(ctas) * narrowCtas;
}

bool KernelSpec::hasWorkspaces() const {
  return std::any_of(params.begin(), params.end(),
                     [](const KernelParam &p) { return p.isWorkspace(); });
}

size_t KernelSpec::numInputs() const {
  return std::count_if(params.begin(), params.end(),
                       [](const KernelParam &p) { return p.isInput(); });
}

size_t KernelSpec::numOutputs() const {
  return std::count_if(params.begin(), params.end(),
                       [](const KernelParam &p) { return p.isOutput(); });
}

bool LossPlan::hasGradient() const {
  for (LossStage s : {LossStage::DX, LossStage::DW0, LossStage::DW})
    if (!kernels[static_cast<int>(s)].empty())
      return true;
  return false;
}

//===----------------------------------------------------------------------===//
// verifyManifest
//===----------------------------------------------------------------------===//

namespace {
/// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or
/// code points past U+10FFFF).
bool isValidUtf8(const std::string &text) {
  size_t i = 0, n = text.size();
  while (i < n) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t extra;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      extra = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i <= extra)
      return false;
    for (size_t k = 1; k <= extra; ++k) {
      auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80)
        return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += extra + 1;
  }
  return true;
}

class Verifier {
public:
  explicit Verifier(const std::string &origin) : origin(origin) {}

  Status error(const std::string &path, const std::string &what) const {
    return manifestError(origin, path, what);
  }

  /// A string of the manifest: UTF-8 without NUL.
  Status text(const std::string &path, const char *field,
              const std::string &value) const {
    if (value.find('\0') != std::string::npos)
      return error(path, std::string(field) + " contains a NUL character");
    if (!isValidUtf8(value))
      return error(path, std::string(field) + " is not valid UTF-8");
    return Status::ok();
  }

  /// A name: text, and not empty.
  Status name(const std::string &path, const char *field,
              const std::string &value) const {
    if (value.empty())
      return error(path, std::string(field) + " is empty");
    return text(path, field, value);
  }

  /// A file of the bundle: a name without a directory.
  Status file(const std::string &path, const char *field,
              const std::string &value) const {
    LIGER_RETURN_IF_ERROR(name(path, field, value));
    if (value.find('/') != std::string::npos || value == "." || value == "..")
      return error(path, std::string(field) +
                             " must name a file in the bundle, got '" + value +
                             "'");
    return Status::ok();
  }

  Status block(const std::string &path, const int64_t (&b)[3]) const {
    bool ok = true;
    for (int64_t v : b)
      ok &= v >= 1 && v <= 1024;
    ok = ok && b[0] * b[1] * b[2] <= 1024; // each in range: no overflow
    if (!ok)
      return error(path, "block sizes must be in [1, 1024] with a product of "
                         "at most 1024, got [" +
                             std::to_string(b[0]) + ", " +
                             std::to_string(b[1]) + ", " +
                             std::to_string(b[2]) + "]");
    return Status::ok();
  }

  Status sharedMemory(const std::string &path, int64_t bytes) const {
    if (bytes < 0 || bytes > 0x7fffffff)
      return error(path, "dynamic_shared_memory_bytes must be in [0, 2^31), "
                         "got " +
                             std::to_string(bytes));
    return Status::ok();
  }

  Status param(const std::string &path, const KernelParam &p) const;
  Status kernel(const std::string &path, const KernelSpec &k) const;
  Status grid(const std::string &path, const GridDim (&dims)[3],
              bool anyPartials) const;
  Status tensorMaps(const std::string &path, const KernelSpec &k,
                    const std::vector<KernelTensorMap> &maps) const;
  /// A launch shape's rules (grid, block, shared memory, tensor maps of
  /// `k`'s parameters), the kernel's and its narrow variant's alike.
  Status launchShape(const std::string &path, const KernelSpec &k,
                     const LaunchShape &shape, bool partials) const {
    LIGER_RETURN_IF_ERROR(grid(path, shape.grid, partials));
    LIGER_RETURN_IF_ERROR(block(path, shape.block));
    LIGER_RETURN_IF_ERROR(sharedMemory(path, shape.dynamicSharedMemoryBytes));
    return tensorMaps(path, k, shape.tensorMaps);
  }
  Status narrow(const std::string &path, const KernelSpec &k) const;
  Status sideKernel(const std::string &path, const SideKernelSpec &k) const;
  Status plan(const std::string &path, const LossPlan &plan,
              const std::set<std::string> &kernels) const;

  std::string origin;
};

Status Verifier::param(const std::string &path, const KernelParam &p) const {
  LIGER_RETURN_IF_ERROR(name(path, "name", p.name));
  // A workspace is f32 scratch the launch zero-fills: partial reductions
  // per CTA, a [batch, heads, seq, D] accumulator (attention's dq), or
  // values and flags per row that CTAs of one launch hand each other (a
  // LoRA projection's x · Aᵀ).
  if (p.isWorkspace() &&
      ((p.kind != ParamKind::Partials && p.kind != ParamKind::Heads &&
        p.kind != ParamKind::Rows && p.kind != ParamKind::RowScalars) ||
       p.dtype != DType::f32))
    return error(path, std::string("a workspace is an f32 'partials', "
                                   "'heads', 'rows' or 'row_scalars' "
                                   "parameter, got ") +
                           dtypeName(p.dtype) + " '" + kindName(p.kind) + "'");
  if (p.kind == ParamKind::Partials && !p.isWorkspace())
    return error(path, std::string("a 'partials' parameter is a workspace, "
                                   "got an ") +
                           roleName(p.role));
  if (p.kind == ParamKind::Tables && !p.isInput())
    return error(path, "a 'tables' parameter is an input");
  std::string kind = std::string("a ") + kindName(p.kind) + " parameter";
  // Static sizes below 2^31: the products a launch forms from them (its
  // memref strides, with at most 2^31 - 1 rows) stay within 64 bits.
  auto inRange = [](int64_t size) { return size >= 1 && size <= 0x7fffffff; };
  bool hasLength = hasTok(p.kind, Tok::Length);
  if (hasLength && !inRange(p.length))
    return error(path, kind + " needs a static length in [1, 2^31), got " +
                           std::to_string(p.length));
  if (!hasLength && p.length != 0)
    return error(path, kind + " has no static length, got " +
                           std::to_string(p.length));
  if (hasTok(p.kind, Tok::Outer) && !inRange(p.outer))
    return error(path, kind + " needs a static " +
                           (p.kind == ParamKind::Matrix ? "N" : "head count") +
                           " in [1, 2^31), got " + std::to_string(p.outer));
  if (p.kind == ParamKind::Tables && p.outer != 0 && p.outer != 1)
    return error(path, "a tables parameter's batch is 1 (broadcast) or "
                       "'table_batch', got " +
                           std::to_string(p.outer));
  if (!hasTok(p.kind, Tok::Outer) && p.kind != ParamKind::Tables &&
      p.outer != 0)
    return error(path, kind + " has no static outer size, got " +
                           std::to_string(p.outer));
  return Status::ok();
}

Status Verifier::grid(const std::string &path, const GridDim (&dims)[3],
                      bool anyPartials) const {
  for (int i = 0; i < 3; ++i) {
    const GridDim &g = dims[i];
    std::string at = "grid[" + std::to_string(i) + "]";
    int64_t most = i ? 65535 : 0x7fffffff;
    if (g.kind == GridDim::Const && (g.value < 1 || g.value > most))
      return error(path, at + " is " + std::to_string(g.value) +
                             "; a grid size must be in [1, " +
                             std::to_string(most) + "]");
    if (g.kind == GridDim::Rows && g.value < 1)
      return error(path, at + " divides the rows by " +
                             std::to_string(g.value) +
                             "; the divisor must be at least 1");
    if (g.kind == GridDim::Ctas && !anyPartials)
      return error(path, at + " is 'ctas', but the kernel has no 'partials' "
                              "workspaces");
  }
  return Status::ok();
}

Status Verifier::tensorMaps(const std::string &path, const KernelSpec &k,
                            const std::vector<KernelTensorMap> &maps) const {
  for (size_t t = 0; t < maps.size(); ++t) {
    const KernelTensorMap &m = maps[t];
    std::string mpath = path + ".tensor_maps[" + std::to_string(t) + "]";
    if (m.param >= k.params.size())
      return error(mpath, "names parameter #" + std::to_string(m.param) +
                              " of a kernel with " +
                              std::to_string(k.params.size()));
    const KernelParam &p = k.params[m.param];
    if (p.kind != ParamKind::Rows && p.kind != ParamKind::Matrix &&
        p.kind != ParamKind::Heads)
      return error(mpath, "param '" + p.name +
                              "' is not a rows, matrix or heads parameter");
    if (m.boxRows < 1 || m.boxRows > 256 || m.boxCols < 1 || m.boxCols > 256)
      return error(mpath, "box must be [rows, cols], each in [1, 256], got [" +
                              std::to_string(m.boxRows) + ", " +
                              std::to_string(m.boxCols) + "]");
    if (m.swizzle == TensorMapSwizzle::None)
      return error(mpath, "swizzle must be 32, 64 or 128 bytes");
    std::string box = tensorMapBoxProblem(p.dtype, m.boxCols, m.swizzle);
    if (!box.empty())
      return error(mpath,
                   box + " (" + dtypeName(p.dtype) + " '" + p.name + "')");
  }
  return Status::ok();
}

Status Verifier::narrow(const std::string &path, const KernelSpec &k) const {
  const LaunchShape &n = k.narrow;
  LIGER_RETURN_IF_ERROR(name(path, "name", n.name));
  if (k.kernelTemplate != KernelTemplate::Matmul)
    return error(path, std::string("a narrow variant is for a matmul kernel, "
                                   "not a ") +
                           templateName(k.kernelTemplate) + " kernel");
  if (k.hasWorkspaces())
    return error(path, "a narrow variant is for a kernel without workspaces "
                       "(their sizes may follow the tile)");
  // The launch compares the two grids' CTAs: output tiles of a data-parallel
  // kernel, constants and row tiles.
  for (const GridDim &dim : k.grid)
    if (dim.kind != GridDim::Const && dim.kind != GridDim::Rows)
      return error(path, "a narrow variant's kernel has a grid of tiles "
                         "(constants and 'rows/N'), got '" +
                             gridDimText(dim) + "'");
  // It tiles what its kernel tiles: rows where the kernel has rows (so
  // its grid is one of tiles too).
  for (int i = 0; i < 3; ++i)
    if (n.grid[i].kind != k.grid[i].kind)
      return error(path, "grid[" + std::to_string(i) + "] is '" +
                             gridDimText(n.grid[i]) + "', the kernel's '" +
                             gridDimText(k.grid[i]) +
                             "': a narrow variant's grid has its kernel's "
                             "constants and row tiles in the same places");
  LIGER_RETURN_IF_ERROR(launchShape(path, k, n, false));
  // The same TMA descriptors in the same places: only the boxes differ.
  bool same = n.tensorMaps.size() == k.tensorMaps.size();
  for (size_t t = 0; same && t < n.tensorMaps.size(); ++t)
    same = n.tensorMaps[t].param == k.tensorMaps[t].param &&
           n.tensorMaps[t].swizzle == k.tensorMaps[t].swizzle &&
           n.tensorMaps[t].zeroFill == k.tensorMaps[t].zeroFill;
  if (!same)
    return error(path, "a narrow variant's tensor_maps are its kernel's "
                       "(the same parameters, swizzles and oob, in order); "
                       "only their boxes may differ");
  return Status::ok();
}

Status Verifier::kernel(const std::string &path, const KernelSpec &k) const {
  LIGER_RETURN_IF_ERROR(name(path, "name", k.name));
  LIGER_RETURN_IF_ERROR(name(path, "function", k.function));
  LIGER_RETURN_IF_ERROR(name(path, "ops", k.ops));
  std::map<std::string, size_t> names;
  bool countsRows = false, anyPartials = false, anyFinished = false;
  for (size_t i = 0; i < k.params.size(); ++i) {
    const KernelParam &p = k.params[i];
    std::string ppath = path + ".params[" + std::to_string(i) + "]";
    LIGER_RETURN_IF_ERROR(param(ppath, p));
    auto [it, fresh] = names.emplace(p.name, i);
    if (!fresh)
      return error(ppath, "parameter name '" + p.name + "' is also params[" +
                              std::to_string(it->second) + "]'s");
    if (i && p.role < k.params[i - 1].role)
      return error(ppath, std::string("an ") + roleName(p.role) +
                              " follows an " + roleName(k.params[i - 1].role) +
                              " (parameters are inputs, then outputs, then "
                              "workspaces)");
    countsRows |= p.kind == ParamKind::Rows ||
                  p.kind == ParamKind::RowScalars || p.kind == ParamKind::Heads;
    anyPartials |= p.kind == ParamKind::Partials;
    anyFinished |= p.isWorkspace() && (p.kind == ParamKind::Partials ||
                                       p.kind == ParamKind::Heads);
  }
  if (!countsRows)
    return error(path, "has no rows, row_scalars or heads parameter to count "
                       "its rows from");
  LIGER_RETURN_IF_ERROR(launchShape(path, k, k, anyPartials));
  if (k.vectorWidth < 1 || k.vectorWidth > 16 ||
      (k.vectorWidth & (k.vectorWidth - 1)))
    return error(path, "vector_width must be 1, 2, 4, 8 or 16, got " +
                           std::to_string(k.vectorWidth));
  if (k.alignmentBytes < 1 || k.alignmentBytes > 256 ||
      (k.alignmentBytes & (k.alignmentBytes - 1)))
    return error(path, "alignment_bytes must be a power of two in [1, 256], "
                       "got " +
                           std::to_string(k.alignmentBytes));
  if (k.hasNarrow())
    LIGER_RETURN_IF_ERROR(narrow(path + ".narrow", k));
  // Partial reductions and accumulators are read by a finishing kernel;
  // rows and row_scalars workspaces by the kernel's own CTAs.
  if (anyFinished != k.hasFinish())
    return error(path, "a kernel has a 'finish' kernel if and only if it has "
                       "a 'partials' or 'heads' workspace");
  if (!k.hasFinish()) {
    if (k.ctasPerSm != 0)
      return error(path, "ctas_per_sm is for a kernel with a 'finish' kernel");
    if (k.hasPrepare())
      return error(path,
                   "a 'prepare' kernel is for a kernel with a 'finish' kernel");
    return Status::ok();
  }
  if (k.ctasPerSm < 1 || k.ctasPerSm > 64)
    return error(path, "ctas_per_sm must be in [1, 64], got " +
                           std::to_string(k.ctasPerSm));
  if (k.hasPrepare())
    LIGER_RETURN_IF_ERROR(sideKernel(path + ".prepare", k.prepare));
  return sideKernel(path + ".finish", k.finish);
}

Status Verifier::sideKernel(const std::string &path,
                            const SideKernelSpec &k) const {
  LIGER_RETURN_IF_ERROR(name(path, "name", k.name));
  if (k.grid < 1 || k.grid > 0x7fffffff)
    return error(path, "grid must be [n, 1, 1] with n in [1, 2^31), got n = " +
                           std::to_string(k.grid));
  LIGER_RETURN_IF_ERROR(block(path, k.block));
  return sharedMemory(path, k.dynamicSharedMemoryBytes);
}

Status Verifier::plan(const std::string &path, const LossPlan &plan,
                      const std::set<std::string> &kernels) const {
  LIGER_RETURN_IF_ERROR(name(path, "function", plan.function));
  if (plan.chunkTokens < 1)
    return error(path, "chunk_tokens must be positive, got " +
                           std::to_string(plan.chunkTokens));
  if (plan.memoryBudget < 1)
    return error(path, "memory_budget must be positive, got " +
                           std::to_string(plan.memoryBudget));
  std::string stages;
  for (int s = 0; s < kNumLossStages; ++s) {
    const std::string &kernel = plan.kernels[s];
    if (kernel.empty())
      continue;
    const char *stage = lossStageName(static_cast<LossStage>(s));
    stages += (stages.empty() ? "" : ", ") + std::string(stage);
    if (!kernels.count(kernel))
      return error(path, std::string("kernels.") + stage + " names '" + kernel +
                             "', which is not a kernel of the bundle");
  }
  auto has = [&](LossStage s) {
    return !plan.kernels[static_cast<int>(s)].empty();
  };
  bool complete = has(LossStage::Logits) && has(LossStage::CE);
  if (plan.hasGradient())
    complete &= has(LossStage::DX) && has(LossStage::DW) &&
                has(LossStage::DW0) == !plan.dwF32;
  else
    complete &= !plan.dwF32;
  if (!complete)
    return error(path, "the kernels {" + stages + "}" +
                           (plan.dwF32 ? " with dw_f32" : "") +
                           " do not make a plan: a plan has logits and ce, "
                           "and with a gradient dx, dw and, unless dw_f32, "
                           "dw0");
  return Status::ok();
}
} // namespace

Status liger::runtime::verifyKernel(const KernelSpec &kernel,
                                    const std::string &origin,
                                    const std::string &path) {
  return Verifier(origin).kernel(path, kernel);
}

Status liger::runtime::verifyManifest(const Manifest &manifest,
                                      const std::string &origin) {
  Verifier v(origin);
  if (manifest.version != kManifestVersion)
    return v.error("manifest",
                   "version " + std::to_string(manifest.version) +
                       " is not supported (this runtime reads version " +
                       std::to_string(kManifestVersion) +
                       "; rebuild the bundle with this liger-compile)");
  LIGER_RETURN_IF_ERROR(v.text("manifest", "source", manifest.source));
  std::map<std::string, std::string> modules, names; // name -> where
  std::set<std::string> launchable; // the kernels, not their side kernels
  for (size_t m = 0; m < manifest.modules.size(); ++m) {
    const ModuleSpec &module = manifest.modules[m];
    std::string mpath = "modules[" + std::to_string(m) + "]";
    LIGER_RETURN_IF_ERROR(v.name(mpath, "name", module.name));
    auto [mit, mfresh] = modules.emplace(module.name, mpath);
    if (!mfresh)
      return v.error(mpath, "module name '" + module.name + "' is also " +
                                mit->second + "'s");
    Arch arch;
    if (!parseArch(module.arch, &arch))
      return v.error(mpath, "arch '" + module.arch +
                                "' is not a GPU arch (sm_<major><minor>, "
                                "optionally with 'a': sm_80, sm_90a)");
    LIGER_RETURN_IF_ERROR(v.file(mpath, "cubin", module.cubinFile));
    if (module.cubinSha256.size() != 64 ||
        module.cubinSha256.find_first_not_of("0123456789abcdef") !=
            std::string::npos)
      return v.error(mpath, "cubin_sha256 must be the cubin's SHA-256 as 64 "
                            "lowercase hexadecimal digits, got '" +
                                module.cubinSha256 + "'");
    LIGER_RETURN_IF_ERROR(v.file(mpath, "ptx", module.ptxFile));
    for (size_t k = 0; k < module.kernels.size(); ++k) {
      const KernelSpec &kernel = module.kernels[k];
      std::string kpath = mpath + ".kernels[" + std::to_string(k) + "]";
      LIGER_RETURN_IF_ERROR(v.kernel(kpath, kernel));
      for (auto [name, where] :
           {std::make_pair(&kernel.name, kpath),
            std::make_pair(&kernel.prepare.name, kpath + ".prepare"),
            std::make_pair(&kernel.narrow.name, kpath + ".narrow"),
            std::make_pair(&kernel.finish.name, kpath + ".finish")}) {
        if (name->empty())
          continue;
        auto [kit, kfresh] = names.emplace(*name, where);
        if (!kfresh)
          return v.error(where, "kernel name '" + *name + "' is also " +
                                    kit->second + "'s");
      }
      launchable.insert(kernel.name);
    }
  }
  for (size_t p = 0; p < manifest.plans.size(); ++p)
    LIGER_RETURN_IF_ERROR(v.plan("plans[" + std::to_string(p) + "]",
                                 manifest.plans[p], launchable));
  return Status::ok();
}
