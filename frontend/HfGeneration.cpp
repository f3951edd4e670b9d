//===- HfGeneration.cpp - a Hugging Face directory's generation settings ---===//
//
// The part of describeDirectory (HfDir.cpp) that reads generation_config.json
// and config.json's search settings, and the values the LLaMA family computes
// from config.json (HfDirInternal.h).
//
//===----------------------------------------------------------------------===//
#include "frontend/HfDirInternal.h"

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

namespace tfc {
namespace hf {
namespace {

using json = nlohmann::json;

/// generation_config.json's search settings tfc reads (or rejects) besides
/// the token ids.
const char *const kGenerationFields[] = {
    "num_beams", "max_length", "min_length", "no_repeat_ngram_size", "early_stopping",
    "length_penalty", "bad_words_ids", "repetition_penalty", "encoder_repetition_penalty",
    "encoder_no_repeat_ngram_size", "num_beam_groups", "diversity_penalty", "do_sample",
    "suppress_tokens", "begin_suppress_tokens", "forced_decoder_ids", "temperature", "top_k",
    "top_p",
    "exponential_decay_length_penalty", "sequence_bias", "min_new_tokens", "max_new_tokens",
    "constraints", "force_words_ids", "typical_p", "epsilon_cutoff", "eta_cutoff",
    "renormalize_logits", "remove_invalid_values"};

} // namespace

bool readGenerationSettings(const std::string &dir, const std::string &family, json &cfg,
                            const std::string &cfgText, const std::string &cfgPath,
                            std::string &genText, DirError &err) {
  auto fail = [&](const std::string &file, const std::string &msg, int line = 0, int col = 0) {
    err = {file, line, col, msg};
    return false;
  };
  // The generation settings that change tokens: generation_config.json's win
  // over config.json's (transformers reads them from there first).
  std::string genPath = dir + "/generation_config.json";
  if (isFile(genPath) && readText(genPath, genText)) {
    json gen;
    try {
      gen = json::parse(genText);
    } catch (const std::exception &e) {
      return fail(genPath, std::string("invalid JSON: ") + e.what());
    }
    for (const char *f : {"decoder_start_token_id", "bos_token_id", "eos_token_id", "pad_token_id",
                          "forced_bos_token_id", "forced_eos_token_id"}) {
      auto it = gen.is_object() ? gen.find(f) : gen.end();
      if (it == gen.end() || it->is_null())
        continue;
      json v = *it;
      if (v.is_array() && v.size() == 1)
        v = v[0]; // [2]: one id
      if (std::string(f) == "eos_token_id" && v.is_array() && !v.empty()) {
        cfg[f] = v; // several end-of-sequence ids: below
        continue;
      }
      if (!v.is_number_integer()) {
        auto [l, c] = keyPos(genText, f);
        return fail(genPath, std::string(f) + ": " + it->dump() +
                                 " is not supported (tfc takes one token id)", l, c);
      }
      cfg[f] = v;
    }
    if (gen.is_object())
      for (const char *f : kGenerationFields)
        if (auto it = gen.find(f); it != gen.end())
          cfg[f] = *it;
  }
  // The search settings (generation_config.json's, else config.json's, as
  // transformers' GenerationConfig.from_model_config reads older checkpoints).
  {
    const std::string &srcText = genText.empty() ? cfgText : genText;
    const std::string &srcPath = genText.empty() ? cfgPath : genPath;
    auto bad = [&](const char *f, const std::string &msg) {
      auto [l, c] = keyPos(srcText, f);
      if (l == 0)
        std::tie(l, c) = keyPos(cfgText, f);
      return fail(l && srcText.find(std::string("\"") + f + "\"") != std::string::npos ? srcPath
                                                                                   : cfgPath,
                  std::string(f) + ": " + msg, l, c);
    };
    if (auto it = cfg.find("early_stopping"); it != cfg.end() && !it->is_null()) {
      if (it->is_boolean())
        cfg["early_stopping"] = it->get<bool>() ? 1 : 0;
      else if (it->is_string() && it->get<std::string>() == "never")
        cfg["early_stopping"] = 2;
      else
        return bad("early_stopping", it->dump() + " is not true, false or \"never\"");
    }
    if (auto it = cfg.find("bad_words_ids"); it != cfg.end() && !it->is_null()) {
      // Marian's [[pad_token_id]]: one banned token.
      if (!it->is_array() || it->size() != 1 || !(*it)[0].is_array() || (*it)[0].size() != 1 ||
          !(*it)[0][0].is_number_integer())
        return bad("bad_words_ids", it->dump() + " is not supported (tfc bans one single-token "
                                                "bad word, such as Marian's [[pad_token_id]])");
      cfg["suppress_id"] = (*it)[0][0];
    }
    // Sampling defaults: the decoder-only descriptions read do_sample (0 or 1),
    // temperature, top_k and top_p (docs/generation.md); the others cannot sample.
    const bool decoderOnly = isDecoderOnly(family);
    if (decoderOnly) {
      if (auto it = cfg.find("do_sample"); it != cfg.end() && !it->is_null()) {
        if (!it->is_boolean())
          return bad("do_sample", it->dump() + " is not true or false");
        cfg["do_sample"] = it->get<bool>() ? 1 : 0;
      }
      auto num = [&](const char *f) { return cfg.contains(f) && cfg[f].is_number(); };
      if (cfg.contains("temperature") && !cfg["temperature"].is_null() &&
          !(num("temperature") && cfg["temperature"].get<double>() > 0))
        return bad("temperature", cfg["temperature"].dump() + " is not a positive number");
      if (cfg.contains("top_k") && !cfg["top_k"].is_null() &&
          !(cfg["top_k"].is_number_integer() && cfg["top_k"].get<int64_t>() >= 0))
        return bad("top_k", cfg["top_k"].dump() + " is not a non-negative integer");
      if (cfg.contains("top_p") && !cfg["top_p"].is_null() &&
          !(num("top_p") && cfg["top_p"].get<double>() > 0 && cfg["top_p"].get<double>() <= 1))
        return bad("top_p", cfg["top_p"].dump() + " is not in (0, 1]");
    }
    // Settings that change the tokens and that tfc does not implement, at any
    // value but their default: an error, never a silent difference.
    const std::vector<std::pair<const char *, json>> unsupported = {
        {"repetition_penalty", 1.0},        {"encoder_repetition_penalty", 1.0},
        {"encoder_no_repeat_ngram_size", 0}, {"num_beam_groups", 1},
        {"diversity_penalty", 0.0},
        {"suppress_tokens", nullptr},        {"begin_suppress_tokens", nullptr},
        {"forced_decoder_ids", nullptr},     {"exponential_decay_length_penalty", nullptr},
        {"sequence_bias", nullptr},          {"min_new_tokens", nullptr},
        {"max_new_tokens", nullptr},         {"constraints", nullptr},
        {"force_words_ids", nullptr},        {"typical_p", 1.0},
        {"epsilon_cutoff", 0.0},             {"eta_cutoff", 0.0},
        {"renormalize_logits", false},       {"remove_invalid_values", false}};
    if (!decoderOnly)
      if (auto it = cfg.find("do_sample"); it != cfg.end() && !it->is_null() && *it != false &&
                                          *it != 0)
        return bad("do_sample", it->dump() + " is not supported by tfc's " + family +
                                    " description (tfc samples decoder-only models)");
    for (const auto &[f, dflt] : unsupported) {
      auto it = cfg.find(f);
      if (it == cfg.end() || it->is_null() || *it == dflt ||
          (dflt.is_number() && it->is_number() && it->get<double>() == dflt.get<double>()))
        continue;
      if (std::string(f) == "repetition_penalty")
        return bad(f, it->dump() + " is not supported as the model's default (model.bin "
                                   "records none; it changes the tokens, so it is not "
                                   "ignored): give it per request (tfrun "
                                   "--repetition-penalty, repetition_penalty= in Python)");
      return bad(f, it->dump() + " is not supported by tfc's generation (it changes the "
                                 "tokens, so it is not ignored; docs/generation.md lists what "
                                 "tfc implements)");
    }
  }

  // Several end-of-sequence ids (Llama 3's [128001, 128008, 128009]): the
  // first is eos_token_id, the others eos_token_id_2 .. eos_token_id_8, which
  // the decoder-only descriptions read (eos_id_2 ...); any of them ends a
  // sequence.
  if (auto it = cfg.find("eos_token_id"); it != cfg.end() && it->is_array()) {
    json ids = *it;
    const std::string &srcText = genText.empty() ? cfgText : genText;
    auto [l, c] = keyPos(srcText, "eos_token_id");
    const std::string &where = genText.empty() ? cfgPath : genPath;
    if (ids.empty() || ids.size() > 8)
      return fail(where, "eos_token_id: " + ids.dump() + " is not one to eight token ids", l, c);
    for (const json &e : ids)
      if (!e.is_number_integer() || e.get<int64_t>() < 0)
        return fail(where, "eos_token_id: " + ids.dump() + " holds " + e.dump() +
                               ", not a token id", l, c);
    if (ids.size() > 1 && (!isDecoderOnly(family) || family == "gpt2"))
      return fail(where, "eos_token_id: " + ids.dump() + " is not supported by tfc's " +
                             family + " description (it takes one token id)", l, c);
    cfg["eos_token_id"] = ids[0];
    for (size_t i = 1; i < ids.size(); ++i)
      cfg["eos_token_id_" + std::to_string(i + 1)] = ids[i];
  }

  return true;
}

bool isDecoderOnly(const std::string &family) {
  for (const char *f : {"llama", "gemma", "gpt2", "phi", "starcoder2", "stablelm", "gpt_neox",
                        "cohere", "gpt_bigcode"})
    if (family == f)
      return true;
  return false;
}

int64_t oneInEvery(const std::vector<bool> &marked, int64_t &bad) {
  const int64_t layers = static_cast<int64_t>(marked.size());
  int64_t every = layers + 1;
  for (int64_t i = 0; i < layers; ++i)
    if (marked[i]) {
      every = i + 1;
      break;
    }
  bad = -1;
  for (int64_t i = 0; i < layers && bad < 0; ++i)
    if (marked[i] != ((i + 1) % every == 0))
      bad = i;
  return every;
}

bool fieldError(const std::string &cfgText, const std::string &cfgPath, const char *field,
                const std::string &msg, DirError &err) {
  auto [l, c] = keyPos(cfgText, field);
  err = {cfgPath, l, c, std::string(field) + ": " + msg};
  return false;
}

std::string readLayerTypes(const json &lt, int64_t layers, std::vector<bool> &sliding) {
  if ((int64_t)lt.size() != layers)
    return "has " + std::to_string(lt.size()) + " entries for " + std::to_string(layers) +
           " layers";
  sliding.assign(lt.size(), false);
  for (size_t i = 0; i < lt.size(); ++i) {
    if (lt[i] != "full_attention" && lt[i] != "sliding_attention")
      return lt[i].dump() + " is not full_attention or sliding_attention";
    sliding[i] = lt[i] == "sliding_attention";
  }
  return "";
}

/// original_max_position_embeddings of the rope parameters, else of config.json;
/// 0 when neither has a number.
static double originalPositions(const json &rope, const json &cfg) {
  for (const json *j : {&rope, &cfg})
    if (auto it = j->find("original_max_position_embeddings"); it != j->end() && it->is_number())
      return it->get<double>();
  return 0;
}

/// Phi-3's LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini), as transformers'
/// _compute_longrope_parameters: per-frequency divisors, short_factor up to the
/// pretraining length original_max_position_embeddings and long_factor beyond,
/// and cos and sin times attention_factor (default sqrt(1 + ln(factor) /
/// ln(original)), factor = max_position_embeddings / original unless given).
/// transformers switches to the long factors in a forward pass whose positions
/// pass the original length; tfc picks them once, at compile time, from the
/// context it compiles for (max_len, as llama.cpp picks them from its context
/// size). The default context is the original length, where the short factors
/// are transformers' exactly; --set max_len=N beyond it takes the long ones.
template <class Fail>
static bool longropeValues(json &cfg, const json &rope, const char *where, Fail fail) {
  const int64_t half = cfg["rope_dim"].get<int64_t>() / 2;
  for (const char *k : {"short_factor", "long_factor"}) {
    auto it = rope.find(k);
    if (it == rope.end() || !it->is_array() || (int64_t)it->size() != half)
      return fail(where, std::string("longrope needs ") + k + ": a list of rope_dim / 2 = " +
                             std::to_string(half) + " numbers");
    for (const auto &v : *it)
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
        return fail(where, std::string("longrope ") + k + " holds " + v.dump() +
                               ", not a positive number");
    cfg[std::string("rope_") + k] = *it;
  }
  double original = originalPositions(rope, cfg);
  const double maxPos = cfgGet(cfg, "max_position_embeddings", 0.0);
  if (!original)
    original = maxPos;
  if (!(original >= 2 && original < 2147483648.0) || original != std::floor(original))
    return fail(where, "longrope needs original_max_position_embeddings, an integer from 2 "
                       "to 2^31 - 1");
  double factor = maxPos / original;
  if (auto it = rope.find("factor"); it != rope.end() && it->is_number())
    factor = it->get<double>();
  double attention = factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(original));
  if (auto it = rope.find("attention_factor"); it != rope.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() > 0))
      return fail(where, "attention_factor " + it->dump() + " is not a positive number");
    attention = it->get<double>();
  }
  cfg["rope_attention_factor"] = attention;
  cfg["rope_original_max_len"] = static_cast<int64_t>(original);
  cfg["max_position_embeddings"] = static_cast<int64_t>(original);
  return true;
}

/// YaRN (Qwen2.5's and Qwen3's long-context setting), as transformers'
/// _compute_yarn_parameters: factor (max_position_embeddings /
/// original_max_position_embeddings when null), original_max_position_embeddings,
/// beta_fast and beta_slow (32 and 1 when null), truncate, and the attention
/// factor, given or from mscale and mscale_all_dim (DeepSeek's) or 0.1 ln(factor) +
/// 1. The importer's `yarn` scaling computes the frequencies.
template <class Fail>
static bool yarnValues(json &cfg, const json &rope, const char *where, Fail fail) {
  auto num = [&](const char *k, double dflt) {
    auto it = rope.find(k);
    return it != rope.end() && it->is_number() ? it->get<double>() : dflt;
  };
  double original = originalPositions(rope, cfg);
  if (!(original >= 1 && original < 2147483648.0) || original != std::floor(original))
    return fail(where, "yarn needs original_max_position_embeddings, a positive integer");
  double factor = num("factor", cfgGet(cfg, "max_position_embeddings", 0.0) / original);
  if (!(factor > 0) || !std::isfinite(factor))
    return fail(where, "yarn needs a positive factor");
  auto mscale = [](double scale, double m) {
    return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
  };
  double attention = mscale(factor, 1);
  const double m = num("mscale", 0), mAll = num("mscale_all_dim", 0);
  if (m && mAll)
    attention = mscale(factor, m) / mscale(factor, mAll);
  if (auto it = rope.find("attention_factor"); it != rope.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() > 0))
      return fail(where, "attention_factor " + it->dump() + " is not a positive number");
    attention = it->get<double>();
  }
  // transformers: `beta_fast or 32`, so 0 and null alike take the default.
  const double fast = num("beta_fast", 0), slow = num("beta_slow", 0);
  cfg["rope_factor"] = factor;
  cfg["rope_original_max_len"] = original;
  cfg["rope_beta_fast"] = fast ? fast : 32.0;
  cfg["rope_beta_slow"] = slow ? slow : 1.0;
  cfg["rope_truncate"] = 1;
  if (auto it = rope.find("truncate"); it != rope.end() && it->is_boolean())
    cfg["rope_truncate"] = it->get<bool>() ? 1 : 0;
  cfg["rope_attention_factor"] = attention;
  return true;
}

/// What LlamaConfig derives, into |cfg|: head_dim, num_key_value_heads,
/// rope_type (default, linear, llama3), rope_theta, rope_dim (head_dim times
/// partial_rotary_factor) and the scaling's parameters as rope_factor,
/// rope_low_freq_factor, rope_high_freq_factor, rope_original_max_len. A rope
/// type tfc does not implement is an error that names it.
bool llamaValues(json &cfg, const std::string &cfgText, const std::string &cfgPath,
               DirError &err) {
  auto fail = [&](const char *field, const std::string &msg) {
    return fieldError(cfgText, cfgPath, field, msg, err);
  };
  auto number = [](const json &j, const char *k, double dflt) {
    auto it = j.find(k);
    return it != j.end() && it->is_number() ? it->get<double>() : dflt;
  };
  const std::string type0 = cfgGet(cfg, "model_type", std::string("llama"));
  // The sliding window: which layers have it, as transformers decides. config.json's
  // layer_types (transformers 5) says so per layer; else Mistral's, Phi-3's and StarCoder2's
  // sliding_window is on every layer, and Qwen2's and Qwen3's (with
  // use_sliding_window) on the layers from max_window_layers on. tfc maps "every
  // layer from window_from on" (models/hf/llama.yaml).
  const int64_t layers = cfgGet<int64_t>(cfg, "num_hidden_layers", 1);
  std::vector<bool> sliding(std::max<int64_t>(layers, 0), false);
  const char *windowField = "sliding_window";
  auto win = cfg.find("sliding_window");
  const bool hasWindow = win != cfg.end() && !win->is_null();
  if (auto lt = cfg.find("layer_types"); lt != cfg.end() && lt->is_array()) {
    windowField = "layer_types";
    if (std::string msg = readLayerTypes(*lt, layers, sliding); !msg.empty())
      return fail("layer_types", msg);
  } else if (hasWindow && (type0 == "mistral" || type0 == "phi3" || type0 == "starcoder2")) {
    std::fill(sliding.begin(), sliding.end(), true);
  } else if (hasWindow && cfgGet(cfg, "use_sliding_window", false)) {
    const int64_t from = cfgGet<int64_t>(cfg, "max_window_layers", layers);
    for (int64_t i = std::max<int64_t>(from, 0); i < layers; ++i)
      sliding[i] = true;
  }
  // SmolLM3's layer_types mark sliding layers that only use_sliding_window turns on.
  if (type0 == "smollm3" && !cfgGet(cfg, "use_sliding_window", false))
    std::fill(sliding.begin(), sliding.end(), false);
  int64_t from = layers; // no layer has the window
  for (int64_t i = 0; i < layers; ++i)
    if (sliding[i]) {
      from = i;
      break;
    }
  for (int64_t i = from; i < layers; ++i)
    if (!sliding[i])
      return fail(windowField, "layer " + std::to_string(i) + " has no sliding window after "
                               "layer " + std::to_string(from) + " has one: tfc maps a window "
                               "on every layer from one on");
  cfg["window"] = 0;
  cfg["window_from"] = from;
  // SmolLM3's NoPE layers: no_rope_layers (1: the layer has rotary positions,
  // 0: none) or, without it, every no_rope_layer_interval-th layer without.
  // tfc maps "no rotary when i + 1 is a multiple of nope_every" (layers + 1:
  // rotary everywhere).
  cfg["nope_every"] = layers + 1;
  if (type0 == "smollm3") {
    std::vector<bool> nope(std::max<int64_t>(layers, 0), false);
    const char *ropeField = "no_rope_layers";
    if (auto it = cfg.find("no_rope_layers"); it != cfg.end() && !it->is_null()) {
      if (!it->is_array() || (int64_t)it->size() != layers)
        return fail("no_rope_layers", "must be a list of num_hidden_layers (" +
                                          std::to_string(layers) + ") 0s and 1s");
      for (int64_t i = 0; i < layers; ++i) {
        const json &e = (*it)[i];
        if (!(e.is_boolean() || (e.is_number_integer() && (e == 0 || e == 1))))
          return fail("no_rope_layers", "entry " + std::to_string(i) + " is " + e.dump() +
                                            ", not 0 or 1");
        nope[i] = e.is_boolean() ? !e.get<bool>() : e.get<int64_t>() == 0;
      }
    } else {
      ropeField = "no_rope_layer_interval";
      int64_t interval = 4;
      if (auto iv = cfg.find("no_rope_layer_interval"); iv != cfg.end() && !iv->is_null()) {
        if (!iv->is_number_integer() || iv->get<int64_t>() <= 0)
          return fail("no_rope_layer_interval", iv->dump() + " is not a positive integer");
        interval = iv->get<int64_t>();
      }
      for (int64_t i = 0; i < layers; ++i)
        nope[i] = (i + 1) % interval == 0;
    }
    int64_t bad;
    const int64_t every = oneInEvery(nope, bad);
    if (bad >= 0)
      return fail(ropeField, "layer " + std::to_string(bad) + " breaks the pattern tfc maps "
                             "(no rotary positions on one layer in every " +
                             std::to_string(every) + ")");
    cfg["nope_every"] = every;
  }
  if (from < layers) {
    if (!hasWindow || !win->is_number_integer() || win->get<int64_t>() <= 0)
      return fail("sliding_window", (hasWindow ? win->dump() : std::string("null")) +
                                        " is not a positive integer");
    cfg["window"] = win->get<int64_t>();
  }
  // Qwen2's q/k/v projections always have biases, its o_proj never (whatever
  // attention_bias says); Llama's follow attention_bias; Qwen3 norms each head
  // of the queries and keys.
  const bool bias = cfgGet(cfg, "attention_bias", false);
  cfg["qkv_bias"] = type0 == "qwen2" ? true : bias;
  cfg["o_bias"] = type0 == "qwen2" ? false : bias;
  cfg["qk_norm"] = type0 == "qwen3" || type0 == "olmo2"; // OLMo 2's over the projection
  // Granite's multipliers (models/hf/llama.yaml reads them): finite numbers, the
  // logits' divisor not zero.
  if (type0 == "granite")
    for (const std::string k : {"embedding_multiplier", "residual_multiplier",
                                "attention_multiplier", "logits_scaling"}) {
      const bool divisor = k == "logits_scaling";
      auto it = cfg.find(k);
      if (it != cfg.end() && !it->is_null() &&
          (!it->is_number() || !std::isfinite(it->get<double>()) ||
           (divisor && it->get<double>() == 0)))
        return fail(k.c_str(), it->dump() + " is not a finite number" +
                                   (divisor ? " other than zero" : ""));
    }
  // How the projections are stored: Phi-3 packs Q, K and V in qkv_proj and the
  // gate and up projections in gate_up_proj (models/hf/llama.yaml's *_form).
  const bool packed = type0 == "phi3";
  cfg["qkv_form"] = packed ? "packed" : cfg["qkv_bias"].get<bool>() ? "bias" : "plain";
  // Llama's mlp_bias puts a bias on the gate, up and down projections.
  cfg["ff_form"] = packed ? "packed" : cfgGet(cfg, "mlp_bias", false) ? "bias" : "split";
  // The sizes that derive others: positive integers (below 2^31, as every size
  // a description takes), or one error that names the field.
  auto size = [&](const char *k, int64_t dflt, int64_t &v) {
    auto it = cfg.find(k);
    v = dflt;
    if (it == cfg.end() || it->is_null())
      return true;
    if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() >= (1LL << 31))
      return fail(k, it->dump() + " is not a positive integer below 2^31");
    v = it->get<int64_t>();
    return true;
  };
  int64_t hidden, heads, headDim, kvHeads;
  if (!size("hidden_size", 2048, hidden) || !size("num_attention_heads", 32, heads) ||
      !size("head_dim", hidden / heads, headDim) ||
      !size("num_key_value_heads", heads, kvHeads))
    return false;
  cfg["head_dim"] = headDim;
  cfg["num_key_value_heads"] = kvHeads;
  // transformers 5 keeps everything in rope_parameters; older configs have
  // rope_theta beside a rope_scaling dict (or null).
  json rope = json::object();
  const char *where = "rope_scaling";
  if (auto it = cfg.find("rope_parameters"); it != cfg.end() && it->is_object()) {
    rope = *it;
    where = "rope_parameters";
  } else if (auto it = cfg.find("rope_scaling"); it != cfg.end() && !it->is_null()) {
    if (!it->is_object())
      return fail("rope_scaling", it->dump() + " is not an object");
    rope = *it;
  }
  std::string type = "default";
  for (const char *k : {"rope_type", "type"})
    if (auto it = rope.find(k); it != rope.end() && it->is_string()) {
      type = it->get<std::string>();
      break;
    }
  if (type != "default" && type != "linear" && type != "llama3" && type != "longrope" &&
      type != "yarn")
    return fail(where, "rope type \"" + type + "\" is not supported (tfc implements "
                       "default, linear, llama3, longrope and yarn; it changes the outputs, "
                       "so it is not ignored)");
  if (auto it = rope.find("attention_factor"); type != "longrope" && type != "yarn" &&
                                                 it != rope.end() && it->is_number() &&
                                                 it->get<double>() != 1.0)
    return fail(where, "attention_factor " + it->dump() + " is not supported");
  cfg["rope_type"] = type;
  cfg["rope_theta"] = number(rope, "rope_theta", number(cfg, "rope_theta", 10000.0));
  const double partial =
      number(rope, "partial_rotary_factor", number(cfg, "partial_rotary_factor", 1.0));
  if (!(partial > 0 && partial <= 1))
    return fail(rope.contains("partial_rotary_factor") ? where : "partial_rotary_factor",
                "partial_rotary_factor must be in (0, 1], got " + json(partial).dump());
  cfg["rope_dim"] = static_cast<int64_t>(static_cast<double>(headDim) * partial);
  if (type == "longrope")
    return longropeValues(cfg, rope, where, fail);
  if (type == "yarn")
    return yarnValues(cfg, rope, where, fail);
  if (type != "default") {
    if (!rope.contains("factor") || !rope["factor"].is_number())
      return fail(where, "rope type \"" + type + "\" needs a numeric factor");
    cfg["rope_factor"] = rope["factor"];
  }
  if (type == "llama3") {
    for (const char *k : {"low_freq_factor", "high_freq_factor",
                          "original_max_position_embeddings"})
      if (!rope.contains(k) || !rope[k].is_number())
        return fail(where, std::string("llama3 rope scaling needs a numeric ") + k);
    cfg["rope_low_freq_factor"] = rope["low_freq_factor"];
    cfg["rope_high_freq_factor"] = rope["high_freq_factor"];
    cfg["rope_original_max_len"] = rope["original_max_position_embeddings"];
  }
  return true;
}

bool t5Values(json &cfg, const std::string &cfgText, const std::string &cfgPath,
              DirError &err) {
  std::string ffp = cfgGet(cfg, "feed_forward_proj", std::string("relu"));
  const bool gated = ffp.compare(0, 6, "gated-") == 0;
  std::string act = gated ? ffp.substr(6) : ffp;
  if (act.empty() || act.find('-') != std::string::npos)
    return fieldError(cfgText, cfgPath, "feed_forward_proj",
                      "\"" + ffp + "\" is not ACT or gated-ACT", err);
  cfg["is_gated_act"] = gated;
  cfg["dense_act_fn"] = ffp == "gated-gelu" ? "gelu_new" : act; // as T5Config
  if (!cfg.contains("num_decoder_layers") || cfg["num_decoder_layers"].is_null())
    cfg["num_decoder_layers"] = cfgGet<int64_t>(cfg, "num_layers", 6);
  if (!cfg.contains("tie_word_embeddings") || !cfg["tie_word_embeddings"].is_boolean())
    cfg["tie_word_embeddings"] = true;
  // transformers 5 writes scale_decoder_outputs (and always ties); older
  // configs say untied (v1.1's own lm_head, no rescale) with tie_word_embeddings.
  bool scaled = cfg["tie_word_embeddings"].get<bool>();
  if (auto it = cfg.find("scale_decoder_outputs"); it != cfg.end() && it->is_boolean())
    scaled = it->get<bool>();
  cfg["out_scale"] = scaled ? 1.0 / std::sqrt(cfgGet(cfg, "d_model", 512.0)) : 1.0;
  return true;
}

/// No pad_token_id: pad with eos, as transformers' generate() does.
static void padWithEos(json &cfg) {
  if (auto p = cfg.find("pad_token_id"); p == cfg.end() || p->is_null())
    cfg["pad_token_id"] = cfgGet<int64_t>(cfg, "eos_token_id", 50256);
}

bool layerNormDecoderValues(json &cfg, const std::string &cfgText, const std::string &cfgPath,
                            const std::string &family, DirError &err) {
  // Llama's derived sizes, window and rotary embedding (the description reads
  // head_dim, num_key_value_heads, rope_dim, rope_type, rope_factor and window).
  if (!llamaValues(cfg, cfgText, cfgPath, err))
    return false;
  if (cfg["rope_type"] != "default" && cfg["rope_type"] != "linear")
    return fieldError(cfgText, cfgPath,
                      cfg.contains("rope_parameters") ? "rope_parameters" : "rope_scaling",
                      "rope type " + cfg["rope_type"].dump() + " is not supported by tfc's " +
                          family + " description (default and linear)",
                      err);
  padWithEos(cfg); // Phi-2 and StarCoder2 have no pad_token_id
  return true;
}

bool gptNeoxValues(json &cfg, const std::string &cfgText, const std::string &cfgPath,
                   DirError &err) {
  // transformers 4's names (Pythia's configs on the Hub), unless rope_parameters
  // (transformers 5) says.
  if (!cfg.contains("rope_parameters") || !cfg["rope_parameters"].is_object()) {
    for (auto [from, to] : {std::pair<const char *, const char *>{"rotary_pct",
                                                                  "partial_rotary_factor"},
                            {"rotary_emb_base", "rope_theta"}})
      if (auto it = cfg.find(from); it != cfg.end() && !it->is_null() && !cfg.contains(to))
        cfg[to] = *it;
  }
  return layerNormDecoderValues(cfg, cfgText, cfgPath, "gpt_neox", err);
}

bool familyValues(const std::string &family, json &cfg, const std::string &cfgText,
                  const std::string &cfgPath, DirError &err) {
  if (family == "t5")
    return t5Values(cfg, cfgText, cfgPath, err);
  // GPT-2 and GPT-BigCode: the feed-forward's width, 4 x n_embd unless n_inner says.
  if ((family == "gpt2" || family == "gpt_bigcode") &&
      (!cfg.contains("n_inner") || cfg["n_inner"].is_null()))
    cfg["n_inner"] = 4 * cfgGet<int64_t>(cfg, "n_embd", 768);
  if (family == "gpt_bigcode") {
    // One key/value head with multi_query (the default), else one per head; no
    // pad_token_id pads with eos.
    cfg["kv_heads"] = cfgGet(cfg, "multi_query", true) ? 1 : cfgGet<int64_t>(cfg, "n_head", 12);
    padWithEos(cfg);
    return true;
  }
  // Llama: head_dim and the key/value heads when config.json leaves them out,
  // and the rotary embedding from rope_parameters (transformers 5) or
  // rope_theta and rope_scaling (older configs; `type` an alias of `rope_type`).
  if (family == "llama")
    return llamaValues(cfg, cfgText, cfgPath, err);
  if (family == "gemma")
    return gemmaValues(cfg, cfgText, cfgPath, err);
  if (family == "phi" || family == "starcoder2" || family == "stablelm")
    return layerNormDecoderValues(cfg, cfgText, cfgPath, family, err);
  if (family == "cohere") {
    // Cohere's logits times logit_scale: a finite number other than zero (the
    // description divides by its inverse).
    if (auto it = cfg.find("logit_scale"); it != cfg.end() && !it->is_null() &&
        (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() == 0))
      return fieldError(cfgText, cfgPath, "logit_scale",
                        it->dump() + " is not a finite number other than zero", err);
    return layerNormDecoderValues(cfg, cfgText, cfgPath, family, err);
  }
  if (family == "gpt_neox")
    return gptNeoxValues(cfg, cfgText, cfgPath, err);
  return true;
}

} // namespace hf
} // namespace tfc
