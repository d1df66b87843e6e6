//===- MatmulConfigTable.cpp - measured matmul configurations -------------===//

#include "liger/Conversion/LigerToGPU/MatmulConfigTable.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace mlir::liger;

std::string mlir::liger::matmulDtypeName(const MatmulPlan &plan) {
  if (!plan.elementType)
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  plan.elementType.print(os);
  return text;
}

namespace {
constexpr int64_t kTableVersion = 1;
/// The largest size a table names (a tile is at most 256, stages 8): sums
/// and products of sizes stay far from overflow.
constexpr int64_t kLargest = int64_t(1) << 31;
/// JSON nested deeper than this is refused before it is parsed (the parser
/// recurses: tens of thousands of levels overflow the stack); a table has
/// four levels.
constexpr int kMaxDepth = 32;
constexpr StringLiteral kDtypes[] = {"bf16", "f16", "f32"};

/// Reads one JSON object's fields, each at most once, into typed values;
/// the first problem is kept in `error`, prefixed by where it is.
class FieldReader {
public:
  FieldReader(const llvm::json::Object &object, std::string where,
              std::string &error)
      : object(object), where(std::move(where)), error(error) {}

  bool fail(const Twine &message) {
    if (error.empty())
      error = (where + ": " + message).str();
    return false;
  }

  /// An integer field in [least, most] (1: positive).
  void integer(StringRef key, std::optional<int64_t> &out, int64_t least = 1,
               int64_t most = kLargest) {
    const llvm::json::Value *v = take(key);
    if (!v)
      return;
    std::optional<int64_t> i = v->getAsInteger();
    if (!i || *i < least)
      return (void)fail("'" + key + "' must be " +
                        (least == 1 ? "a positive" : "a non-negative") +
                        " integer");
    if (*i > most)
      return (void)fail("'" + key + "' must be at most " +
                        std::to_string(most) + ", got " + std::to_string(*i));
    out = *i;
  }
  void boolean(StringRef key, std::optional<bool> &out) {
    const llvm::json::Value *v = take(key);
    if (!v)
      return;
    if (std::optional<bool> b = v->getAsBoolean())
      out = *b;
    else
      fail("'" + key + "' must be true or false");
  }
  /// A string field, one of `allowed`.
  void oneOf(StringRef key, ArrayRef<StringLiteral> allowed,
             std::optional<std::string> &out) {
    const llvm::json::Value *v = take(key);
    if (!v)
      return;
    std::optional<StringRef> s = v->getAsString();
    if (s && llvm::is_contained(allowed, *s)) {
      out = s->str();
      return;
    }
    fail("'" + key + "' must be one of " + llvm::join(allowed, ", "));
  }
  /// A string field naming a target (lookupGpuTarget).
  void chip(StringRef key, std::optional<std::string> &out) {
    const llvm::json::Value *v = take(key);
    if (!v)
      return;
    std::optional<StringRef> s = v->getAsString();
    std::string why = "must be a string";
    if (s && lookupGpuTarget(*s)) {
      out = s->str();
      return;
    }
    if (s)
      (void)validateGpuTarget(*s, "+ptx86", why);
    fail("'" + key + "': " + why);
  }
  void integers(StringRef key, std::optional<std::vector<int64_t>> &out) {
    const llvm::json::Value *v = take(key);
    if (!v)
      return;
    const llvm::json::Array *array = v->getAsArray();
    std::vector<int64_t> values;
    if (array)
      for (const llvm::json::Value &e : *array)
        if (std::optional<int64_t> i = e.getAsInteger(); i && *i > 0)
          values.push_back(*i);
    if (!array || array->empty() || values.size() != array->size())
      return (void)fail("'" + key +
                        "' must be a non-empty list of positive integers");
    out = std::move(values);
  }
  /// An object field (required).
  const llvm::json::Object *object_(StringRef key) {
    const llvm::json::Value *v = take(key);
    if (!v)
      return fail("'" + key + "' is missing"), nullptr;
    if (const llvm::json::Object *o = v->getAsObject())
      return o;
    return fail("'" + key + "' must be an object"), nullptr;
  }
  /// A field whose value is not read ("note").
  void ignored(StringRef key) { (void)take(key); }

  /// Fails on the first field not taken.
  bool finish() {
    for (const auto &kv : object)
      if (!taken.contains(kv.first.str()))
        return fail("unknown field '" + StringRef(kv.first) + "'");
    return error.empty();
  }

private:
  const llvm::json::Value *take(StringRef key) {
    taken.insert(key);
    return object.get(key);
  }

  const llvm::json::Object &object;
  std::string where;
  std::string &error;
  llvm::StringSet<> taken;
};
} // namespace

std::optional<MatmulConfigTable>
MatmulConfigTable::parse(StringRef text, StringRef source,
                         std::string &error) {
  // The nesting depth, outside strings.
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (inString) {
      if (ch == '\\')
        ++i;
      else if (ch == '"')
        inString = false;
    } else if (ch == '"') {
      inString = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > kMaxDepth) {
        error = ("matmul configuration table " + source +
                 ": nested more than " + Twine(kMaxDepth) + " levels deep")
                    .str();
        return std::nullopt;
      }
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json) {
    error = ("matmul configuration table " + source +
             ": not JSON: " + llvm::toString(json.takeError()))
                .str();
    return std::nullopt;
  }
  std::string where = ("matmul configuration table " + source).str();
  const llvm::json::Object *root = json->getAsObject();
  if (!root) {
    error = where + ": must be a JSON object with 'version' and 'entries'";
    return std::nullopt;
  }
  MatmulConfigTable table;
  table.name = source.str();
  FieldReader top(*root, where, error);
  std::optional<int64_t> version;
  top.integer("version", version);
  if (error.empty() && version != kTableVersion)
    top.fail(version ? "version " + std::to_string(*version) +
                           " is not one this compiler reads (1)"
                     : std::string("'version' is missing"));
  const llvm::json::Value *entries = root->get("entries");
  top.ignored("entries");
  top.ignored("note");
  if (!top.finish())
    return std::nullopt;
  const llvm::json::Array *list = entries ? entries->getAsArray() : nullptr;
  if (!list) {
    error = where + ": 'entries' must be a list";
    return std::nullopt;
  }
  for (auto [i, value] : llvm::enumerate(*list)) {
    std::string at = where + ": entry " + std::to_string(i);
    const llvm::json::Object *object = value.getAsObject();
    if (!object) {
      error = at + ": must be an object with 'match' and 'config'";
      return std::nullopt;
    }
    Entry entry;
    FieldReader fields(*object, at, error);
    const llvm::json::Object *match = fields.object_("match");
    const llvm::json::Object *config = fields.object_("config");
    fields.ignored("note");
    if (!fields.finish())
      return std::nullopt;

    FieldReader m(*match, at + ": match", error);
    m.chip("chip", entry.chip);
    m.oneOf("body", kMatmulBodyNames, entry.body);
    m.oneOf("dtype", kDtypes, entry.dtype);
    m.integer("k", entry.k);
    m.integers("widths", entry.widths);
    m.boolean("norm", entry.norm);
    m.integer("lora_rank", entry.loraRank, /*least=*/0); // 0: no LoRA
    m.boolean("accumulate", entry.accumulate);
    m.boolean("weight_transposed", entry.weightTransposed);
    m.integer("m_min", entry.mMin);
    m.integer("m_max", entry.mMax);
    if (!m.finish())
      return std::nullopt;
    if (entry.k && entry.body == "grad_weight") {
      m.fail("'k' never holds of a grad_weight group (its K is the tokens, "
             "dynamic): bound its rows with m_min and m_max");
      return std::nullopt;
    }
    if (entry.mMin && entry.mMax && *entry.mMin > *entry.mMax) {
      m.fail("m_min " + std::to_string(*entry.mMin) + " is above m_max " +
             std::to_string(*entry.mMax));
      return std::nullopt;
    }

    FieldReader c(*config, at + ": config", error);
    c.integer("tile_m", entry.tileM, 1, 256);
    c.integer("tile_n", entry.tileN, 1, 256);
    c.integer("tile_k", entry.tileK, 1, 256);
    c.integer("stages", entry.stages, 1, 8);
    c.integer("cluster", entry.cluster, 1, 2);
    std::optional<std::string> schedule;
    c.oneOf("schedule", matmulScheduleNames(), schedule);
    if (!c.finish())
      return std::nullopt;
    if (schedule)
      entry.schedule = scheduleOf(*parseMatmulScheduleChoice(*schedule));
    table.entries.push_back(std::move(entry));
  }
  return table;
}

std::optional<MatmulConfigTable>
MatmulConfigTable::read(StringRef path, std::string &error) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    error = ("cannot read the matmul configuration table " + path + ": " +
             file.getError().message())
                .str();
    return std::nullopt;
  }
  return parse((*file)->getBuffer(), path, error);
}

/// Whether every field `entry` gives holds of `plan` on `target`.
namespace {
/// What a plan's entries are matched on that takes work to form, formed
/// once per lookup.
struct PlanKey {
  explicit PlanKey(const MatmulPlan &plan)
      : dtype(matmulDtypeName(plan)),
        widths(plan.widths.begin(), plan.widths.end()) {
    // A q/k pair's widths are q's then k's, whichever op the body holds
    // first.
    if (plan.body == MatmulBody::QKRoPE)
      widths = {plan.nq, plan.n - plan.nq};
  }
  std::string dtype;
  SmallVector<int64_t, 2> widths;
};
} // namespace

static bool matches(const MatmulConfigTable::Entry &entry,
                    const MatmulPlan &plan, const PlanKey &key,
                    const GpuTargetInfo &target) {
  if ((entry.mMin || entry.mMax) &&
      (ShapedType::isDynamic(plan.m) || (entry.mMin && plan.m < *entry.mMin) ||
       (entry.mMax && plan.m > *entry.mMax)))
    return false;
  ArrayRef<int64_t> widths = key.widths;
  return (!entry.chip || *entry.chip == target.chip) &&
         (!entry.body || *entry.body == matmulBodyName(plan.body)) &&
         (!entry.dtype || *entry.dtype == key.dtype) &&
         (!entry.k || *entry.k == plan.k) &&
         (!entry.widths || ArrayRef<int64_t>(*entry.widths) == widths) &&
         (!entry.norm || *entry.norm == static_cast<bool>(plan.norm)) &&
         (!entry.loraRank || *entry.loraRank == plan.loraRank) &&
         (!entry.accumulate ||
          *entry.accumulate == static_cast<bool>(plan.accumulator)) &&
         (!entry.weightTransposed ||
          *entry.weightTransposed == (plan.weightTranspose != nullptr));
}

FailureOr<std::optional<MatmulKernelConfig>>
MatmulConfigTable::lookup(const MatmulPlan &plan,
                          const GpuTargetInfo &target) const {
  PlanKey key(plan);
  for (auto [i, entry] : llvm::enumerate(entries)) {
    if (!matches(entry, plan, key, target))
      continue;
    MatmulSchedule schedule =
        entry.schedule.value_or(MatmulSchedule::data_parallel);
    // The default rule's tile for the schedule, with the entry's fields.
    MatmulKernelConfig config =
        selectMatmulKernelConfig(plan, target, choiceOf(schedule));
    config.schedule = schedule;
    config.tileM = entry.tileM.value_or(config.tileM);
    config.tileN = entry.tileN.value_or(config.tileN);
    config.tileK = entry.tileK.value_or(config.tileK);
    config.cluster = entry.cluster.value_or(config.cluster);
    config.stages = entry.stages.value_or(fittingStages(plan, config, target));
    if (std::string problem = matmulConfigProblem(config, plan, target);
        !problem.empty())
      return plan.group.emitOpError("matches entry ")
             << i << " of the matmul configuration table " << name
             << ", whose configuration does not fit it: " << problem;
    return std::optional(config);
  }
  return std::optional<MatmulKernelConfig>();
}

std::string mlir::liger::conflictingMatmulSelection(StringRef scheduleOption,
                                                    StringRef tableOption) {
  return (scheduleOption + " and " + tableOption +
          " both choose the configuration of matmul groups: give one (a "
          "table entry states its schedule)")
      .str();
}

FailureOr<MatmulSelectionOptions>
mlir::liger::readMatmulSelectionOptions(Operation *anchor, StringRef pass,
                                        StringRef schedule,
                                        StringRef tablePath) {
  MatmulSelectionOptions options;
  std::string error;
  if (std::optional<MatmulScheduleChoice> choice =
          parseMatmulScheduleChoice(schedule))
    options.schedule = *choice;
  else
    error = badMatmulScheduleChoice("matmul-schedule", schedule);
  if (error.empty() && !tablePath.empty()) {
    if (options.schedule != MatmulScheduleChoice::Auto)
      error = conflictingMatmulSelection("matmul-schedule",
                                         "matmul-config-table");
    else
      options.table = MatmulConfigTable::read(tablePath, error);
  }
  if (!error.empty())
    return anchor->emitError() << pass << ": " << error;
  return options;
}
