//===- Bundle.cpp - load kernel bundles and launch their kernels ----------===//

#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/TensorMap.h"

#include "Json.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace liger::runtime;

bool liger::runtime::parseDType(const std::string &name, DType *dtype) {
  static const std::pair<const char *, DType> kNames[] = {{"bf16", DType::bf16},
                                                          {"f16", DType::f16},
                                                          {"f32", DType::f32},
                                                          {"i32", DType::i32},
                                                          {"i64", DType::i64}};
  for (auto &[n, d] : kNames)
    if (name == n) {
      *dtype = d;
      return true;
    }
  return false;
}

const char *liger::runtime::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::bf16:
    return "bf16";
  case DType::f16:
    return "f16";
  case DType::f32:
    return "f32";
  case DType::i32:
    return "i32";
  case DType::i64:
    return "i64";
  }
  return "?";
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

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

namespace {
/// Reads fields of a JSON object, naming the path in errors.
class Reader {
public:
  Reader(const std::string &origin) : origin(origin) {}

  Status error(const std::string &path, const std::string &what) const {
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             origin + ": " + path + ": " + what);
  }
  Status string(const json::Value &v, const std::string &key,
                const std::string &path, std::string *out) const {
    const json::Value *f = v.get(key);
    if (!f || f->kind != json::Value::String)
      return error(path, "expected a string '" + key + "'");
    *out = f->string;
    return Status::ok();
  }
  Status integer(const json::Value &v, const std::string &key,
                 const std::string &path, int64_t *out) const {
    const json::Value *f = v.get(key);
    if (!f || f->kind != json::Value::Number ||
        f->number != std::floor(f->number))
      return error(path, "expected an integer '" + key + "'");
    *out = static_cast<int64_t>(f->number);
    return Status::ok();
  }
  Status array(const json::Value &v, const std::string &key,
               const std::string &path, const json::Value **out) const {
    const json::Value *f = v.get(key);
    if (!f || f->kind != json::Value::Array)
      return error(path, "expected an array '" + key + "'");
    *out = f;
    return Status::ok();
  }

  std::string origin;
};

Status parseParam(const Reader &r, const json::Value &v,
                  const std::string &path, KernelParam *param) {
  std::string role, kind, dtype;
  LIGER_RETURN_IF_ERROR(r.string(v, "name", path, &param->name));
  LIGER_RETURN_IF_ERROR(r.string(v, "role", path, &role));
  LIGER_RETURN_IF_ERROR(r.string(v, "kind", path, &kind));
  LIGER_RETURN_IF_ERROR(r.string(v, "dtype", path, &dtype));
  if (role != "input" && role != "output" && role != "workspace")
    return r.error(path, "role must be input, output or workspace, got '" +
                             role + "'");
  param->isOutput = role == "output";
  param->isWorkspace = role == "workspace";
  if (kind == "rows")
    param->kind = ParamKind::Rows;
  else if (kind == "row_scalars")
    param->kind = ParamKind::RowScalars;
  else if (kind == "feature")
    param->kind = ParamKind::Feature;
  else if (kind == "scalar")
    param->kind = ParamKind::Scalar;
  else if (kind == "heads")
    param->kind = ParamKind::Heads;
  else if (kind == "tables")
    param->kind = ParamKind::Tables;
  else if (kind == "partials")
    param->kind = ParamKind::Partials;
  else if (kind == "matrix")
    param->kind = ParamKind::Matrix;
  else
    return r.error(path, "unknown kind '" + kind + "'");
  if (!parseDType(dtype, &param->dtype))
    return r.error(path, "unknown dtype '" + dtype + "'");
  if (param->isWorkspace != (param->kind == ParamKind::Partials) ||
      (param->isWorkspace && param->dtype != DType::f32))
    return r.error(path, "a workspace is an f32 'partials' parameter, and "
                         "only a workspace is");
  const json::Value *shape = nullptr;
  LIGER_RETURN_IF_ERROR(r.array(v, "shape", path, &shape));
  if (!shape->array.empty() && shape->array.back().kind == json::Value::Number)
    param->length = static_cast<int64_t>(shape->array.back().number);
  if (param->kind != ParamKind::RowScalars &&
      param->kind != ParamKind::Scalar && param->length <= 0)
    return r.error(path, "expected a positive static length in 'shape'");
  if (param->kind == ParamKind::Matrix) {
    if (shape->array.size() != 2 ||
        shape->array[0].kind != json::Value::Number ||
        shape->array[0].number < 1)
      return r.error(path, "a matrix parameter has a static shape [N, K]");
    param->heads = static_cast<int64_t>(shape->array[0].number); // N
  }
  if (param->kind == ParamKind::Heads) {
    if (shape->array.size() != 4 ||
        shape->array[1].kind != json::Value::Number ||
        shape->array[1].number < 1)
      return r.error(path, "a heads parameter has shape [batch, heads, seq, "
                           "D] with a static head count");
    param->heads = static_cast<int64_t>(shape->array[1].number);
  }
  // A table compiled for a broadcast batch has shape [1, seq, D].
  if (param->kind == ParamKind::Tables && !shape->array.empty() &&
      shape->array[0].kind == json::Value::Number)
    param->heads = static_cast<int64_t>(shape->array[0].number);
  return Status::ok();
}
} // namespace

Status liger::runtime::parseManifest(const std::string &text,
                                     const std::string &origin,
                                     Manifest *manifest) {
  json::Value root;
  std::string error;
  if (!json::parse(text, &root, &error))
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             origin + ": malformed JSON: " + error);
  Reader r(origin);
  std::string format;
  LIGER_RETURN_IF_ERROR(r.string(root, "format", "manifest", &format));
  if (format != "liger-bundle")
    return r.error("manifest",
                   "format is '" + format + "', expected 'liger-bundle'");
  int64_t version = 0;
  LIGER_RETURN_IF_ERROR(r.integer(root, "version", "manifest", &version));
  if (version != 1)
    return r.error("manifest", "version " + std::to_string(version) +
                                   " is not supported (this runtime reads "
                                   "version 1; rebuild the bundle)");
  manifest->version = static_cast<int>(version);
  const json::Value *modules = nullptr;
  LIGER_RETURN_IF_ERROR(r.array(root, "modules", "manifest", &modules));
  for (size_t m = 0; m < modules->array.size(); ++m) {
    const json::Value &mv = modules->array[m];
    std::string mpath = "modules[" + std::to_string(m) + "]";
    ModuleSpec module;
    LIGER_RETURN_IF_ERROR(r.string(mv, "name", mpath, &module.name));
    LIGER_RETURN_IF_ERROR(r.string(mv, "arch", mpath, &module.arch));
    LIGER_RETURN_IF_ERROR(r.string(mv, "cubin", mpath, &module.cubinFile));
    if (module.cubinFile.find('/') != std::string::npos ||
        module.cubinFile.find("..") != std::string::npos)
      return r.error(mpath, "cubin must name a file in the bundle, got '" +
                                module.cubinFile + "'");
    const json::Value *kernels = nullptr;
    LIGER_RETURN_IF_ERROR(r.array(mv, "kernels", mpath, &kernels));
    for (size_t k = 0; k < kernels->array.size(); ++k) {
      const json::Value &kv = kernels->array[k];
      std::string kpath = mpath + ".kernels[" + std::to_string(k) + "]";
      KernelSpec kernel;
      std::string abi;
      LIGER_RETURN_IF_ERROR(r.string(kv, "name", kpath, &kernel.name));
      LIGER_RETURN_IF_ERROR(r.string(kv, "abi", kpath, &abi));
      if (abi != "memref-descriptor")
        return r.error(kpath, "unknown abi '" + abi + "'");
      (void)r.string(kv, "ops", kpath, &kernel.ops);
      const json::Value *grid = nullptr;
      LIGER_RETURN_IF_ERROR(r.array(kv, "grid", kpath, &grid));
      if (grid->array.size() != 3)
        return r.error(kpath, "grid must have 3 entries");
      for (int i = 0; i < 3; ++i) {
        const json::Value &g = grid->array[i];
        GridDim &dim = kernel.grid[i];
        if (g.kind == json::Value::Number) {
          if (g.number < 1 || g.number > 0x7fffffff ||
              g.number != std::floor(g.number))
            return r.error(kpath, "grid sizes must be integers in [1, 2^31)");
          dim = {GridDim::Const, static_cast<int64_t>(g.number)};
          continue;
        }
        std::string text = g.kind == json::Value::String ? g.string : "?";
        if (text == "rows" || text == "tokens") {
          dim = {GridDim::Rows, 1};
        } else if (text == "ctas") {
          dim = {GridDim::Ctas, 1};
        } else if (text.rfind("rows/", 0) == 0 && text.size() > 5 &&
                   text.size() < 12 &&
                   text.find_first_not_of("0123456789", 5) ==
                       std::string::npos &&
                   std::stoll(text.substr(5)) >= 1) {
          dim = {GridDim::Rows, std::stoll(text.substr(5))};
        } else {
          return r.error(kpath, "unknown grid size '" + text +
                                    "' (an integer, rows, tokens, ctas or "
                                    "rows/N)");
        }
      }
      const json::Value *block = nullptr;
      LIGER_RETURN_IF_ERROR(r.array(kv, "block", kpath, &block));
      if (block->array.size() != 3)
        return r.error(kpath, "block must have 3 entries");
      for (int i = 0; i < 3; ++i) {
        const json::Value &b = block->array[i];
        if (b.kind != json::Value::Number || b.number < 1 || b.number > 1024)
          return r.error(kpath, "block sizes must be integers in [1, 1024]");
        kernel.block[i] = static_cast<int>(b.number);
      }
      int64_t smem = 0, align = 16;
      LIGER_RETURN_IF_ERROR(
          r.integer(kv, "dynamic_shared_memory_bytes", kpath, &smem));
      if (smem < 0 || smem > 227 * 1024)
        return r.error(kpath, "dynamic_shared_memory_bytes out of range");
      kernel.dynamicSharedMemoryBytes = static_cast<int>(smem);
      (void)r.integer(kv, "alignment_bytes", kpath, &align);
      kernel.alignmentBytes = static_cast<int>(align);
      if (const json::Value *finish = kv.get("finish")) {
        std::string fpath = kpath + ".finish";
        if (finish->kind != json::Value::Object)
          return r.error(fpath, "expected an object");
        LIGER_RETURN_IF_ERROR(
            r.string(*finish, "name", fpath, &kernel.finish.name));
        const json::Value *grid = nullptr, *fblock = nullptr;
        LIGER_RETURN_IF_ERROR(r.array(*finish, "grid", fpath, &grid));
        LIGER_RETURN_IF_ERROR(r.array(*finish, "block", fpath, &fblock));
        if (grid->array.size() != 3 || fblock->array.size() != 3)
          return r.error(fpath, "grid and block must have 3 entries");
        for (int i = 0; i < 3; ++i) {
          const json::Value &g = grid->array[i], &b = fblock->array[i];
          if (g.kind != json::Value::Number || g.number < 1 ||
              g.number > (i ? 1 : 0x7fffffff) || b.kind != json::Value::Number ||
              b.number < 1 || b.number > 1024)
            return r.error(fpath, "grid must be [n, 1, 1] and block sizes "
                                  "integers in [1, 1024]");
          kernel.finish.block[i] = static_cast<int>(b.number);
        }
        kernel.finish.grid = static_cast<int>(grid->array[0].number);
        int64_t fsmem = 0, ctasPerSm = 0;
        LIGER_RETURN_IF_ERROR(
            r.integer(*finish, "dynamic_shared_memory_bytes", fpath, &fsmem));
        if (fsmem < 0 || fsmem > 227 * 1024)
          return r.error(fpath, "dynamic_shared_memory_bytes out of range");
        kernel.finish.dynamicSharedMemoryBytes = static_cast<int>(fsmem);
        LIGER_RETURN_IF_ERROR(
            r.integer(kv, "ctas_per_sm", kpath, &ctasPerSm));
        if (ctasPerSm < 1 || ctasPerSm > 64)
          return r.error(kpath, "ctas_per_sm must be in [1, 64]");
        kernel.ctasPerSm = static_cast<int>(ctasPerSm);
      }
      const json::Value *params = nullptr;
      LIGER_RETURN_IF_ERROR(r.array(kv, "params", kpath, &params));
      for (size_t p = 0; p < params->array.size(); ++p) {
        KernelParam param;
        LIGER_RETURN_IF_ERROR(
            parseParam(r, params->array[p],
                       kpath + ".params[" + std::to_string(p) + "]", &param));
        kernel.params.push_back(param);
      }
      if (const json::Value *maps = kv.get("tensor_maps")) {
        std::string tpath = kpath + ".tensor_maps";
        if (maps->kind != json::Value::Array)
          return r.error(tpath, "expected an array");
        for (size_t t = 0; t < maps->array.size(); ++t) {
          const json::Value &mv = maps->array[t];
          std::string mp = tpath + "[" + std::to_string(t) + "]";
          std::string param;
          int64_t swizzle = 0;
          const json::Value *box = nullptr;
          LIGER_RETURN_IF_ERROR(r.string(mv, "param", mp, &param));
          LIGER_RETURN_IF_ERROR(r.array(mv, "box", mp, &box));
          LIGER_RETURN_IF_ERROR(r.integer(mv, "swizzle", mp, &swizzle));
          KernelTensorMap map;
          auto it = std::find_if(
              kernel.params.begin(), kernel.params.end(),
              [&](const KernelParam &p) { return p.name == param; });
          if (it == kernel.params.end() ||
              (it->kind != ParamKind::Rows && it->kind != ParamKind::Matrix))
            return r.error(mp, "param '" + param + "' is not a rows or matrix "
                                                   "parameter of the kernel");
          map.param = static_cast<size_t>(it - kernel.params.begin());
          if (box->array.size() != 2 ||
              box->array[0].kind != json::Value::Number ||
              box->array[1].kind != json::Value::Number ||
              box->array[0].number < 1 || box->array[0].number > 256 ||
              box->array[1].number < 1 || box->array[1].number > 256)
            return r.error(mp, "box must be [rows, cols], each in [1, 256]");
          map.boxRows = static_cast<int64_t>(box->array[0].number);
          map.boxCols = static_cast<int64_t>(box->array[1].number);
          if (swizzle != 32 && swizzle != 64 && swizzle != 128)
            return r.error(mp, "swizzle " + std::to_string(swizzle) +
                                   " is not supported (32, 64 or 128)");
          map.swizzleBytes = static_cast<int>(swizzle);
          kernel.tensorMaps.push_back(map);
        }
      }
      bool anyWorkspace = false;
      for (const KernelParam &p : kernel.params)
        anyWorkspace |= p.isWorkspace;
      if (anyWorkspace != kernel.hasWorkspaces())
        return r.error(kpath, "a kernel has workspaces if and only if it has "
                              "a 'finish' kernel");
      module.kernels.push_back(std::move(kernel));
    }
    manifest->modules.push_back(std::move(module));
  }
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Bundle
//===----------------------------------------------------------------------===//

static Status readFile(const std::string &path, std::string *out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return LIGER_MAKE_STATUS(StatusCode::kNotFound, "cannot read " + path +
                                                        ": " +
                                                        std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return Status::ok();
}

Status Bundle::open(const std::string &dir, std::unique_ptr<Bundle> *out) {
  std::unique_ptr<Bundle> bundle(new Bundle());
  bundle->dir_ = dir;
  std::string text;
  LIGER_RETURN_IF_ERROR(readFile(dir + "/manifest.json", &text));
  LIGER_RETURN_IF_ERROR(
      parseManifest(text, dir + "/manifest.json", &bundle->manifest_));
  for (const ModuleSpec &module : bundle->manifest_.modules) {
    std::string bytes;
    LIGER_RETURN_IF_ERROR(readFile(dir + "/" + module.cubinFile, &bytes));
    // A cubin is an ELF file.
    if (bytes.size() < 64 || bytes.compare(0, 4,
                                           "\x7f"
                                           "ELF") != 0)
      return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                               dir + "/" + module.cubinFile +
                                   " is not a cubin (no ELF header); the "
                                   "bundle is truncated or corrupt");
    bundle->cubins_[module.name].assign(bytes.begin(), bytes.end());
  }
  *out = std::move(bundle);
  return Status::ok();
}

const KernelSpec *Bundle::findKernel(const std::string &name) const {
  for (const ModuleSpec &module : manifest_.modules)
    for (const KernelSpec &kernel : module.kernels)
      if (kernel.name == name)
        return &kernel;
  return nullptr;
}

static std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status Bundle::checkArgs(const KernelSpec &kernel,
                         const std::vector<TensorArg> &args, int64_t *rowsOut,
                         int64_t *ctasOut) const {
  auto invalid = [&](const std::string &what) {
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             "kernel '" + kernel.name + "': " + what);
  };
  if (args.size() != kernel.params.size())
    return invalid("expects " + std::to_string(kernel.params.size()) +
                   (kernel.hasWorkspaces()
                        ? " tensors (inputs, outputs, then workspaces), got "
                        : " tensors (inputs then outputs), got ") +
                   std::to_string(args.size()));
  int64_t rows = -1;
  // RoPE-style kernels: [B, heads, T, D] tensors share B and T; the grid is
  // one CTA per token.
  int64_t batch = -1, seq = -1;
  // Workspaces: [ctas, H] f32, one ctas for all.
  int64_t ctas = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelParam &p = kernel.params[i];
    const TensorArg &a = args[i];
    std::string name = "'" + p.name + "' (#" + std::to_string(i) + ")";
    if (p.kind == ParamKind::Heads) {
      if (a.shape.size() != 4 || a.shape[1] != p.heads ||
          a.shape[3] != p.length)
        return invalid(name + " must have shape [batch, " +
                       std::to_string(p.heads) + ", seq, " +
                       std::to_string(p.length) + "], got " +
                       shapeString(a.shape));
      if (batch < 0) {
        batch = a.shape[0];
        seq = a.shape[2];
      } else if (a.shape[0] != batch || a.shape[2] != seq) {
        return invalid(name + " has batch and sequence " +
                       shapeString(a.shape) + ", the earlier tensors " +
                       std::to_string(batch) + " and " + std::to_string(seq));
      }
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelParam &p = kernel.params[i];
    const TensorArg &a = args[i];
    std::string name = "'" + p.name + "' (#" + std::to_string(i) + ")";
    if (a.dtype != p.dtype)
      return invalid(name + " must be " + dtypeName(p.dtype) + ", got " +
                     dtypeName(a.dtype));
    int64_t elements = 1;
    for (int64_t d : a.shape)
      elements *= d;
    if (!a.data && elements != 0)
      return invalid(name + " is a null pointer");
    if (reinterpret_cast<uintptr_t>(a.data) % kernel.alignmentBytes != 0)
      return invalid(name + " must be " +
                     std::to_string(kernel.alignmentBytes) +
                     "-byte aligned (the kernel uses vector loads)");
    int64_t leading = 1;
    switch (p.kind) {
    case ParamKind::Rows:
      if (a.shape.empty() || a.shape.back() != p.length)
        return invalid(name + " must have " + std::to_string(p.length) +
                       " elements in its last dimension, got shape " +
                       shapeString(a.shape));
      for (size_t d = 0; d + 1 < a.shape.size(); ++d)
        leading *= a.shape[d];
      break;
    case ParamKind::RowScalars:
      for (int64_t d : a.shape)
        leading *= d;
      break;
    case ParamKind::Feature:
      if (a.shape.size() != 1 || a.shape[0] != p.length)
        return invalid(name + " must have shape [" + std::to_string(p.length) +
                       "], got " + shapeString(a.shape));
      continue;
    case ParamKind::Scalar:
      if (!a.shape.empty())
        return invalid(name + " must be a scalar, got shape " +
                       shapeString(a.shape));
      continue;
    case ParamKind::Heads:
      continue; // checked above
    case ParamKind::Matrix:
      if (a.shape.size() != 2 || a.shape[0] != p.heads ||
          a.shape[1] != p.length)
        return invalid(name + " must have shape [" + std::to_string(p.heads) +
                       ", " + std::to_string(p.length) + "], got " +
                       shapeString(a.shape));
      continue;
    case ParamKind::Partials:
      if (a.shape.size() != 2 || a.shape[1] != p.length || a.shape[0] < 1 ||
          a.shape[0] > 0x7fffffff)
        return invalid(name + " (a workspace) must have shape [ctas, " +
                       std::to_string(p.length) + "] with ctas >= 1, got " +
                       shapeString(a.shape));
      if (ctas >= 0 && a.shape[0] != ctas)
        return invalid(name + " has " + std::to_string(a.shape[0]) +
                       " CTA rows, the earlier workspaces " +
                       std::to_string(ctas));
      ctas = a.shape[0];
      continue;
    case ParamKind::Tables:
      if (p.heads == 1 && !a.shape.empty() && a.shape[0] != 1)
        return invalid(name +
                       " must have batch 1 (the kernel was compiled "
                       "for broadcast tables), got shape " +
                       shapeString(a.shape));
      if (a.shape.size() != 3 || (a.shape[0] != 1 && a.shape[0] != batch) ||
          a.shape[1] != seq || a.shape[2] != p.length)
        return invalid(name + " must have shape [1 or " +
                       std::to_string(batch) + ", " + std::to_string(seq) +
                       ", " + std::to_string(p.length) + "], got " +
                       shapeString(a.shape));
      continue;
    }
    if (rows < 0)
      rows = leading;
    else if (leading != rows)
      return invalid(name + " has " + std::to_string(leading) +
                     " rows, the earlier tensors " + std::to_string(rows));
  }
  if (batch >= 0)
    rows = batch * seq; // one CTA per token
  if (rows < 0)
    return invalid("has no row-shaped tensor to count rows from");
  if (rows > 0x7fffffff)
    return invalid("too many rows for one launch (" + std::to_string(rows) +
                   ")");
  // A kernel that reduces over the rows (a weight gradient) writes a
  // matrix; with no rows it would not run and leave that matrix unwritten.
  if (rows == 0)
    for (const KernelParam &p : kernel.params)
      if (p.isOutput && p.kind == ParamKind::Matrix)
        return invalid("reduces over the rows into '" + p.name +
                       "': with 0 rows it would not be written (pass at "
                       "least one row)");
  *rowsOut = rows;
  if (ctasOut)
    *ctasOut = ctas;
  return Status::ok();
}

int64_t liger::runtime::workspaceCtas(const KernelSpec &kernel, int64_t rows,
                                      int smCount) {
  int64_t most = static_cast<int64_t>(std::max(smCount, 1)) *
                 std::max(kernel.ctasPerSm, 1);
  return std::max<int64_t>(1, std::min(rows, most));
}

/// sm_90a runs on 9.0 only; sm_80 on any 8.x.
static bool archRunsOn(const std::string &arch, int major, int minor) {
  if (arch == "sm_90a")
    return major == 9 && minor == 0;
  if (arch == "sm_80")
    return major == 8;
  return false;
}

Status Bundle::getFunction(const ModuleSpec &module, const std::string &name,
                           int dynamicSharedMemoryBytes,
                           const CudaDriver &driver, CUcontext context,
                           CUfunction *function) {
  // `context` is current: the launch's device's (DeviceContextScope).
  std::lock_guard<std::mutex> lock(mutex_);
  auto fkey = std::make_pair(context, module.name + "/" + name);
  if (auto f = functions_.find(fkey); f != functions_.end()) {
    *function = f->second;
    return Status::ok();
  }
  auto key = std::make_pair(context, module.name);
  auto it = modules_.find(key);
  if (it == modules_.end()) {
    CUdevice dev;
    LIGER_CUDA_RETURN_IF_ERROR(driver, cuCtxGetDevice(&dev));
    int major = 0, minor = 0;
    LIGER_CUDA_RETURN_IF_ERROR(
        driver, cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, dev));
    LIGER_CUDA_RETURN_IF_ERROR(
        driver, cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, dev));
    if (!archRunsOn(module.arch, major, minor))
      return LIGER_MAKE_STATUS(
          StatusCode::kFailedPrecondition,
          dir_ + ": module '" + module.name + "' is compiled for " +
              module.arch + ", but the device has compute capability " +
              std::to_string(major) + "." + std::to_string(minor) +
              "; recompile with liger-compile --target=...");
    CUmodule loaded = nullptr;
    LIGER_CUDA_RETURN_IF_ERROR(
        driver, cuModuleLoadData(&loaded, cubins_[module.name].data()));
    it = modules_.emplace(key, loaded).first;
  }
  LIGER_CUDA_RETURN_IF_ERROR(
      driver, cuModuleGetFunction(function, it->second, name.c_str()));
  if (dynamicSharedMemoryBytes > 48 * 1024)
    LIGER_CUDA_RETURN_IF_ERROR(
        driver, cuFuncSetAttribute(*function, kFuncAttrMaxDynamicSharedMemory,
                                   dynamicSharedMemoryBytes));
  functions_.emplace(fkey, *function);
  return Status::ok();
}

namespace {
/// Makes the context of `device` current for its lifetime where the
/// thread's current context is another device's (or none): a process that
/// drives several GPUs launches each kernel in its tensors' device's
/// context whatever device is current.
class DeviceContextScope {
public:
  explicit DeviceContextScope(const CudaDriver &driver) : driver_(driver) {}
  ~DeviceContextScope() {
    if (pushed_) {
      CUcontext popped = nullptr;
      // Restores the caller's context; a destructor has no Status to return,
      // and popping what this scope pushed fails only if the caller's
      // context was destroyed meanwhile.
      LIGER_CUDA_IGNORE_ERROR(driver_, cuCtxPopCurrent_v2(&popped));
    }
  }

  /// Makes the context of `device` current if it is not; context() is then
  /// the context the launch runs in.
  Status enter(int device) {
    LIGER_CUDA_RETURN_IF_ERROR(driver_, cuCtxGetCurrent(&context_));
    CUcontext primary = nullptr;
    LIGER_RETURN_IF_ERROR(primaryContext(device, &primary));
    if (context_ == primary) // the usual case: PyTorch's current device
      return Status::ok();
    if (context_) {
      // Another context of the same device (the caller's own) serves too.
      CUdevice have, want;
      LIGER_CUDA_RETURN_IF_ERROR(driver_, cuCtxGetDevice(&have));
      LIGER_CUDA_RETURN_IF_ERROR(driver_, cuDeviceGet(&want, device));
      if (have == want)
        return Status::ok();
    }
    LIGER_CUDA_RETURN_IF_ERROR(driver_, cuCtxPushCurrent_v2(primary));
    pushed_ = true;
    context_ = primary;
    return Status::ok();
  }

  CUcontext context() const { return context_; }

private:
  /// The primary context of `device` (PyTorch's), retained once per process
  /// and kept.
  Status primaryContext(int device, CUcontext *context) {
    static std::mutex mutex;
    static std::map<int, CUcontext> primaries;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = primaries.find(device); it != primaries.end()) {
      *context = it->second;
      return Status::ok();
    }
    CUdevice dev;
    LIGER_CUDA_RETURN_IF_ERROR(driver_, cuDeviceGet(&dev, device));
    LIGER_CUDA_RETURN_IF_ERROR(driver_, cuDevicePrimaryCtxRetain(context, dev));
    primaries.emplace(device, *context);
    return Status::ok();
  }

  const CudaDriver &driver_;
  CUcontext context_ = nullptr;
  bool pushed_ = false;
};
} // namespace

Status Bundle::launch(const std::string &name,
                      const std::vector<TensorArg> &args, CUstream stream,
                      int device) {
  const ModuleSpec *module = nullptr;
  const KernelSpec *kernel = nullptr;
  for (const ModuleSpec &m : manifest_.modules)
    for (const KernelSpec &k : m.kernels)
      if (k.name == name) {
        module = &m;
        kernel = &k;
      }
  if (!kernel)
    return LIGER_MAKE_STATUS(StatusCode::kNotFound,
                             dir_ + " has no kernel '" + name + "'");
  int64_t rows = 0, ctas = -1;
  LIGER_RETURN_IF_ERROR(checkArgs(*kernel, args, &rows, &ctas));
  if (rows == 0 && !kernel->hasWorkspaces())
    return Status::ok(); // nothing to do: an empty grid is not launched
  const CudaDriver *driver = nullptr;
  LIGER_RETURN_IF_ERROR(CudaDriver::get(&driver));
  DeviceContextScope scope(*driver);
  LIGER_RETURN_IF_ERROR(scope.enter(device));
  CUfunction function = nullptr, finish = nullptr;
  LIGER_RETURN_IF_ERROR(getFunction(*module, kernel->name,
                                    kernel->dynamicSharedMemoryBytes, *driver,
                                    scope.context(), &function));
  if (kernel->hasWorkspaces())
    LIGER_RETURN_IF_ERROR(getFunction(
        *module, kernel->finish.name,
        kernel->finish.dynamicSharedMemoryBytes, *driver, scope.context(),
        &finish));

  // Memref descriptors: allocated ptr, aligned ptr, offset, sizes, strides.
  std::vector<int64_t> words;
  std::vector<size_t> starts;
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelParam &p = kernel->params[i];
    auto ptr = static_cast<int64_t>(reinterpret_cast<intptr_t>(args[i].data));
    starts.push_back(words.size());
    words.insert(words.end(), {ptr, ptr, 0});
    switch (p.kind) {
    case ParamKind::Rows:
      words.insert(words.end(), {rows, p.length, p.length, 1});
      break;
    case ParamKind::RowScalars:
      words.insert(words.end(), {rows, 1});
      break;
    case ParamKind::Feature:
      words.insert(words.end(), {p.length, 1});
      break;
    case ParamKind::Scalar:
      break;
    case ParamKind::Partials:
      words.insert(words.end(), {ctas, p.length, p.length, 1});
      break;
    case ParamKind::Matrix:
      words.insert(words.end(), {p.heads, p.length, p.length, 1});
      break;
    case ParamKind::Heads: {
      const std::vector<int64_t> &sh = args[i].shape;
      words.insert(words.end(),
                   {sh[0], sh[1], sh[2], sh[3], sh[1] * sh[2] * sh[3],
                    sh[2] * sh[3], sh[3], 1});
      break;
    }
    case ParamKind::Tables: {
      const std::vector<int64_t> &sh = args[i].shape;
      words.insert(words.end(), {sh[0], sh[1], sh[2], sh[1] * sh[2], sh[2], 1});
      break;
    }
    }
  }
  std::vector<void *> params;
  for (size_t i = 0; i < args.size(); ++i) {
    size_t end = i + 1 < starts.size() ? starts[i + 1] : words.size();
    for (size_t w = starts[i]; w < end; ++w)
      params.push_back(&words[w]);
  }
  // TMA descriptors, by value after the memrefs.
  std::vector<TensorMap> maps(kernel->tensorMaps.size());
  for (size_t t = 0; t < maps.size(); ++t) {
    const KernelTensorMap &m = kernel->tensorMaps[t];
    const KernelParam &p = kernel->params[m.param];
    TensorMapSpec spec;
    spec.globalAddress = args[m.param].data;
    spec.dtype = p.dtype;
    spec.shape = {p.kind == ParamKind::Matrix ? p.heads : rows, p.length};
    spec.box = {m.boxRows, m.boxCols};
    spec.swizzle = m.swizzleBytes == 32   ? TensorMapSwizzle::B32
                   : m.swizzleBytes == 64 ? TensorMapSwizzle::B64
                                          : TensorMapSwizzle::B128;
    Status s = encodeTensorMap(spec, &maps[t]);
    if (!s.isOk())
      return LIGER_MAKE_STATUS(s.code(), "kernel '" + kernel->name +
                                             "', tensor map of '" + p.name +
                                             "': " + s.message());
    params.push_back(&maps[t]);
  }
  unsigned grid[3];
  for (int i = 0; i < 3; ++i) {
    const GridDim &dim = kernel->grid[i];
    int64_t size = dim.kind == GridDim::Const ? dim.value
                   : dim.kind == GridDim::Ctas
                       ? ctas
                       : (rows + dim.value - 1) / dim.value;
    if (size < 1 || size > (i ? 65535 : 0x7fffffff))
      return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                               "kernel '" + kernel->name + "': grid size " +
                                   std::to_string(size) + " in dimension " +
                                   std::to_string(i) + " is out of range");
    grid[i] = static_cast<unsigned>(size);
  }
  LIGER_CUDA_RETURN_IF_ERROR(
      *driver,
      cuLaunchKernel(function, grid[0], grid[1], grid[2], kernel->block[0],
                     kernel->block[1], kernel->block[2],
                     kernel->dynamicSharedMemoryBytes, stream, params.data(),
                     nullptr));
  if (finish)
    LIGER_CUDA_RETURN_IF_ERROR(
        *driver, cuLaunchKernel(finish, kernel->finish.grid, 1, 1,
                                kernel->finish.block[0],
                                kernel->finish.block[1],
                                kernel->finish.block[2],
                                kernel->finish.dynamicSharedMemoryBytes,
                                stream, params.data(), nullptr));
  return Status::ok();
}
