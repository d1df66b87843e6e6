//===- Json.cpp - a small JSON reader for bundle manifests ----------------===//

#include "Json.h"

#include <cstdlib>

using namespace liger::runtime::json;

const Value *Value::get(const std::string &key) const {
  if (kind != Object)
    return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

namespace {
class Parser {
public:
  explicit Parser(const std::string &text) : text(text) {}

  bool parseDocument(Value *value, std::string *error) {
    bool ok = parseValue(value, 0) && (skipSpace(), pos == text.size());
    if (!ok && message.empty())
      message = "unexpected trailing characters";
    if (!ok)
      *error = message + " at byte " + std::to_string(pos);
    return ok;
  }

private:
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' ||
                                 text[pos] == '\t' || text[pos] == '\r'))
      ++pos;
  }
  bool fail(const char *why) {
    message = why;
    return false;
  }
  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (text.compare(pos, n, word) != 0)
      return fail("invalid literal");
    pos += n;
    return true;
  }
  bool parseString(std::string *out) {
    if (pos >= text.size() || text[pos] != '"')
      return fail("expected a string");
    ++pos;
    while (pos < text.size() && text[pos] != '"') {
      char c = text[pos++];
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos >= text.size())
        return fail("unterminated escape");
      char e = text[pos++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out->push_back(e);
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case 'b':
        out->push_back('\b');
        break;
      case 'f':
        out->push_back('\f');
        break;
      default:
        return fail("unsupported escape");
      }
    }
    if (pos >= text.size())
      return fail("unterminated string");
    ++pos;
    return true;
  }
  bool parseValue(Value *value, int depth) {
    if (depth > 64)
      return fail("nesting too deep");
    skipSpace();
    if (pos >= text.size())
      return fail("unexpected end of input");
    char c = text[pos];
    if (c == '{') {
      ++pos;
      value->kind = Value::Object;
      skipSpace();
      if (pos < text.size() && text[pos] == '}')
        return ++pos, true;
      while (true) {
        skipSpace();
        std::string key;
        if (!parseString(&key))
          return false;
        skipSpace();
        if (pos >= text.size() || text[pos++] != ':')
          return fail("expected ':'");
        if (!parseValue(&value->object[key], depth + 1))
          return false;
        skipSpace();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == '}')
          return ++pos, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++pos;
      value->kind = Value::Array;
      skipSpace();
      if (pos < text.size() && text[pos] == ']')
        return ++pos, true;
      while (true) {
        value->array.emplace_back();
        if (!parseValue(&value->array.back(), depth + 1))
          return false;
        skipSpace();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == ']')
          return ++pos, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      value->kind = Value::String;
      return parseString(&value->string);
    }
    if (c == 't' || c == 'f') {
      value->kind = Value::Bool;
      value->boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n')
      return literal("null");
    const char *begin = text.c_str() + pos;
    char *end = nullptr;
    value->number = std::strtod(begin, &end);
    if (end == begin)
      return fail("unexpected character");
    value->kind = Value::Number;
    pos += end - begin;
    return true;
  }

  const std::string &text;
  size_t pos = 0;
  std::string message;
};
} // namespace

bool liger::runtime::json::parse(const std::string &text, Value *value,
                                 std::string *error) {
  return Parser(text).parseDocument(value, error);
}
