//===- HfDir.cpp - a Hugging Face model directory as a tfc description ----===//
//
// See HfDir.h. A family is data: its description (models/hf/<name>.yaml,
// embedded at build time into HfFamilies.inc) says which config field each
// value comes from (`d_model: 768  # config: hidden_size`; the value written is
// the family's default, kept when config.json lacks the field), and the table
// below says which model_types it serves, the prefixes task checkpoints put in
// front of its weights, and the config values it can compute. Anything else that
// changes the numbers is an error that names the field.
//
//===----------------------------------------------------------------------------===//
#include "frontend/HfDir.h"
#include "frontend/HfDirInternal.h"
#include "frontend/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <sys/stat.h>
#include <unistd.h>

namespace tfc {
namespace hf {
namespace {

using json = nlohmann::json;

struct Embedded {
  const char *name;
  const char *text;
};
const Embedded kEmbedded[] = {
#include "HfFamilies.inc"
};

/// A config field whose only supported values are |allowed| (JSON text); a config
/// without the field is fine (the family's default is among them).
struct Allowed {
  const char *field;
  std::vector<const char *> allowed;
};

struct Family {
  const char *name;                    // models/hf/<name>.yaml
  std::vector<const char *> modelTypes; // config.json model_type values served
  const char *probe;                   // a tensor every checkpoint has (unprefixed)
  std::vector<const char *> prefixes;  // task checkpoints' prefixes
  std::vector<Allowed> allowed;
};

const std::vector<Family> &families() {
  static const std::vector<Family> f = {
      {"bert",
       {"bert"},
       "embeddings.word_embeddings.weight",
       {"bert."},
       {{"position_embedding_type", {"\"absolute\""}},
        {"is_decoder", {"false"}},
        {"add_cross_attention", {"false"}}}},
      {"roberta",
       {"roberta", "xlm-roberta"},
       "embeddings.word_embeddings.weight",
       {"roberta."},
       {{"position_embedding_type", {"\"absolute\""}},
        {"is_decoder", {"false"}},
        {"add_cross_attention", {"false"}}}},
      {"marian",
       {"marian"},
       "model.shared.weight",
       {},
       {{"share_encoder_decoder_embeddings", {"true"}},
        {"tie_word_embeddings", {"true"}},
        {"normalize_before", {"false"}},
        {"static_position_embeddings", {"true"}}}},
      {"bart",
       {"bart"},
       "model.shared.weight",
       {},
       {{"tie_word_embeddings", {"true"}},
        {"normalize_before", {"false"}},
        {"add_final_layer_norm", {"false"}}}},
      {"distilbert",
       {"distilbert"},
       "embeddings.word_embeddings.weight",
       {"distilbert."},
       {{"sinusoidal_pos_embds", {"false"}}}},
      {"mbart",
       {"mbart"},
       "model.shared.weight",
       {},
       {{"tie_word_embeddings", {"true"}}}},
      {"t5",
       {"t5", "mt5"},
       "shared.weight",
       {},
       {{"is_decoder", {"false"}}, {"is_encoder_decoder", {"true"}}}},
      {"gpt2",
       {"gpt2"},
       "wte.weight",
       {"transformer."},
       {{"add_cross_attention", {"false"}},
        {"scale_attn_by_inverse_layer_idx", {"false"}},
        {"scale_attn_weights", {"true"}}}},
      // Mistral is Llama with a sliding window on every layer; without one
      // (Mistral 7B v0.2 and later) it is Llama. Qwen2 adds q/k/v biases,
      // Qwen3 per-head q/k norms, Phi-3 packed projections (llamaValues sets
      // qkv_bias, o_bias, qk_norm, qkv_form, ff_form). SmolLM3 leaves the
      // rotary positions out of every fourth layer (nope_every); OLMo 2 norms
      // the sublayers' outputs; Granite 3 has four multipliers.
      {"llama",
       {"llama", "mistral", "qwen2", "qwen3", "phi3", "smollm3", "olmo2", "granite"},
       "model.embed_tokens.weight",
       {},
       {}},
      // Gemma 1 and CodeGemma, Gemma 2 and Gemma 3's text model (Gemma3ForCausalLM;
      // gemma3, Gemma3ForConditionalGeneration, through gemma3TextOfMultimodal, its
      // weights under language_model. before transformers 4.52 and
      // model.language_model. since): gemmaValues derives the rest.
      {"gemma",
       {"gemma", "gemma2", "gemma3_text", "gemma3"},
       "model.embed_tokens.weight",
       {"language_model."},
       {{"attention_bias", {"false"}}}},
      // Phi-1, Phi-1.5 and Phi-2: a parallel block (attention and feed-forward
      // read one LayerNorm), partial rotary embeddings, biases everywhere;
      // llamaValues derives head_dim, the key/value heads and rope_dim.
      {"phi", {"phi"}, "model.embed_tokens.weight", {}, {}},
      // StarCoder2: pre-LayerNorm, GQA, a window on every layer, biases, GELU-tanh.
      {"starcoder2", {"starcoder2"}, "model.embed_tokens.weight", {}, {}},
      // StableLM: pre-LayerNorm (or a parallel block), a quarter of each head
      // rotated, SwiGLU; per-head q/k norms with weights of their own are not mapped.
      {"stablelm",
       {"stablelm"},
       "model.embed_tokens.weight",
       {},
       {{"qk_layernorm", {"false"}}, {"hidden_act", {"\"silu\""}}}},
      // GPT-NeoX (Pythia): Q, K and V interleaved by head, a parallel block by
      // default, exact GELU.
      {"gpt_neox", {"gpt_neox"}, "gpt_neox.embed_in.weight", {}, {{"hidden_act", {"\"gelu\""}}}},
      // GPT-BigCode (StarCoder, Granite Code 20B/34B): GPT-2 with nn.Linear layers
      // and multi-query attention.
      {"gpt_bigcode",
       {"gpt_bigcode"},
       "wte.weight",
       {"transformer."},
       {{"add_cross_attention", {"false"}}}},
      // Cohere: a parallel block on a LayerNorm without a bias, interleaved rotary
      // pairs, scaled logits; per-head q/k norm weights are not mapped.
      {"cohere",
       {"cohere"},
       "model.embed_tokens.weight",
       {},
       {{"use_qk_norm", {"false"}}, {"hidden_act", {"\"silu\""}}}},
  };
  return f;
}

/// config.json's hidden_act -> the feed_forward activation computing it.
const std::map<std::string, std::string> kActivations = {
    {"gelu", "gelu"},
    {"gelu_new", "gelu_tanh"},
    {"gelu_pytorch_tanh", "gelu_tanh"},
    {"relu", "relu"},
    {"swish", "silu"},
    {"silu", "silu"},
};

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

bool isFile(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool readText(const std::string &p, std::string &out) {
  std::ifstream in(p, std::ios::binary);
  if (!in)
    return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

/// The 1-based line and column of the first `"key":` in |text| (0, 0 if absent):
/// nlohmann keeps no positions, and a config field is a top-level key.
std::pair<int, int> keyPos(const std::string &text, const std::string &key) {
  std::string q = "\"" + key + "\"";
  for (size_t at = text.find(q); at != std::string::npos; at = text.find(q, at + 1)) {
    size_t k = at + q.size();
    while (k < text.size() && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' ||
                               text[k] == '\r'))
      ++k;
    if (k < text.size() && text[k] == ':') {
      int line = 1 + (int)std::count(text.begin(), text.begin() + at, '\n');
      size_t bol = text.rfind('\n', at);
      int col = (int)(at - (bol == std::string::npos ? 0 : bol + 1)) + 1;
      return {line, col};
    }
  }
  return {0, 0};
}

namespace {

/// Whether |line|'s `# when:` condition holds (true without one).
bool keepWhen(const std::string &line, const json &cfg) {
  static const std::string kTag = "# when: ";
  size_t at = line.find(kTag);
  if (at == std::string::npos)
    return true;
  std::string cond = line.substr(at + kTag.size());
  for (const char *op : {"==", "!="}) {
    size_t o = cond.find(op);
    if (o == std::string::npos)
      continue;
    auto trim = [](std::string t) {
      t.erase(0, t.find_first_not_of(' '));
      t.erase(t.find_last_not_of(" \r") + 1);
      return t;
    };
    const std::string field = trim(cond.substr(0, o)), want = trim(cond.substr(o + 2));
    // Only `# when: FIELD OP VALUE` closing the line is a condition (not prose
    // that mentions it): one identifier, one value without spaces.
    if (field.empty() || want.empty() || want.find(' ') != std::string::npos ||
        field.find_first_not_of("abcdefghijklmnopqrstuvwxyz_0123456789") != std::string::npos)
      return true;
    auto it = cfg.find(field);
    const std::string have = it == cfg.end() ? "null" : it->dump();
    return (have == want) == (op[0] == '=');
  }
  return true;
}

/// A line's `# when: FIELD == VALUE` (or !=) condition against |cfg|; a line
/// without one is kept. VALUE is JSON (true, false, 3, "relu"); a field the
/// config lacks compares as null. A kept line that starts with `# alt: ` (an
/// alternative the family file leaves commented, so that it stays valid YAML
/// on its own) is uncommented.
bool keepLine(std::string &line, const json &cfg) {
  static const std::string kAlt = "# alt: ";
  const size_t ind = line.find_first_not_of(' ');
  const bool alt = ind != std::string::npos && line.compare(ind, kAlt.size(), kAlt) == 0;
  if (!keepWhen(line, cfg))
    return false;
  if (alt)
    line.erase(ind, kAlt.size());
  return true;
}

std::string quoteYaml(const std::string &s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string joinNames(const std::vector<std::string> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + v[i];
  return s;
}

/// Fills the `# config: FIELD` lines of |text| from |cfg|. Returns false and sets
/// |err| (located in config.json) for a value tfc cannot use.
bool fillFromConfig(std::string &text, const json &cfg, const std::string &cfgText,
                    const std::string &cfgPath, DirError &err) {
  static const std::string kTag = "# config: ";
  std::string out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!keepLine(line, cfg))
      continue;
    // `${FIELD}`: the computed value as JSON, which YAML reads (a list: Phi-3's
    // longrope factors). One the config lacks stays, for the importer to reject.
    for (size_t at = line.find("${"); at != std::string::npos; at = line.find("${", at)) {
      const size_t end = line.find('}', at);
      if (end == std::string::npos)
        break;
      auto it = cfg.find(line.substr(at + 2, end - at - 2));
      if (it == cfg.end() || it->is_null()) {
        at = end;
        continue;
      }
      const std::string v = it->dump();
      line.replace(at, end + 1 - at, v);
      at += v.size();
    }
    size_t tag = line.find(kTag);
    size_t colon = line.find(": ");
    if (tag != std::string::npos && colon != std::string::npos && colon < tag) {
      std::string field = line.substr(tag + kTag.size());
      while (!field.empty() && (field.back() == ' ' || field.back() == '\r'))
        field.pop_back();
      std::string key = line.substr(0, colon);
      std::string keyName = key.substr(key.find_first_not_of(' '));
      auto it = cfg.find(field);
      if (it != cfg.end() && !it->is_null()) {
        const std::pair<int, int> pos = keyPos(cfgText, field);
        const int l = pos.first, c = pos.second; // not a structured binding: a lambda captures them
        auto bad = [&](const std::string &msg) {
          err = {cfgPath, l, c, msg};
          return false;
        };
        std::string value;
        if (keyName == "activation") {
          if (!it->is_string())
            return bad(field + " must be a string");
          auto a = kActivations.find(it->get<std::string>());
          if (a == kActivations.end()) {
            std::vector<std::string> known;
            for (auto &kv : kActivations)
              known.push_back(kv.first);
            return bad(field + " '" + it->get<std::string>() +
                       "' is not supported (supported: " + joinNames(known) + ")");
          }
          value = a->second;
        } else {
          if (!it->is_number())
            return bad(field + " must be a number, not " + it->dump());
          value = it->dump();
        }
        // Keep the key and the comment, replace the value in between.
        std::string pad(std::max<int>(1, (int)tag - (int)(colon + 2) - (int)value.size()), ' ');
        line = key + ": " + value + pad + line.substr(tag);
      }
    }
    out += line + "\n";
  }
  text = out;
  return true;
}

} // namespace

std::vector<std::string> bundledFamilies() {
  std::vector<std::string> v;
  for (const auto &e : kEmbedded)
    if (!endsWith(std::string(e.name), ".heads"))
      v.push_back(e.name);
  std::sort(v.begin(), v.end());
  return v;
}

const char *bundledFamilyText(const std::string &name) {
  for (const auto &e : kEmbedded)
    if (name == e.name)
      return e.text;
  return nullptr;
}

bool setParamText(std::string &yaml, const std::string &name, const std::string &value) {
  size_t params = yaml.find("\nparams:\n");
  if (params == std::string::npos)
    return false;
  size_t at = params + 9;
  while (at < yaml.size() && yaml.compare(at, 2, "  ") == 0) {
    size_t eol = yaml.find('\n', at);
    if (eol == std::string::npos)
      eol = yaml.size();
    if (yaml.compare(at, name.size() + 4, "  " + name + ": ") == 0) {
      yaml.replace(at, eol - at, "  " + name + ": " + value + "  # --set");
      return true;
    }
    at = eol + 1;
  }
  return false;
}

std::map<std::string, Head> familyHeads(const std::string &family) {
  std::map<std::string, Head> heads;
  static const std::string kTag = "\n# head: ";
  // The family's own heads first, so they win over a shared one of that name.
  for (const std::string &file : {family + ".heads", std::string("pooling.heads")}) {
    const char *text = bundledFamilyText(file);
    // The shared pooling heads serve the families that have heads of their own.
    if (!text || (file == "pooling.heads" && heads.empty()))
      continue;
    std::string t = std::string("\n") + text;
    for (size_t at = t.find(kTag); at != std::string::npos;) {
      size_t nameEnd = t.find('\n', at + kTag.size());
      std::string name = t.substr(at + kTag.size(), nameEnd - at - kTag.size());
      size_t next = t.find(kTag, nameEnd);
      heads.emplace(name, Head{t.substr(nameEnd + 1, (next == std::string::npos ? t.size() : next) -
                                                          nameEnd - 1),
                               "models/hf/" + file + ".yaml"});
      at = next;
    }
  }
  return heads;
}

namespace {
/// The head a directory gets without --head: a *ForSequenceClassification
/// checkpoint its classifier; a sentence-transformers directory (modules.json
/// naming a Pooling module) its pooling, normalized if a Normalize module
/// follows; anything else the family's first head.
std::string defaultHead(const std::string &dir, const json &cfg,
                        const std::map<std::string, Head> &heads) {
  if (auto a = cfg.find("architectures"); a != cfg.end() && a->is_array())
    for (const auto &arch : *a)
      if (arch.is_string() && endsWith(arch.get<std::string>(), "ForSequenceClassification") &&
          heads.count("classifier"))
        return "classifier";
  std::string modulesText;
  if (readText(dir + "/modules.json", modulesText)) {
    try {
      json modules = json::parse(modulesText);
      bool pooling = false, normalize = false;
      std::string poolingPath;
      for (const auto &m : modules) {
        std::string type = m.value("type", "");
        if (endsWith(type, "Pooling")) {
          pooling = true;
          poolingPath = m.value("path", "");
        }
        normalize |= endsWith(type, "Normalize");
      }
      std::string mode = "mean";
      std::string poolText;
      if (pooling && readText(dir + "/" + poolingPath + "/config.json", poolText)) {
        json pc = json::parse(poolText);
        if (pc.value("pooling_mode_cls_token", false))
          mode = "cls";
      }
      if (pooling && mode == "cls" && heads.count("cls_pooling"))
        return "cls_pooling";
      if (pooling && heads.count(normalize ? "sentence_embedding" : "mean_pooling"))
        return normalize ? "sentence_embedding" : "mean_pooling";
    } catch (const std::exception &) {
      // Not sentence-transformers' layout: the plain default.
    }
  }
  return heads.count("last_hidden_state") ? "last_hidden_state" : "";
}
} // namespace

static bool describe(const std::string &dirIn, DirModel &out, DirError &err,
                     const std::string &headIn) {
  std::string dir = dirIn;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  std::string cfgPath = dir + "/config.json";
  auto fail = [&](const std::string &file, const std::string &msg, int line = 0, int col = 0) {
    err = {file, line, col, msg};
    return false;
  };
  std::string cfgText;
  if (!isFile(cfgPath) || !readText(cfgPath, cfgText))
    return fail(dir, "'" + dir + "' is a directory without a config.json: tfc compiles a "
                     "model description (.yaml) or a Hugging Face model directory");
  json cfg;
  try {
    cfg = json::parse(cfgText);
  } catch (const std::exception &e) {
    std::string m = e.what();
    size_t close = m.find("] ");
    if (!m.empty() && m[0] == '[' && close != std::string::npos)
      m = m.substr(close + 2);
    return fail(cfgPath, "invalid JSON: " + m);
  }
  if (!cfg.is_object())
    return fail(cfgPath, "config.json must be a JSON object");

  // Gemma 3's image-text checkpoints compile as their text model.
  std::string sourceType;
  if (auto t = cfg.find("model_type"); t != cfg.end() && t->is_string() && *t == "gemma3") {
    sourceType = "gemma3";
    if (!gemma3TextOfMultimodal(cfg, cfgText, cfgPath, err))
      return false;
  }

  // The family.
  auto mt = cfg.find("model_type");
  std::vector<std::string> types;
  for (const auto &f : families())
    types.insert(types.end(), f.modelTypes.begin(), f.modelTypes.end());
  std::sort(types.begin(), types.end());
  std::string familyList = joinNames(types);
  if (mt == cfg.end() || !mt->is_string())
    return fail(cfgPath, "config.json has no \"model_type\" string; tfc has descriptions "
                         "for the model types: " + familyList);
  std::string modelType = mt->get<std::string>();
  const Family *fam = nullptr;
  for (const auto &f : families())
    for (const char *t : f.modelTypes)
      if (modelType == t)
        fam = &f;
  if (!fam) {
    auto [l, c] = keyPos(cfgText, "model_type");
    return fail(cfgPath, "model_type '" + modelType + "' has no bundled description; tfc has "
                         "descriptions for the model types: " + familyList, l, c);
  }

  // Config values that change the numbers and that the family cannot compute.
  for (const Allowed &a : fam->allowed) {
    auto it = cfg.find(a.field);
    if (it == cfg.end() || it->is_null())
      continue;
    std::string v = it->dump();
    if (std::find(a.allowed.begin(), a.allowed.end(), v) != a.allowed.end())
      continue;
    std::string ok;
    for (size_t i = 0; i < a.allowed.size(); ++i)
      ok += std::string(i ? " or " : "") + a.allowed[i];
    auto [l, c] = keyPos(cfgText, a.field);
    return fail(cfgPath, std::string(a.field) + ": " + v + " is not supported by tfc's " +
                             fam->name + " description (it computes " + a.field + ": " + ok +
                             "); it changes the outputs, so it is not ignored", l, c);
  }

  // The generation settings (HfGeneration.cpp).
  std::string genText;
  if (!readGenerationSettings(dir, fam->name, cfg, cfgText, cfgPath, genText, err))
    return false;

  // transformers starts decoding from bos_token_id when there is no
  // decoder_start_token_id (mBART's configs).
  if ((!cfg.contains("decoder_start_token_id") || cfg["decoder_start_token_id"].is_null()) &&
      cfg.contains("bos_token_id") && cfg["bos_token_id"].is_number_integer())
    cfg["decoder_start_token_id"] = cfg["bos_token_id"];

  // The classifier's size: num_labels, else id2label's (transformers writes
  // the latter).
  if (!cfg.contains("num_labels"))
    if (auto l = cfg.find("id2label"); l != cfg.end() && l->is_object() && !l->empty())
      cfg["num_labels"] = l->size();

  // Values the family computes from config.json: Marian's embedding scale.
  if (cfg.contains("scale_embedding") && cfg["scale_embedding"].is_boolean()) {
    const double d = cfgGet(cfg, "d_model", 512.0);
    cfg["embed_scale"] = cfg["scale_embedding"].get<bool>() ? std::sqrt(d) : 1.0;
  }

  // What the T5, GPT-2, Llama, Gemma and the LayerNorm decoders' configs derive.
  if (!familyValues(fam->name, cfg, cfgText, cfgPath, err))
    return false;

  std::string text = bundledFamilyText(fam->name);
  if (!fillFromConfig(text, cfg, cfgText, cfgPath, err))
    return false;

  // The output head replaces the description's `output:` section.
  const std::map<std::string, Head> heads = familyHeads(fam->name);
  std::string head = headIn.empty() ? defaultHead(dir, cfg, heads) : headIn;
  if (!head.empty()) {
    auto h = heads.find(head);
    if (h == heads.end()) {
      std::vector<std::string> known;
      for (const auto &kv : heads)
        known.push_back(kv.first);
      return fail(dir, "--head " + head + ": the " + std::string(fam->name) +
                           " description has the heads: " + joinNames(known));
    }
    size_t o = text.find("\noutput:");
    if (o == std::string::npos)
      return fail(cfgPath, std::string("models/hf/") + fam->name + ".yaml has no output: section");
    text = text.substr(0, o + 1) + "# head: " + head + " (" + h->second.file + ")\n" +
           h->second.text;
    out.head = head;
  }

  // The weights: safetensors only.
  std::string weights;
  std::vector<std::string> names;
  std::string single = dir + "/model.safetensors", index = dir + "/model.safetensors.index.json";
  std::string e;
  if (isFile(single)) {
    weights = single;
    auto f = SafetensorsFile::open(single, &e);
    if (!f)
      return fail(single, "cannot read weights: " + e);
    for (const auto &t : f->tensors())
      names.push_back(t.name);
  } else if (isFile(index)) {
    weights = index;
    SafetensorsIndex idx;
    if (!readSafetensorsIndex(index, idx, &e))
      return fail(index, "cannot read the checkpoint index: " + e);
    for (const auto &kv : idx.weightMap)
      names.push_back(kv.first);
  } else {
    for (const char *pickle : {"pytorch_model.bin", "pytorch_model.bin.index.json"})
      if (isFile(dir + "/" + pickle))
        return fail(dir + "/" + pickle,
                    "the weights are a PyTorch pickle (" + std::string(pickle) +
                        ") and tfc does not unpickle, since loading a pickle runs code; "
                        "convert them to safetensors once, e.g. python -c \"from "
                        "transformers import AutoModel; AutoModel.from_pretrained('" + dir +
                        "').save_pretrained('" + dir + "', safe_serialization=True)\"");
    return fail(dir, "no weights in '" + dir + "': expected model.safetensors or "
                     "model.safetensors.index.json");
  }

  // A task checkpoint keeps the body under a prefix (bert.embeddings...).
  auto has = [&](const std::string &n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  std::string prefix;
  // transformers 4.52 and later save Gemma 3's image-text text model as
  // model.language_model.* (no model. level of its own), its lm_head at the top.
  std::string moveFrom, moveTo;
  if (sourceType == "gemma3" && !has(fam->probe) &&
      has("model.language_model.embed_tokens.weight")) {
    moveFrom = "model.";
    moveTo = "model.language_model.";
  }
  if (!has(fam->probe) && moveFrom.empty()) {
    bool found = false;
    for (const char *p : fam->prefixes)
      if (has(std::string(p) + fam->probe)) {
        prefix = p;
        found = true;
        break;
      }
    if (!found) {
      std::string tried = "'" + std::string(fam->probe) + "'";
      for (const char *p : fam->prefixes)
        tried += " or '" + std::string(p) + fam->probe + "'";
      return fail(weights, "not a " + std::string(fam->name) + " checkpoint: it has no " +
                               tried);
    }
  }

  // Absolute, so the YAML `tfc import` writes compiles from anywhere.
  std::string abs = weights;
  if (abs.empty() || abs[0] != '/') {
    char buf[4096];
    if (::getcwd(buf, sizeof buf))
      abs = std::string(buf) + "/" + weights;
  }
  std::ostringstream os;
  os << "# " << (sourceType.empty() ? modelType : sourceType + " (its text model)")
     << " checkpoint " << dir << ", described by tfc's bundled "
     << "models/hf/" << fam->name << ".yaml\n"
     << "# with the values of " << cfgPath << " (`tfc import`).\n"
     << text << "\nweights: " << quoteYaml(abs) << "\n";
  if (!moveFrom.empty())
    os << "rename:\n  " << quoteYaml(moveFrom) << ": " << quoteYaml(moveTo)
       << "   # the text model of an image-text checkpoint\n";
  if (!prefix.empty()) {
    os << "rename:\n  \"\": " << quoteYaml(prefix) << "   # a task checkpoint's body\n";
    // The task's own modules (classifier.*) stay where they are: the longest
    // rename prefix wins (docs/model-format.md, "Weights").
    std::set<std::string> top;
    for (const std::string &n : names)
      if (n.compare(0, prefix.size(), prefix) != 0 && n.find('.') != std::string::npos)
        top.insert(n.substr(0, n.find('.') + 1));
    for (const std::string &t : top)
      os << "  " << quoteYaml(t) << ": " << quoteYaml(t) << "\n";
  }
  out.yamlText = os.str();
  out.family = fam->name;
  out.configPath = cfgPath;
  return true;
}

bool describeDirectory(const std::string &dirIn, DirModel &out, DirError &err,
                       const std::string &headIn) {
  // A config field of the wrong type (cfgGet), or one that a step reads with
  // nlohmann's own typed access: one error at config.json, never an exception
  // out of the frontend.
  std::string dir = dirIn;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  const std::string cfgPath = dir + "/config.json";
  try {
    return describe(dirIn, out, err, headIn);
  } catch (const FieldTypeError &e) {
    std::string text;
    readText(cfgPath, text);
    auto [l, c] = keyPos(text, e.field);
    err = {cfgPath, l, c, e.field + ": must be " + e.want};
  } catch (const nlohmann::json::exception &e) {
    err = {cfgPath, 0, 0, std::string("a field has an unexpected type (") + e.what() + ")"};
  }
  return false;
}

} // namespace hf
} // namespace tfc
