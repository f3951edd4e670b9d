//===- ImporterSchema.cpp - locations, errors and schema checks -----------===//
//
// The schema is checked as the importer walks the document: unknown keys (with a
// did-you-mean), values of the wrong kind and unknown choices all stop the import
// with one error at the offending node. This file holds those checks, the
// locations they report at, and the check of the document's top level. The key
// lists themselves stay next to the code that reads the keys.
//
//===----------------------------------------------------------------------------===//
#include "frontend/ImporterInternal.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace tfc::detail {

namespace {
/// Levenshtein distance, for did-you-mean suggestions.
size_t editDistance(StringRef a, StringRef b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1,
                         prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
} // namespace

std::string didYouMean(StringRef word, ArrayRef<std::string> candidates) {
  std::string best;
  size_t bestD = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto &c : candidates) {
    size_t d = editDistance(word, c);
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

std::string typeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return os.str();
}

const char *kindName(const Node &n) {
  switch (n.kind) {
  case Node::Kind::Null:
    return "nothing";
  case Node::Kind::Scalar:
    return "a scalar";
  case Node::Kind::Sequence:
    return "a list";
  case Node::Kind::Map:
    return "a map";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Locations and errors
//===----------------------------------------------------------------------===//

Location Importer::fileLoc(const Node &n, int colOffset) {
  return FileLineColLoc::get(&ctx, file, std::max(n.line, 1),
                             std::max(n.col, 1) + colOffset);
}

Location Importer::loc(const Node &n, StringRef name) {
  std::string path = name.empty() ? scopeName() : name.str();
  if (path.empty())
    return fileLoc(n);
  return NameLoc::get(StringAttr::get(&ctx, path), fileLoc(n));
}

std::string Importer::scopeName() const {
  return scope.empty() ? "" : scope.substr(0, scope.size() - 1);
}

LogicalResult Importer::error(const Node &n, const Twine &msg, int colOffset) {
  if (!errored)
    emitError(fileLoc(n, colOffset)) << msg;
  errored = true;
  return failure();
}

//===----------------------------------------------------------------------===//
// Schema checks
//===----------------------------------------------------------------------===//

LogicalResult Importer::expectMap(const Node &n, StringRef what) {
  if (!n.isMap())
    return error(n, "'" + what + "' must be a map, got " + kindName(n));
  return success();
}

LogicalResult Importer::checkKeys(const Node &n, StringRef what,
                                  const std::vector<std::string> &allowed,
                                  bool listAllowed) {
  for (const auto &e : n.entries) {
    const std::string &k = e.first.scalar;
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end())
      continue;
    std::string list =
        listAllowed ? " (allowed keys: " + llvm::join(allowed, ", ") + ")" : "";
    return error(e.first, "unknown key '" + k + "' in " + what + list +
                              didYouMean(k, allowed));
  }
  return success();
}

FailureOr<const Node *> Importer::require(const Node &map, StringRef key,
                                          StringRef what) {
  const Node *v = map.get(key.str());
  if (!v)
    return error(map, what + " needs '" + key + "'");
  return v;
}

FailureOr<std::string> Importer::getString(const Node &n, StringRef what) {
  if (!n.isScalar())
    return error(n, "'" + what + "' must be a string, got " + kindName(n));
  return n.scalar;
}

FailureOr<bool> Importer::getBool(const Node &n, StringRef what) {
  if (n.isScalar()) {
    if (n.scalar == "true" || n.scalar == "yes" || n.scalar == "on")
      return true;
    if (n.scalar == "false" || n.scalar == "no" || n.scalar == "off")
      return false;
  }
  return error(n, "'" + what + "' must be true or false, got " +
                      (n.isScalar() ? "'" + n.scalar + "'" : kindName(n)));
}

FailureOr<bool> Importer::getFlag(const Node &n, StringRef what) {
  static const char *kWords[] = {"true", "yes", "on", "false", "no", "off"};
  if (n.isScalar() && llvm::is_contained(kWords, n.scalar))
    return getBool(n, what);
  auto e = evalInt(n, what, 0);
  if (failed(e))
    return failure();
  if (*e != 0 && *e != 1)
    return error(n, what + " must be true or false, or an expression that is 1 or 0, got " +
                        Twine(*e));
  return *e == 1;
}

FailureOr<std::string> Importer::getChoice(const Node &n, StringRef what,
                                           const std::vector<std::string> &choices) {
  auto s = getString(n, what);
  if (failed(s))
    return failure();
  if (std::find(choices.begin(), choices.end(), *s) == choices.end())
    return error(n, "unknown " + what + " '" + *s + "' (expected one of: " +
                        llvm::join(choices, ", ") + ")" + didYouMean(*s, choices));
  return *s;
}

//===----------------------------------------------------------------------===//
// The document's top level
//===----------------------------------------------------------------------===//

LogicalResult Importer::checkDocument() {
  if (!root.isMap())
    return error(root, "the model description must be a map, got " +
                           std::string(kindName(root)));
  if (failed(checkKeys(root, "the model description",
                       {"tfc", "name", "description", "params", "weights", "rename",
                        "seed", "encoder", "decoder", "output"})))
    return failure();
  if (const Node *v = root.get("tfc")) {
    if (!v->isScalar() || v->scalar != "1")
      return error(*v, "unsupported model format version '" +
                           (v->isScalar() ? v->scalar : std::string("?")) +
                           "' (this tfc reads version 1)");
  }
  return success();
}

} // namespace tfc::detail
