//===- HfGemma.cpp - what Gemma's configs derive ---------------------------===//
//
// The values the Gemma family (models/hf/gemma.yaml: Gemma 1, CodeGemma, Gemma 2
// and Gemma 3) computes from config.json, and Gemma 3's image-text config as its
// text model (HfDirInternal.h).
//
//===----------------------------------------------------------------------===//
#include "frontend/HfDirInternal.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace tfc {
namespace hf {

using json = nlohmann::json;

/// The rope of one Gemma layer type: its base and its linear factor (1 for
/// the default rope); any other rope type is an error that names it.
static bool gemmaRope(const json &rope, double theta0, const char *where, double &theta,
                      double &factor, std::string &msg) {
  std::string type = "default";
  for (const char *k : {"rope_type", "type"})
    if (auto it = rope.find(k); it != rope.end() && it->is_string()) {
      type = it->get<std::string>();
      break;
    }
  if (type != "default" && type != "linear") {
    msg = std::string(where) + ": rope type \"" + type + "\" is not supported (tfc implements "
          "default and linear for Gemma; it changes the outputs, so it is not ignored)";
    return false;
  }
  auto it = rope.find("rope_theta");
  theta = it != rope.end() && it->is_number() ? it->get<double>() : theta0;
  factor = 1.0;
  if (type == "linear") {
    auto f = rope.find("factor");
    if (f == rope.end() || !f->is_number() || !(f->get<double>() > 0)) {
      msg = std::string(where) + ": linear rope scaling needs a positive numeric factor";
      return false;
    }
    factor = f->get<double>();
  }
  return true;
}

bool gemmaValues(json &cfg, const std::string &cfgText, const std::string &cfgPath,
                 DirError &err) {
  auto fail = [&](const char *field, const std::string &msg) {
    return fieldError(cfgText, cfgPath, field, msg, err);
  };
  const std::string type = cfgGet(cfg, "model_type", std::string());
  // Gemma 1 (and CodeGemma): two norms a layer, every layer global, one rope,
  // the scale head_dim^-0.5; Gemma 2 adds the post-norms, local layers and the
  // soft-caps, Gemma 3 the q/k norms and a second rope base.
  const bool gemma1 = type == "gemma", gemma2 = type == "gemma2";
  const bool oneRope = gemma1 || gemma2;
  // Gemma 2's tanh soft-capping (Gemma 3 leaves both null): 0 is none.
  for (auto [f, key] : {std::pair<const char *, const char *>{"attn_logit_softcapping",
                                                              "attn_softcap"},
                        {"final_logit_softcapping", "final_softcap"}}) {
    cfg[key] = 0.0;
    if (auto it = cfg.find(f); it != cfg.end() && !it->is_null()) {
      if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>()))
        return fail(f, it->dump() + " is not a positive number or null");
      cfg[key] = it->get<double>();
    }
  }
  cfg["qk_norm"] = type == "gemma3_text"; // Gemma 3's per-head q/k norms
  cfg["post_norms"] = !gemma1;              // Gemma 2 and 3: four norms a layer
  if (cfgGet(cfg, "use_bidirectional_attention", false))
    return fail("use_bidirectional_attention", "true is not supported (tfc's Gemma is causal)");
  const int64_t hidden = cfgGet<int64_t>(cfg, "hidden_size", 1152), heads = cfgGet<int64_t>(cfg, "num_attention_heads", 4);
  if (!cfg.contains("head_dim") || cfg["head_dim"].is_null())
    cfg["head_dim"] = hidden / std::max<int64_t>(heads, 1);
  if (!cfg.contains("num_key_value_heads") || cfg["num_key_value_heads"].is_null())
    cfg["num_key_value_heads"] = heads;
  if (gemma1)
    cfg["query_pre_attn_scalar"] = cfg["head_dim"]; // GemmaAttention: head_dim^-0.5
  else if (!cfg.contains("query_pre_attn_scalar") || cfg["query_pre_attn_scalar"].is_null())
    cfg["query_pre_attn_scalar"] = 256;
  // Gemma 1's configs say hidden_act "gelu" and mean the tanh approximation
  // (transformers' GemmaConfig rewrites it; 4.x read hidden_activation first).
  if (gemma1) {
    auto ha = cfg.find("hidden_activation");
    std::string act = ha != cfg.end() && ha->is_string() ? ha->get<std::string>()
                                                         : cfgGet(cfg, "hidden_act",
                                                                  std::string("gelu_pytorch_tanh"));
    cfg["hidden_activation"] = act == "gelu" ? "gelu_pytorch_tanh" : act;
  }
  if (!cfg.contains("tie_word_embeddings") || !cfg["tie_word_embeddings"].is_boolean())
    cfg["tie_word_embeddings"] = true; // Gemma's default
  // Which layers are global: layer_types (transformers 5), else one layer in
  // sliding_window_pattern. tfc maps "global when i + 1 is a multiple of N".
  const int64_t layers = cfgGet<int64_t>(cfg, "num_hidden_layers", 26);
  if (layers < 1)
    return fail("num_hidden_layers", "must be a positive integer");
  std::vector<bool> global(layers, true);
  if (gemma1) {
    // every layer global, whatever a sliding_window field says
  } else if (auto it = cfg.find("layer_types"); it != cfg.end() && it->is_array()) {
    if (std::string msg = readLayerTypes(*it, layers, global); !msg.empty())
      return fail("layer_types", msg);
    global.flip(); // sliding -> global
  } else {
    int64_t pattern = gemma2 ? 2 : 6; // Gemma 2's older configs alternate
    if (auto p = cfg.find("sliding_window_pattern"); p != cfg.end() && p->is_number_integer())
      pattern = p->get<int64_t>();
    if (pattern <= 0)
      return fail("sliding_window_pattern", "must be a positive integer");
    for (int64_t i = 0; i < layers; ++i)
      global[i] = (i + 1) % pattern == 0;
  }
  int64_t bad;
  const int64_t every = oneInEvery(global, bad); // layers + 1: no global layer at all
  if (bad >= 0)
    return fail(cfg.contains("layer_types") ? "layer_types" : "sliding_window_pattern",
                "layer " + std::to_string(bad) + " breaks the pattern tfc maps (one global "
                "layer in every " + std::to_string(every) + ")");
  cfg["global_every"] = every;
  cfg["window"] = 0;
  if (every != 1) {
    auto it = cfg.find("sliding_window");
    if (it == cfg.end() || !it->is_number_integer() || it->get<int64_t>() <= 0)
      return fail("sliding_window", "the local layers need a positive integer window");
    cfg["window"] = it->get<int64_t>();
  }
  // The rope of each layer type: transformers 5's rope_parameters keyed by
  // layer type, or rope_theta + rope_scaling (global) and rope_local_base_freq.
  // Gemma 2 has one rope for both: rope_parameters (flat) or rope_theta and
  // rope_scaling.
  json globalRope = json::object(), localRope = json::object();
  const char *where = "rope_scaling";
  double theta0 = cfgGet(cfg, "rope_theta", oneRope ? 10000.0 : 1000000.0),
         local0 = cfgGet(cfg, "rope_local_base_freq", 10000.0);
  if (auto it = cfg.find("rope_parameters"); it != cfg.end() && it->is_object() &&
                                             it->contains("full_attention")) {
    where = "rope_parameters";
    globalRope = (*it)["full_attention"];
    if (it->contains("sliding_attention"))
      localRope = (*it)["sliding_attention"];
  } else if (it != cfg.end() && it->is_object() && oneRope) {
    where = "rope_parameters";
    globalRope = *it;
  } else if (auto it = cfg.find("rope_scaling"); it != cfg.end() && it->is_object()) {
    globalRope = *it;
  }
  if (oneRope) {
    localRope = globalRope;
    local0 = theta0;
  }
  if (!globalRope.is_object() || !localRope.is_object())
    return fail(where, "has a layer type's rope that is not an object");
  double theta, factor, ltheta, lfactor;
  std::string msg;
  if (!gemmaRope(globalRope, theta0, where, theta, factor, msg) ||
      !gemmaRope(localRope, local0, where, ltheta, lfactor, msg)) {
    auto [l, c] = keyPos(cfgText, where);
    err = {cfgPath, l, c, msg};
    return false;
  }
  cfg["rope_theta"] = theta;
  cfg["rope_factor"] = factor;
  cfg["rope_local_theta"] = ltheta;
  cfg["rope_local_factor"] = lfactor;
  return true;
}

bool gemma3TextOfMultimodal(json &cfg, const std::string &cfgText, const std::string &cfgPath,
                            DirError &err) {
  auto tc = cfg.find("text_config");
  if (tc == cfg.end() || !tc->is_object()) {
    auto [l, c] = keyPos(cfgText, tc == cfg.end() ? "model_type" : "text_config");
    err = {cfgPath, l, c,
           "model_type 'gemma3' (Gemma3ForConditionalGeneration) needs a text_config object: "
           "tfc compiles its text model"};
    return false;
  }
  // Gemma3TextConfig's defaults (transformers' configuration_gemma3.py), which a
  // saved text_config leaves out: Gemma 3 4B's lists only what differs.
  json text = {{"vocab_size", 262208},
               {"hidden_size", 2304},
               {"intermediate_size", 9216},
               {"num_hidden_layers", 26},
               {"num_attention_heads", 8},
               {"num_key_value_heads", 4},
               {"head_dim", 256},
               {"hidden_activation", "gelu_pytorch_tanh"},
               {"max_position_embeddings", 131072},
               {"rms_norm_eps", 1e-6},
               {"pad_token_id", 0},
               {"eos_token_id", 1},
               {"bos_token_id", 2},
               {"tie_word_embeddings", true},
               {"rope_theta", 1000000.0},
               {"rope_local_base_freq", 10000.0},
               {"attention_bias", false},
               {"query_pre_attn_scalar", 256},
               {"sliding_window", 4096},
               {"sliding_window_pattern", 6},
               {"final_logit_softcapping", nullptr},
               {"attn_logit_softcapping", nullptr}};
  for (auto it = tc->begin(); it != tc->end(); ++it)
    text[it.key()] = it.value();
  // The top level's ids and tying are the model's (Gemma 3 4B: eos_token_id [1, 106]).
  for (const char *k : {"eos_token_id", "bos_token_id", "pad_token_id", "tie_word_embeddings"})
    if (auto it = cfg.find(k); it != cfg.end() && !it->is_null())
      text[k] = *it;
  text["model_type"] = "gemma3_text";
  cfg = std::move(text);
  return true;
}

} // namespace hf
} // namespace tfc
