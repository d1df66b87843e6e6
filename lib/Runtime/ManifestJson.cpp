//===- ManifestJson.cpp - the kernel ABI as manifest.json -----------------===//
//
// The JSON form of the kernel ABI (docs/Design/Kernel-ABI.md):
// parseManifest reads it strictly into a bounded JsonDocument (malformed
// JSON, nesting deeper than kMaxManifestDepth, more than kMaxManifestValues
// values, a duplicate or unknown key, a missing field, a field of the wrong
// type or an unknown enumerator are errors naming the field) and
// writeManifest writes what it reads, through nlohmann/json. Both end in
// verifyManifest. No other file of the project but JsonDocument.cpp
// includes the JSON library: exceptions it throws stop here.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/KernelAbi.h"

#include "JsonDocument.h"
#include "ManifestError.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <set>

using namespace liger::runtime;
using nlohmann::json;

namespace {
//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

class Reader;

/// The fields of one JSON object at `path`; finish() rejects the keys no
/// getter asked for.
class Fields {
public:
  Fields(const Reader &reader, JsonValue object, std::string path)
      : reader(reader), members(object), path(std::move(path)) {}

  const std::string &where() const { return path; }
  bool has(const char *key) const {
    JsonValue ignored;
    return members.find(key, &ignored);
  }

  Status string(const char *key, std::string *out);
  Status integer(const char *key, int64_t *out);
  Status boolean(const char *key, bool *out);
  /// A JSON array (or object) member.
  Status array(const char *key, JsonValue *out);
  Status object(const char *key, JsonValue *out);
  /// [a, b, c] of integers.
  Status triple(const char *key, int64_t (&out)[3]);
  Status finish() const;

private:
  Status get(const char *key, const char *type, JsonValue *out);

  const Reader &reader;
  JsonValue members;
  std::string path;
  std::set<std::string> used;
};

class Reader {
public:
  explicit Reader(const std::string &origin) : origin(origin) {}

  Status error(const std::string &path, const std::string &what) const {
    return manifestError(origin, path, what);
  }

  /// The fields of `v` at `path`, or an error when it is not an object.
  Status fields(JsonValue v, const std::string &path,
                std::unique_ptr<Fields> *out) const {
    if (!v.isObject())
      return error(path, "expected an object, got " + v.describe());
    *out = std::make_unique<Fields>(*this, v, path);
    return Status::ok();
  }

  Status module(JsonValue v, const std::string &path, ModuleSpec *module) const;
  Status kernel(JsonValue v, const std::string &path, KernelSpec *kernel) const;
  Status param(JsonValue v, const std::string &path, KernelParam *param) const;
  Status tensorMap(JsonValue v, const std::string &path,
                   const KernelSpec &kernel, KernelTensorMap *map) const;
  Status narrow(JsonValue v, const std::string &path, KernelSpec *kernel) const;
  /// A launch shape's fields (name, grid, block, shared memory, tensor
  /// maps of `kernel`'s parameters), the kernel's and its variant's alike.
  Status launchShape(Fields &f, const std::string &path,
                     const KernelSpec &kernel, LaunchShape *shape) const;
  Status sideKernel(JsonValue v, const std::string &path,
                    SideKernelSpec *kernel) const;
  Status grid(JsonValue v, const std::string &path, GridDim (&grid)[3]) const;
  Status plan(JsonValue v, const std::string &path, LossPlan *plan) const;

  std::string origin;
};

Status Fields::get(const char *key, const char *type, JsonValue *out) {
  used.insert(key);
  if (!members.find(key, out))
    return reader.error(path,
                        "missing '" + std::string(key) + "' (" + type + ")");
  return Status::ok();
}

Status Fields::string(const char *key, std::string *out) {
  JsonValue v;
  LIGER_RETURN_IF_ERROR(get(key, "a string", &v));
  if (!v.isString())
    return reader.error(path, "'" + std::string(key) +
                                  "' must be a string, got " + v.describe());
  *out = v.string();
  return Status::ok();
}

Status Fields::integer(const char *key, int64_t *out) {
  JsonValue v;
  LIGER_RETURN_IF_ERROR(get(key, "an integer", &v));
  if (!v.asInt64(out))
    return reader.error(path, "'" + std::string(key) +
                                  "' must be a 64-bit integer, got " +
                                  v.describe());
  return Status::ok();
}

Status Fields::boolean(const char *key, bool *out) {
  JsonValue v;
  LIGER_RETURN_IF_ERROR(get(key, "a boolean", &v));
  if (!v.isBoolean())
    return reader.error(path, "'" + std::string(key) +
                                  "' must be true or false, got " +
                                  v.describe());
  *out = v.boolean();
  return Status::ok();
}

Status Fields::array(const char *key, JsonValue *out) {
  LIGER_RETURN_IF_ERROR(get(key, "an array", out));
  if (!out->isArray())
    return reader.error(path, "'" + std::string(key) +
                                  "' must be an array, got " + out->describe());
  return Status::ok();
}

Status Fields::object(const char *key, JsonValue *out) {
  LIGER_RETURN_IF_ERROR(get(key, "an object", out));
  if (!out->isObject())
    return reader.error(path, "'" + std::string(key) +
                                  "' must be an object, got " +
                                  out->describe());
  return Status::ok();
}

Status Fields::triple(const char *key, int64_t (&out)[3]) {
  JsonValue v;
  LIGER_RETURN_IF_ERROR(array(key, &v));
  bool ok = v.size() == 3;
  for (size_t i = 0; ok && i < 3; ++i)
    ok = v[i].asInt64(&out[i]);
  if (!ok)
    return reader.error(path, "'" + std::string(key) +
                                  "' must be three integers, got " +
                                  v.describe());
  return Status::ok();
}

Status Fields::finish() const {
  for (size_t i = 0; i < members.size(); ++i)
    if (!used.count(members.key(i)))
      return reader.error(path, "unknown key '" + members.key(i) + "'");
  return Status::ok();
}

/// Reads an enumerator spelled as a string.
template <typename E>
Status enumField(Fields &f, const Reader &r, const char *key,
                 bool (*parse)(std::string_view, E *), const char *what,
                 E *out) {
  std::string text;
  LIGER_RETURN_IF_ERROR(f.string(key, &text));
  if (!parse(text, out))
    return r.error(f.where(),
                   "unknown " + std::string(what) + " '" + text + "'");
  return Status::ok();
}

Status Reader::grid(JsonValue v, const std::string &path,
                    GridDim (&grid)[3]) const {
  if (!v.isArray() || v.size() != 3)
    return error(path, "grid must have 3 entries, got " + v.describe());
  for (size_t i = 0; i < 3; ++i) {
    JsonValue g = v[i];
    if (g.asInt64(&grid[i].value)) {
      grid[i].kind = GridDim::Const;
      continue;
    }
    GridDim dim;
    if (!g.isString() || !parseGridDim(g.string(), &dim) ||
        dim.kind == GridDim::Const)
      return error(path,
                   "unknown grid size " + g.describe() +
                       " (an integer, rows, tokens, ctas, sms or rows/N)");
    grid[i] = dim;
  }
  return Status::ok();
}

Status Reader::param(JsonValue v, const std::string &path,
                     KernelParam *param) const {
  std::unique_ptr<Fields> f;
  LIGER_RETURN_IF_ERROR(fields(v, path, &f));
  LIGER_RETURN_IF_ERROR(f->string("name", &param->name));
  LIGER_RETURN_IF_ERROR(
      enumField(*f, *this, "role", parseRole, "role", &param->role));
  LIGER_RETURN_IF_ERROR(
      enumField(*f, *this, "kind", parseKind, "kind", &param->kind));
  LIGER_RETURN_IF_ERROR(
      enumField(*f, *this, "dtype", parseDType, "dtype", &param->dtype));
  JsonValue shape;
  LIGER_RETURN_IF_ERROR(f->array("shape", &shape));
  std::vector<ShapeEntry> entries;
  bool wellFormed = shape.size() <= kMaxRank;
  for (size_t i = 0; wellFormed && i < shape.size(); ++i) {
    static const char *const kSymbols[] = {"rows", "ctas", "batch", "seq",
                                           "table_batch"};
    JsonValue e = shape[i];
    int64_t size = 0;
    if (e.asInt64(&size)) {
      entries.push_back({size, nullptr});
      continue;
    }
    const char *symbol = nullptr;
    for (const char *s : kSymbols)
      if (e.isString() && e.string() == s)
        symbol = s;
    wellFormed &= symbol != nullptr;
    entries.push_back({0, symbol});
  }
  if (!wellFormed ||
      !paramSizesFromShape(param->kind, entries, &param->length, &param->outer))
    return error(path, "the shape of a " + std::string(kindName(param->kind)) +
                           " parameter is " + shapePattern(param->kind) +
                           ", got " + shape.describe());
  return f->finish();
}

Status Reader::tensorMap(JsonValue v, const std::string &path,
                         const KernelSpec &kernel, KernelTensorMap *map) const {
  std::unique_ptr<Fields> f;
  LIGER_RETURN_IF_ERROR(fields(v, path, &f));
  std::string param, oob;
  int64_t swizzle = 0;
  JsonValue box;
  LIGER_RETURN_IF_ERROR(f->string("param", &param));
  LIGER_RETURN_IF_ERROR(f->array("box", &box));
  LIGER_RETURN_IF_ERROR(f->integer("swizzle", &swizzle));
  LIGER_RETURN_IF_ERROR(f->string("oob", &oob));
  auto it = std::find_if(kernel.params.begin(), kernel.params.end(),
                         [&](const KernelParam &p) { return p.name == param; });
  if (it == kernel.params.end())
    return error(path,
                 "param '" + param + "' is not a parameter of the kernel");
  map->param = static_cast<size_t>(it - kernel.params.begin());
  if (box.size() != 2 || !box[0].asInt64(&map->boxRows) ||
      !box[1].asInt64(&map->boxCols))
    return error(path, "box must be [rows, cols], got " + box.describe());
  if (!parseSwizzleBytes(swizzle, &map->swizzle))
    return error(path, "swizzle " + std::to_string(swizzle) +
                           " is not supported (32, 64 or 128)");
  if (oob != "zero" && oob != "nan")
    return error(path, "oob must be 'zero' or 'nan', got '" + oob + "'");
  map->zeroFill = oob == "zero";
  return f->finish();
}

Status Reader::launchShape(Fields &f, const std::string &path,
                           const KernelSpec &kernel, LaunchShape *shape) const {
  LIGER_RETURN_IF_ERROR(f.string("name", &shape->name));
  JsonValue list;
  LIGER_RETURN_IF_ERROR(f.array("grid", &list));
  LIGER_RETURN_IF_ERROR(grid(list, path, shape->grid));
  LIGER_RETURN_IF_ERROR(f.triple("block", shape->block));
  LIGER_RETURN_IF_ERROR(f.integer("dynamic_shared_memory_bytes",
                                  &shape->dynamicSharedMemoryBytes));
  if (!f.has("tensor_maps"))
    return Status::ok();
  LIGER_RETURN_IF_ERROR(f.array("tensor_maps", &list));
  for (size_t t = 0; t < list.size(); ++t) {
    shape->tensorMaps.emplace_back();
    LIGER_RETURN_IF_ERROR(
        tensorMap(list[t], path + ".tensor_maps[" + std::to_string(t) + "]",
                  kernel, &shape->tensorMaps.back()));
  }
  return Status::ok();
}

Status Reader::narrow(JsonValue v, const std::string &path,
                      KernelSpec *kernel) const {
  std::unique_ptr<Fields> f;
  LIGER_RETURN_IF_ERROR(fields(v, path, &f));
  LIGER_RETURN_IF_ERROR(launchShape(*f, path, *kernel, &kernel->narrow));
  if (kernel->narrow.name.empty()) // (an empty name would mean none)
    return error(path, "name is empty");
  return f->finish();
}

Status Reader::sideKernel(JsonValue v, const std::string &path,
                          SideKernelSpec *kernel) const {
  std::unique_ptr<Fields> f;
  LIGER_RETURN_IF_ERROR(fields(v, path, &f));
  int64_t grid[3];
  LIGER_RETURN_IF_ERROR(f->string("name", &kernel->name));
  LIGER_RETURN_IF_ERROR(f->triple("grid", grid));
  if (grid[1] != 1 || grid[2] != 1)
    return error(path, "grid must be [n, 1, 1], got [" +
                           std::to_string(grid[0]) + ", " +
                           std::to_string(grid[1]) + ", " +
                           std::to_string(grid[2]) + "]");
  kernel->grid = grid[0];
  LIGER_RETURN_IF_ERROR(f->triple("block", kernel->block));
  LIGER_RETURN_IF_ERROR(f->integer("dynamic_shared_memory_bytes",
                                   &kernel->dynamicSharedMemoryBytes));
  return f->finish();
}

Status Reader::kernel(JsonValue v, const std::string &path,
                      KernelSpec *kernel) const {
  std::unique_ptr<Fields> f;
  LIGER_RETURN_IF_ERROR(fields(v, path, &f));
  std::string abi;
  LIGER_RETURN_IF_ERROR(f->string("function", &kernel->function));
  LIGER_RETURN_IF_ERROR(f->string("ops", &kernel->ops));
  LIGER_RETURN_IF_ERROR(enumField(*f, *this, "template", parseTemplate,
                                  "template", &kernel->kernelTemplate));
  LIGER_RETURN_IF_ERROR(f->string("abi", &abi));
  if (abi != "memref-descriptor")
    return error(path, "unknown abi '" + abi + "'");
  JsonValue list;
  LIGER_RETURN_IF_ERROR(f->integer("vector_width", &kernel->vectorWidth));
  LIGER_RETURN_IF_ERROR(f->integer("alignment_bytes", &kernel->alignmentBytes));
  LIGER_RETURN_IF_ERROR(f->array("params", &list));
  for (size_t p = 0; p < list.size(); ++p) {
    kernel->params.emplace_back();
    LIGER_RETURN_IF_ERROR(param(list[p],
                                path + ".params[" + std::to_string(p) + "]",
                                &kernel->params.back()));
  }
  // (after the parameters its tensor maps name)
  LIGER_RETURN_IF_ERROR(launchShape(*f, path, *kernel, kernel));
  if (f->has("narrow")) {
    JsonValue object;
    LIGER_RETURN_IF_ERROR(f->object("narrow", &object));
    LIGER_RETURN_IF_ERROR(narrow(object, path + ".narrow", kernel));
  }
  if (f->has("prepare")) {
    JsonValue object;
    LIGER_RETURN_IF_ERROR(f->object("prepare", &object));
    LIGER_RETURN_IF_ERROR(
        sideKernel(object, path + ".prepare", &kernel->prepare));
  }
  if (f->has("finish")) {
    JsonValue object;
    LIGER_RETURN_IF_ERROR(f->object("finish", &object));
    LIGER_RETURN_IF_ERROR(
        sideKernel(object, path + ".finish", &kernel->finish));
    LIGER_RETURN_IF_ERROR(f->integer("ctas_per_sm", &kernel->ctasPerSm));
  } else if (f->has("ctas_per_sm")) {
    return error(path, "ctas_per_sm is for a kernel with a 'finish' kernel");
  }
  return f->finish();
}

Status Reader::module(JsonValue v, const std::string &path,
                      ModuleSpec *module) const {
  std::unique_ptr<Fields> f;
  LIGER_RETURN_IF_ERROR(fields(v, path, &f));
  LIGER_RETURN_IF_ERROR(f->string("name", &module->name));
  LIGER_RETURN_IF_ERROR(f->string("arch", &module->arch));
  LIGER_RETURN_IF_ERROR(f->string("cubin", &module->cubinFile));
  LIGER_RETURN_IF_ERROR(f->string("cubin_sha256", &module->cubinSha256));
  LIGER_RETURN_IF_ERROR(f->string("ptx", &module->ptxFile));
  JsonValue kernels;
  LIGER_RETURN_IF_ERROR(f->array("kernels", &kernels));
  for (size_t k = 0; k < kernels.size(); ++k) {
    module->kernels.emplace_back();
    LIGER_RETURN_IF_ERROR(kernel(kernels[k],
                                 path + ".kernels[" + std::to_string(k) + "]",
                                 &module->kernels.back()));
  }
  return f->finish();
}

Status Reader::plan(JsonValue v, const std::string &path,
                    LossPlan *plan) const {
  std::unique_ptr<Fields> f;
  LIGER_RETURN_IF_ERROR(fields(v, path, &f));
  LIGER_RETURN_IF_ERROR(f->string("function", &plan->function));
  LIGER_RETURN_IF_ERROR(enumField(*f, *this, "kind", parseLossPlanKind,
                                  "plan kind", &plan->kind));
  LIGER_RETURN_IF_ERROR(f->integer("chunk_tokens", &plan->chunkTokens));
  LIGER_RETURN_IF_ERROR(f->integer("memory_budget", &plan->memoryBudget));
  LIGER_RETURN_IF_ERROR(f->boolean("mean", &plan->mean));
  LIGER_RETURN_IF_ERROR(f->integer("ignore_index", &plan->ignoreIndex));
  LIGER_RETURN_IF_ERROR(f->boolean("class_weight", &plan->classWeight));
  LIGER_RETURN_IF_ERROR(f->boolean("dw_f32", &plan->dwF32));
  JsonValue kernels;
  LIGER_RETURN_IF_ERROR(f->object("kernels", &kernels));
  std::unique_ptr<Fields> stages;
  LIGER_RETURN_IF_ERROR(fields(kernels, path + ".kernels", &stages));
  for (size_t i = 0; i < kernels.size(); ++i) {
    LossStage stage;
    if (!parseLossStage(kernels.key(i), &stage))
      return error(path + ".kernels", "unknown stage '" + kernels.key(i) +
                                          "' (logits, ce, dx, dw0 or dw)");
    LIGER_RETURN_IF_ERROR(stages->string(
        lossStageName(stage), &plan->kernels[static_cast<int>(stage)]));
  }
  return f->finish();
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

json shapeJson(const KernelParam &p) {
  json shape = json::array();
  for (const ShapeEntry &e : manifestShape(p))
    shape.push_back(e.symbol ? json(e.symbol) : json(e.size));
  return shape;
}

json gridJson(const GridDim (&grid)[3]) {
  json list = json::array();
  for (const GridDim &g : grid)
    list.push_back(g.kind == GridDim::Const ? json(g.value)
                                            : json(gridDimText(g)));
  return list;
}

json tripleJson(const int64_t (&v)[3]) {
  return json::array({v[0], v[1], v[2]});
}

json kernelJson(const KernelSpec &k) {
  json params = json::array();
  for (const KernelParam &p : k.params)
    params.push_back({{"name", p.name},
                      {"role", roleName(p.role)},
                      {"kind", kindName(p.kind)},
                      {"dtype", dtypeName(p.dtype)},
                      {"shape", shapeJson(p)}});
  // A launch shape's fields, the kernel's and its narrow variant's alike.
  auto launchJson = [&](const LaunchShape &s) {
    json object = {{"name", s.name},
                   {"grid", gridJson(s.grid)},
                   {"block", tripleJson(s.block)},
                   {"dynamic_shared_memory_bytes", s.dynamicSharedMemoryBytes}};
    if (s.tensorMaps.empty())
      return object;
    json maps = json::array();
    for (const KernelTensorMap &m : s.tensorMaps)
      maps.push_back({{"param", k.params[m.param].name},
                      {"box", {m.boxRows, m.boxCols}},
                      {"swizzle", swizzleBytes(m.swizzle)},
                      {"oob", m.zeroFill ? "zero" : "nan"}});
    object["tensor_maps"] = std::move(maps);
    return object;
  };
  json kernel = launchJson(k);
  kernel["function"] = k.function;
  kernel["ops"] = k.ops;
  kernel["template"] = templateName(k.kernelTemplate);
  kernel["abi"] = "memref-descriptor";
  kernel["vector_width"] = k.vectorWidth;
  kernel["alignment_bytes"] = k.alignmentBytes;
  kernel["params"] = std::move(params);
  if (k.hasNarrow())
    kernel["narrow"] = launchJson(k.narrow);
  auto side = [](const SideKernelSpec &s) -> json {
    return {{"name", s.name},
            {"grid", {s.grid, 1, 1}},
            {"block", tripleJson(s.block)},
            {"dynamic_shared_memory_bytes", s.dynamicSharedMemoryBytes}};
  };
  if (k.hasFinish()) {
    kernel["ctas_per_sm"] = k.ctasPerSm;
    kernel["finish"] = side(k.finish);
  }
  if (k.hasPrepare())
    kernel["prepare"] = side(k.prepare);
  return kernel;
}

json planJson(const LossPlan &plan) {
  json kernels = json::object();
  for (int s = 0; s < kNumLossStages; ++s)
    if (!plan.kernels[s].empty())
      kernels[lossStageName(static_cast<LossStage>(s))] = plan.kernels[s];
  return {{"function", plan.function},
          {"kind", lossPlanKindName(plan.kind)},
          {"chunk_tokens", plan.chunkTokens},
          {"memory_budget", plan.memoryBudget},
          {"mean", plan.mean},
          {"ignore_index", plan.ignoreIndex},
          {"class_weight", plan.classWeight},
          {"dw_f32", plan.dwF32},
          {"kernels", std::move(kernels)}};
}
} // namespace

Status liger::runtime::parseManifest(const std::string &text,
                                     const std::string &origin,
                                     Manifest *manifest) {
  Reader r(origin);
  JsonDocument document;
  JsonError error;
  if (!document.parse(text, kMaxManifestDepth, kMaxManifestValues, &error)) {
    if (!error.path.empty())
      return r.error(error.path, error.what);
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             origin + ": malformed JSON: " + error.what);
  }
  JsonValue root = document.root();
  std::unique_ptr<Fields> f;
  LIGER_RETURN_IF_ERROR(r.fields(root, "manifest", &f));
  // The format and version first: a bundle of another version may differ
  // in any other field.
  std::string format;
  LIGER_RETURN_IF_ERROR(f->string("format", &format));
  if (format != kManifestFormat)
    return r.error("manifest", "format is '" + format + "', expected '" +
                                   kManifestFormat + "'");
  LIGER_RETURN_IF_ERROR(f->integer("version", &manifest->version));
  if (manifest->version != kManifestVersion)
    return verifyManifest(*manifest, origin); // says which version it reads
  LIGER_RETURN_IF_ERROR(f->string("source", &manifest->source));
  JsonValue list;
  LIGER_RETURN_IF_ERROR(f->array("modules", &list));
  for (size_t m = 0; m < list.size(); ++m) {
    manifest->modules.emplace_back();
    LIGER_RETURN_IF_ERROR(r.module(list[m],
                                   "modules[" + std::to_string(m) + "]",
                                   &manifest->modules.back()));
  }
  if (f->has("plans")) {
    LIGER_RETURN_IF_ERROR(f->array("plans", &list));
    for (size_t p = 0; p < list.size(); ++p) {
      manifest->plans.emplace_back();
      LIGER_RETURN_IF_ERROR(r.plan(list[p], "plans[" + std::to_string(p) + "]",
                                   &manifest->plans.back()));
    }
  }
  LIGER_RETURN_IF_ERROR(f->finish());
  return verifyManifest(*manifest, origin);
}

Status liger::runtime::writeManifest(const Manifest &manifest,
                                     const std::string &origin,
                                     std::string *text) {
  LIGER_RETURN_IF_ERROR(verifyManifest(manifest, origin));
  json modules = json::array();
  for (const ModuleSpec &m : manifest.modules) {
    json kernels = json::array();
    for (const KernelSpec &k : m.kernels)
      kernels.push_back(kernelJson(k));
    modules.push_back({{"name", m.name},
                       {"arch", m.arch},
                       {"cubin", m.cubinFile},
                       {"cubin_sha256", m.cubinSha256},
                       {"ptx", m.ptxFile},
                       {"kernels", std::move(kernels)}});
  }
  json root = {{"format", kManifestFormat},
               {"version", manifest.version},
               {"source", manifest.source},
               {"modules", std::move(modules)}};
  if (!manifest.plans.empty()) {
    json plans = json::array();
    for (const LossPlan &p : manifest.plans)
      plans.push_back(planJson(p));
    root["plans"] = std::move(plans);
  }
  try {
    // verifyManifest let only UTF-8 text through; strict is a last guard.
    *text = root.dump(2, ' ', /*ensure_ascii=*/false,
                      json::error_handler_t::strict) +
            "\n";
  } catch (const json::exception &e) {
    return LIGER_MAKE_STATUS(StatusCode::kInternal,
                             origin +
                                 ": cannot write the manifest: " + e.what());
  }
  return Status::ok();
}
