//===- SafetensorsIndex.cpp - a sharded checkpoint's index.json -----------===//
//
// Hugging Face writes a checkpoint over a few gigabytes as shards
// (model-00001-of-00002.safetensors, ...) plus `model.safetensors.index.json`,
// whose "weight_map" says which shard holds each tensor. This reads that map;
// the WeightStore opens the shards. nlohmann-json throws, so everything here runs
// inside one try/catch and comes back as a message.
//
//===----------------------------------------------------------------------------===//
#include "frontend/Safetensors.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

namespace tfc {

bool readSafetensorsIndex(const std::string &path, SafetensorsIndex &out,
                          std::string *error) {
  auto fail = [&](const std::string &msg) {
    if (error)
      *error = msg;
    return false;
  };
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fail("cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  try {
    nlohmann::json j = nlohmann::json::parse(text.str());
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      return fail("not a safetensors index: expected a JSON object with a "
                  "\"weight_map\" object");
    std::set<std::string> seen;
    for (auto &[name, file] : j["weight_map"].items()) {
      if (!file.is_string())
        return fail("\"weight_map\" entry '" + name + "' is not a file name");
      std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos ||
          f.find('\\') != std::string::npos || f == "." || f == "..")
        return fail("\"weight_map\" entry '" + name + "' names '" + f +
                    "', not a file beside the index");
      out.weightMap[name] = f;
      if (seen.insert(f).second)
        out.shards.push_back(f);
    }
    if (out.shards.empty())
      return fail("\"weight_map\" is empty");
  } catch (const std::exception &e) {
    std::string m = e.what();
    // nlohmann's "[json.exception.parse_error.101] " prefix says nothing to a user.
    if (!m.empty() && m[0] == '[') {
      size_t close = m.find("] ");
      if (close != std::string::npos)
        m = m.substr(close + 2);
    }
    return fail("invalid JSON: " + m);
  } catch (...) {
    return fail("invalid JSON");
  }
  return true;
}

} // namespace tfc
