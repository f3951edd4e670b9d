//===- HfDir.h - a Hugging Face model directory as a tfc description ------===//
//
// `tfc compile DIR` / `tfc import DIR`: when the input is a directory with a
// config.json, its `model_type` picks a bundled family description (models/hf/,
// compiled into tfc), whose `# config: FIELD` lines take their values from
// config.json, and the weights come from model.safetensors (or a sharded
// checkpoint's model.safetensors.index.json), with a task checkpoint's prefix
// (`bert.`) renamed away. The result is ordinary YAML text for the importer.
// No MLIR here: this file uses nlohmann-json, whose exceptions stay inside it.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_FRONTEND_HFDIR_H
#define TFC_FRONTEND_HFDIR_H

#include <map>
#include <string>
#include <vector>

namespace tfc {
namespace hf {

/// Why a directory cannot be described. |line| and |col| are 1-based, or 0 when
/// the error is about the file as a whole.
struct DirError {
  std::string file;
  int line = 0, col = 0;
  std::string message;
};

/// The description of a model directory.
struct DirModel {
  std::string yamlText;   ///< a complete tfc description (docs/model-format.md)
  std::string family;     ///< the bundled family used, e.g. "bert"
  std::string configPath; ///< DIR/config.json
  std::string head;       ///< the output head used, e.g. "last_hidden_state"
};

/// An output head: the `output:` section it stands for, and the bundled file.
struct Head {
  std::string text;
  std::string file; ///< e.g. "models/hf/bert.heads.yaml"
};

/// The output heads of bundled family |family|: its own
/// (models/hf/<family>.heads.yaml) and, for a family that has heads, the shared
/// pooling heads (models/hf/pooling.heads.yaml). None for a family without.
std::map<std::string, Head> familyHeads(const std::string &family);

/// The bundled family descriptions' names (models/hf/<name>.yaml), sorted.
std::vector<std::string> bundledFamilies();

/// The text of bundled family |name|, or nullptr.
const char *bundledFamilyText(const std::string &name);

/// Describes the model directory |dir| with output head |head| ("" picks one
/// from the directory: docs/hf.md). Returns false and fills |err| when it
/// has no config.json, an unknown model_type, a config field tfc does not
/// support, no safetensors weights, or an unknown head.
bool describeDirectory(const std::string &dir, DirModel &out, DirError &err,
                       const std::string &head = "");

/// Replaces the value of parameter |name| in the `params:` section of |yaml|
/// (a `  name: value` line) by |value|, marking it `# --set`. Returns false if
/// there is no such line.
bool setParamText(std::string &yaml, const std::string &name, const std::string &value);

} // namespace hf
} // namespace tfc

#endif // TFC_FRONTEND_HFDIR_H
