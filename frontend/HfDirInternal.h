//===- HfDirInternal.h - what HfDir.cpp and HfGeneration.cpp share ----------===//
//
// Internal to the Hugging Face directory reader (HfDir.h): file helpers, the
// location of a config.json key, and the config values computed outside
// HfDir.cpp (HfGeneration.cpp: the generation settings and the LLaMA family's
// derived values).
//
//===----------------------------------------------------------------------===//
#ifndef TFC_FRONTEND_HFDIRINTERNAL_H
#define TFC_FRONTEND_HFDIRINTERNAL_H

#include "frontend/HfDir.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tfc {
namespace hf {

/// A config.json field of the wrong JSON type; describeDirectory turns it into
/// one error at the field's line.
struct FieldTypeError {
  std::string field, want;
};

/// config.json's |key| as a T, |dflt| when it is absent or null (as the
/// configs' classes read them); throws FieldTypeError for any other type
/// (nlohmann's value() would throw a type_error that names no field).
template <class T> T cfgGet(const nlohmann::json &cfg, const char *key, T dflt) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null())
    return dflt;
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean())
      throw FieldTypeError{key, "true or false"};
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer())
      throw FieldTypeError{key, "an integer"};
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!it->is_number())
      throw FieldTypeError{key, "a number"};
  } else if (!it->is_string()) {
    throw FieldTypeError{key, "a string"};
  }
  return it->get<T>();
}

bool isFile(const std::string &p);
bool readText(const std::string &p, std::string &out);
/// The 1-based line and column of the first `"key":` in |text| (0, 0 if absent).
std::pair<int, int> keyPos(const std::string &text, const std::string &key);

/// The generation settings of |dir| into |cfg|: generation_config.json's
/// (read into |genText|, empty without one) over config.json's, checked: the
/// ids (an eos_token_id list for the decoder-only families), the search
/// settings tfc compiles, the sampling defaults of the decoder-only families
/// (|family| llama or gpt2), and an error for any setting that changes the
/// tokens and that tfc does not implement.
bool readGenerationSettings(const std::string &dir, const std::string &family,
                            nlohmann::json &cfg, const std::string &cfgText,
                            const std::string &cfgPath, std::string &genText, DirError &err);

/// config.json's layer_types (transformers 5): per layer, whether it is
/// sliding_attention (true) or full_attention (false). "" or what is wrong.
std::string readLayerTypes(const nlohmann::json &lt, int64_t layers, std::vector<bool> &sliding);

/// The N of "layer i is marked when i + 1 is a multiple of N" (Gemma's global
/// layers, SmolLM3's layers without rotary positions): the first marked layer's
/// i + 1, or layers + 1 when none is. |bad| is the first layer that breaks the
/// pattern, -1 when none does.
int64_t oneInEvery(const std::vector<bool> &marked, int64_t &bad);

/// Whether |family|'s description is decoder-only: it reads generation_config.json's
/// sampling defaults, and (but GPT-2's) up to eight end-of-sequence ids.
bool isDecoderOnly(const std::string &family);

/// Sets |err| to "FIELD: MSG" at FIELD's line and column in config.json (|cfgText|
/// at |cfgPath|); returns false.
bool fieldError(const std::string &cfgText, const std::string &cfgPath, const char *field,
                const std::string &msg, DirError &err);

/// What LlamaConfig derives, into |cfg| (models/hf/llama.yaml's computed values).
bool llamaValues(nlohmann::json &cfg, const std::string &cfgText, const std::string &cfgPath,
                 DirError &err);
/// What T5Config derives, into |cfg| (models/hf/t5.yaml): the activation and
/// whether it is gated from feed_forward_proj ("relu", "gated-gelu", ...), the
/// decoder depth, and the tied output's d_model^-0.5 rescale.
bool t5Values(nlohmann::json &cfg, const std::string &cfgText, const std::string &cfgPath,
              DirError &err);
/// The derived values of |family|'s description: t5Values, llamaValues,
/// gemmaValues, layerNormDecoderValues (phi, starcoder2, stablelm) or
/// gptNeoxValues; true for a family that derives none.
bool familyValues(const std::string &family, nlohmann::json &cfg, const std::string &cfgText,
                  const std::string &cfgPath, DirError &err);

/// GPT-NeoX (models/hf/gpt_neox.yaml): transformers 4's rotary_pct and
/// rotary_emb_base as partial_rotary_factor and rope_theta, then
/// layerNormDecoderValues.
bool gptNeoxValues(nlohmann::json &cfg, const std::string &cfgText, const std::string &cfgPath,
                   DirError &err);

/// The LayerNorm decoders' values (models/hf/phi.yaml, starcoder2.yaml):
/// llamaValues, a rope that is default or linear (else an error naming
/// |family|'s description), and pad = eos when config.json has no pad_token_id.
bool layerNormDecoderValues(nlohmann::json &cfg, const std::string &cfgText,
                            const std::string &cfgPath, const std::string &family,
                            DirError &err);

/// What GemmaConfig, Gemma2Config and Gemma3TextConfig derive, into |cfg|
/// (HfGemma.cpp): head_dim,
/// num_key_value_heads, the global and local layers' rope bases and linear
/// factors, the window, global_every, the soft-caps and qk_norm
/// (models/hf/gemma.yaml). Bidirectional attention, which tfc does not
/// implement, is an error that names the field.
bool gemmaValues(nlohmann::json &cfg, const std::string &cfgText, const std::string &cfgPath,
                 DirError &err);

/// Gemma 3's image-text checkpoints (model_type gemma3,
/// Gemma3ForConditionalGeneration: Gemma 3 4B, 12B and 27B) as their text model:
/// |cfg| becomes text_config over Gemma3TextConfig's defaults (transformers saves
/// a sub-config's fields only where they differ from them), model_type
/// gemma3_text, with the top level's ids and tie_word_embeddings. The vision
/// tower is not compiled. A missing or malformed text_config is an error.
bool gemma3TextOfMultimodal(nlohmann::json &cfg, const std::string &cfgText,
                            const std::string &cfgPath, DirError &err);

} // namespace hf
} // namespace tfc

#endif // TFC_FRONTEND_HFDIRINTERNAL_H
