//===- tfrun.cpp - run a compiled model.bin from the command line ---------===//
//
//   tfrun model.bin [--input NAME=FILE.npy ...] [--output-dir DIR] [--threads N]
//                   [--bench N] [--profile] [--device cpu|cuda[:N]] [--dtype f32|f16|bf16]
//   tfrun model.bin --generate --input src=FILE.npy [--beam K] [--max-len N] ...
//
// A thin client of the C API (include/tfrun/tfrun.h): every error is one line on
// stderr and exit code 1.
//
//===----------------------------------------------------------------------===//
#include "tfrun/tfrun.h"
#include "tools/tfrun/npy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cctype>
#include <cerrno>
#include <sys/resource.h>
#include <sys/stat.h>

namespace {

int64_t generationPad = 0; // the model's pad_id, for padding ids.npy

int fail(const std::string &msg) {
  std::fprintf(stderr, "tfrun: error: %s\n", msg.c_str());
  return 1;
}

int failStatus(tfrun_status_t *st) {
  std::string msg = tfrun_status_message(st);
  tfrun_status_release(st);
  return fail(msg);
}

/// docs/generation.md, "Non-finite outputs": one warning on stderr per output
/// that holds NaN or infinite values; the exit code does not change.
void warnNonFinite(const char *name, const float *data, size_t n) {
  size_t nan = 0, inf = 0;
  for (size_t k = 0; k < n; ++k) {
    nan += std::isnan(data[k]);
    inf += std::isinf(data[k]);
  }
  if (nan || inf)
    std::fprintf(stderr, "tfrun: warning: output \"%s\" holds %zu NaN and %zu inf values\n", name,
                 nan, inf);
}

const char *kUsage =
    "usage: tfrun model.bin [--input NAME=FILE.npy ...] [--output-dir DIR]\n"
    "             [--threads N] [--bench N] [--profile] [--device cpu|cuda[:N]]\n"
    "             [--dtype f32|f16|bf16]\n"
    "  --input NAME=FILE.npy  token ids (int64 or int32, [batch, seq]) for input NAME\n"
    "  --output-dir DIR       write DIR/<output>.npy for every output\n"
    "  --threads N            number of threads (default: all cores)\n"
    "  --bench N              run N times after a warm-up; print min/median/max latency,\n"
    "                         the load time, the arena and KV cache used and peak RSS\n"
    "  --profile              print the time spent per kernel (over all timed runs)\n"
    "  --device D             cpu (default), or cuda / cuda:N: the same model.bin on an\n"
    "                         NVIDIA GPU (docs/backend-cuda.md)\n"
    "  --info                 print the model's signature and sizes and the device's\n"
    "                         kernel paths (e.g. 'cpu (avx2, fma; bf16 emulated; int8\n"
    "                         without vnni; ...)'), then exit without running\n"
    "  --dtype T              with --device cuda: f32 runs the precision model.bin was\n"
    "                         compiled with; f16 or bf16 converts an f32 model once\n"
    "                         (the CPU's precision: tfc compile --precision)\n"
    "Without --input, a deterministic example input is used and each output is\n"
    "summarized.\n"
    "\n"
    "Generation (models with a decoder; docs/generation.md):\n"
    "  --generate             run the decoding loop: encoder-decoder models take the\n"
    "                         source (--input src=...), decoder-only models the prompt;\n"
    "                         prints each sequence's new ids; with --output-dir, writes\n"
    "                         ids.npy (int64 [batch, longest], pad_id-padded),\n"
    "                         lengths.npy and scores.npy\n"
    "  --beam K               beam search with K beams (default 1: greedy)\n"
    "  --max-len N            at most N new tokens, eos included (default: the cache)\n"
    "  --length-penalty A     beam score / length^A (default 1)\n"
    "  --sample               sample instead (decoder-only): --temperature T, --top-k K,\n"
    "                         --top-p P, --seed S (default: the model's generation\n"
    "                         config: do_sample, temperature, top_k, top_p)\n"
    "  --greedy               do not sample, whatever the model's config says\n"
    "  --min-p P              sampling: keep the tokens at least P times as likely as\n"
    "                         the best (after top-k and top-p; default 0: off)\n"
    "  --repetition-penalty R greedy and sampling: divide the logits of the tokens\n"
    "                         already in the sequence by R (transformers'; default 1)\n"
    "  --bos-id, --eos-id, --pad-id ID   override the ids compiled into the model\n"
    "  --bench N              with --generate: N timed generations; prints\n"
    "                         'generate: median X ms over N runs, T tokens, R tokens/s'\n";

/// `--generate`: the decoding loop in the runtime, then the ids.
/// The load and session times, and the memory --bench reports: the session's
/// arena and KV cache (tfrun_session_memory_info) and the process's peak RSS.
struct Startup {
  double loadMs = 0, sessionMs = 0;
};
void printMemory(tfrun_session_t *session, const Startup &start) {
  tfrun_memory_info_t mi{};
  if (tfrun_status_t *st = tfrun_session_memory_info(session, &mi)) {
    tfrun_status_release(st);
    return;
  }
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  auto human = [](double b) { // 1 KB = 1000 bytes, as tfc --report
    const char *units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
    int u = 0;
    while (b >= 1000 && u < 6) {
      b /= 1000;
      ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
    return std::string(buf);
  };
  std::printf("load: %.1f ms (model %.1f ms, session %.1f ms)\n", start.loadMs + start.sessionMs,
              start.loadMs, start.sessionMs);
  std::printf("memory: weights %s, arena %s (declared maxima %s), kv cache %s (declared maxima "
              "%s), peak RSS %s\n",
              human((double)mi.weights_bytes).c_str(), human((double)mi.arena_bytes).c_str(),
              human((double)mi.declared_arena_bytes).c_str(),
              human((double)mi.kv_cache_bytes).c_str(),
              human((double)mi.declared_kv_cache_bytes).c_str(),
              human(ru.ru_maxrss * 1024.0).c_str());
}

int runGenerate(tfrun_session_t *session, const tfrun_generate_options_t &gopt, int bench,
                bool profile, const std::string &outDir, const Startup &start) {
  std::vector<double> ms;
  size_t tokens = 0;
  for (int r = 0; r < std::max(bench, 1) + (bench ? 1 : 0); ++r) {
    if (bench && r == 1)
      tfrun_session_enable_profiling(session, profile);
    if (!bench)
      tfrun_session_enable_profiling(session, profile);
    auto t0 = std::chrono::steady_clock::now();
    if (tfrun_status_t *st = tfrun_session_generate(session, &gopt))
      return failStatus(st);
    double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                   .count();
    if (bench && r == 0)
      continue; // warm-up
    ms.push_back(t);
  }
  size_t n = tfrun_session_generated_count(session);
  std::vector<std::vector<int64_t>> seqs(n);
  std::vector<float> scores(n);
  size_t longest = 0;
  for (size_t b = 0; b < n; ++b) {
    const int64_t *ids;
    size_t len;
    if (tfrun_status_t *st = tfrun_session_get_generated(session, b, &ids, &len, &scores[b]))
      return failStatus(st);
    seqs[b].assign(ids, ids + len);
    longest = std::max(longest, len);
    tokens += len;
  }
  warnNonFinite("scores", scores.data(), n); // -inf: an item with nothing to choose
  if (bench) {
    std::sort(ms.begin(), ms.end());
    double med = ms[ms.size() / 2];
    std::printf("generate: median %.3f ms over %d runs, %zu tokens, %.1f tokens/s "
                "(min %.3f ms, max %.3f ms)\n",
                med, bench, tokens, med > 0 ? 1000.0 * tokens / med : 0.0, ms.front(),
                ms.back());
    printMemory(session, start);
  }
  if (profile)
    std::fputs(tfrun_session_profile(session), stdout);
  if (!outDir.empty()) {
    int64_t pad = 0;
    pad = gopt.pad_id >= 0 ? gopt.pad_id : generationPad;
    std::vector<int64_t> ids(n * std::max<size_t>(longest, 0), pad), lens(n);
    for (size_t b = 0; b < n; ++b) {
      std::copy(seqs[b].begin(), seqs[b].end(), ids.begin() + b * longest);
      lens[b] = (int64_t)seqs[b].size();
    }
    std::string err = tfc::npy::writeI64(outDir + "/ids.npy", ids.data(),
                                         {(int64_t)n, (int64_t)longest});
    if (err.empty())
      err = tfc::npy::writeI64(outDir + "/lengths.npy", lens.data(), {(int64_t)n});
    if (err.empty())
      err = tfc::npy::writeF32(outDir + "/scores.npy", scores.data(), {(int64_t)n});
    if (!err.empty())
      return fail(err);
  } else if (!bench) {
    for (size_t b = 0; b < n; ++b) {
      std::printf("[%zu]", b);
      for (int64_t t : seqs[b])
        std::printf(" %lld", (long long)t);
      std::printf("  (score %.6g)\n", scores[b]);
    }
  }
  return 0;
}

/// tfrun --info: what a user (or a bug report) needs to know about a model.bin
/// and where it runs, without running it.
void printInfo(const std::string &path, const tfrun_model_t *model,
               const tfrun_session_t *session) {
  struct stat st {};
  const long long bytes = ::stat(path.c_str(), &st) == 0 ? (long long)st.st_size : -1;
  std::printf("model: %s\n", tfrun_model_name(model));
  std::printf("file: %s (%.1f MB)\n", path.c_str(), bytes / 1e6);
  std::printf("inputs:");
  std::string optional;
  for (size_t i = 0; i < tfrun_model_input_count(model); ++i) {
    std::printf("%s %s", i ? "," : "", tfrun_model_input_name(model, i));
    tfrun_tensor_info_t ti;
    if (tfrun_status_t *st = tfrun_model_input_info(model, i, &ti))
      tfrun_status_release(st);
    else if (*ti.default_value)
      optional += std::string(optional.empty() ? "" : "; ") + ti.name + " = " + ti.default_value;
  }
  std::printf("  (token ids, int64 or int32 [batch, seq])\n");
  if (!optional.empty())
    std::printf("optional inputs: %s when not given\n", optional.c_str());
  std::printf("outputs:");
  for (size_t i = 0; i < tfrun_model_output_count(model); ++i)
    std::printf("%s %s", i ? "," : "", tfrun_model_output_name(model, i));
  std::printf("  (f32)\n");
  if (tfrun_model_can_generate(model)) {
    int64_t bos = 0, eos = 0, pad = 0, maxLen = 0;
    tfrun_model_generation_info(model, &bos, &eos, &pad, &maxLen);
    std::printf("generation: yes (bos %lld, eos %lld, pad %lld, up to %lld positions)\n",
                (long long)bos, (long long)eos, (long long)pad, (long long)maxLen);
  } else {
    std::printf("generation: no\n");
  }
  std::printf("device: %s\n", tfrun_session_device(session));
}

} // namespace

int main(int argc, char **argv) {
  std::string modelPath, outDir;
  std::vector<std::pair<std::string, std::string>> inputs;
  int threads = 0, bench = 0;
  tfrun_session_options_t sopts;
  tfrun_session_options_init(&sopts);
  bool profile = false, generate = false, info = false;
  tfrun_generate_options_t gopt;
  tfrun_generate_options_init(&gopt);
  auto number = [&](const char *flag, const char *v, double lo, double hi) {
    char *end = nullptr;
    double x = std::strtod(v, &end);
    if (!end || *end || !(x >= lo && x <= hi)) {
      fail(std::string(flag) + " expects a number in [" + std::to_string((long long)lo) +
           ", " + std::to_string((long long)hi) + "], got '" + v + "'");
      std::exit(1);
    }
    return x;
  };
  // Integers parse strictly: digits only (a leading '-' where |lo| < 0), no
  // trailing characters, no wrap-around, inside [lo, hi].
  auto integer = [&](const char *flag, const char *v, long long lo, long long hi) {
    errno = 0;
    char *end = nullptr;
    long long x = std::strtoll(v, &end, 10);
    bool digits = *v && (std::isdigit((unsigned char)*v) || (*v == '-' && lo < 0));
    if (!digits || !end || *end || errno == ERANGE || x < lo || x > hi) {
      fail(std::string(flag) + " expects an integer in [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "], got '" + v + "'");
      std::exit(1);
    }
    return x;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) -> const char * {
      if (i + 1 >= argc) {
        fail(std::string(flag) + " needs a value");
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--input") {
      std::string v = value("--input");
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        return fail("--input expects NAME=FILE.npy, got '" + v + "'");
      inputs.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--output-dir") {
      outDir = value("--output-dir");
    } else if (a == "--threads") {
      threads = (int)integer("--threads", value("--threads"), 1, 4096);
    } else if (a == "--device") {
      std::string d = value("--device");
      if (d == "cpu") {
        sopts.device = TFRUN_DEVICE_CPU;
      } else if (d == "cuda" || d.rfind("cuda:", 0) == 0) {
        sopts.device = TFRUN_DEVICE_CUDA;
        if (d != "cuda") {
          char *end = nullptr;
          long id = std::strtol(d.c_str() + 5, &end, 10);
          if (d.size() == 5 || *end || id < 0 || id > 1024)
            return fail("--device: '" + d + "' is not cpu, cuda or cuda:N");
          sopts.device_id = (int)id;
        }
      } else {
        return fail("--device: '" + d + "' is not cpu, cuda or cuda:N");
      }
    } else if (a == "--dtype") {
      std::string d = value("--dtype");
      if (d == "f32")
        sopts.compute_dtype = TFRUN_F32;
      else if (d == "f16")
        sopts.compute_dtype = TFRUN_F16;
      else if (d == "bf16")
        sopts.compute_dtype = TFRUN_BF16;
      else
        return fail("--dtype: '" + d + "' is not f32, f16 or bf16");
    } else if (a == "--info") {
      info = true;
    } else if (a == "--profile") {
      profile = true;
    } else if (a == "--generate") {
      generate = true;
    } else if (a == "--beam") {
      gopt.beam_width = (int32_t)integer("--beam", value("--beam"), 1, 1 << 20);
    } else if (a == "--max-len") {
      gopt.max_len = (int32_t)integer("--max-len", value("--max-len"), 1, 1 << 30);
    } else if (a == "--length-penalty") {
      gopt.length_penalty = (float)number("--length-penalty", value("--length-penalty"), -100, 100);
    } else if (a == "--sample") {
      gopt.sample = 1;
    } else if (a == "--greedy") {
      gopt.sample = 0;
    } else if (a == "--temperature") {
      gopt.temperature = (float)number("--temperature", value("--temperature"), 0, 1e6);
    } else if (a == "--top-k") {
      gopt.top_k = (int32_t)integer("--top-k", value("--top-k"), 0, 1 << 30);
    } else if (a == "--top-p") {
      gopt.top_p = (float)number("--top-p", value("--top-p"), 0, 1);
    } else if (a == "--min-p") {
      gopt.min_p = (float)number("--min-p", value("--min-p"), 0, 1);
    } else if (a == "--repetition-penalty") {
      gopt.repetition_penalty =
          (float)number("--repetition-penalty", value("--repetition-penalty"), 1e-6, 1e6);
    } else if (a == "--seed") {
      gopt.seed = (uint64_t)integer("--seed", value("--seed"), 0, INT64_MAX);
    } else if (a == "--bos-id") {
      gopt.bos_id = integer("--bos-id", value("--bos-id"), 0, (long long)1e15);
    } else if (a == "--eos-id") {
      gopt.eos_id = integer("--eos-id", value("--eos-id"), 0, (long long)1e15);
    } else if (a == "--pad-id") {
      gopt.pad_id = integer("--pad-id", value("--pad-id"), 0, (long long)1e15);
    } else if (a == "--bench") {
      bench = (int)integer("--bench", value("--bench"), 1, 1000000);
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown option '" + a + "' (see --help)");
    } else if (modelPath.empty()) {
      modelPath = a;
    } else {
      return fail("more than one model given");
    }
  }
  if (modelPath.empty()) {
    std::fputs(kUsage, stderr);
    return 1;
  }
  // --output-dir is created if missing (its parent must exist).
  if (!outDir.empty() && ::mkdir(outDir.c_str(), 0777) != 0 && errno != EEXIST)
    return fail("cannot create the output directory '" + outDir + "': " + std::strerror(errno));
  if (!outDir.empty()) {
    // Before the run, not after it: an existing file is no place for outputs.
    struct stat st;
    if (::stat(outDir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return fail("--output-dir '" + outDir + "' is not a directory");
  }

  Startup start;
  auto since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
        .count();
  };
  auto t0 = std::chrono::steady_clock::now();
  tfrun_model_t *model = nullptr;
  if (tfrun_status_t *st = tfrun_model_load_file(modelPath.c_str(), &model))
    return failStatus(st);
  start.loadMs = since(t0);
  t0 = std::chrono::steady_clock::now();
  tfrun_session_t *session = nullptr;
  sopts.num_threads = threads;
  if (tfrun_status_t *st = tfrun_session_create_with_options(model, &sopts, &session)) {
    tfrun_model_release(model);
    return failStatus(st);
  }
  start.sessionMs = since(t0);
  auto cleanup = [&] {
    tfrun_session_release(session);
    tfrun_model_release(model);
  };

  tfrun_model_generation_info(model, nullptr, nullptr, &generationPad, nullptr);
  if (info) {
    printInfo(modelPath, model, session);
    cleanup();
    return 0;
  }
  if (generate && !tfrun_model_can_generate(model)) {
    std::string msg = "--generate: model '" + std::string(tfrun_model_name(model)) +
                      "' has no decoder to generate with (no causal self-attention; "
                      "tfc compile --report says why)";
    cleanup();
    return fail(msg);
  }
  if (generate && inputs.empty()) {
    cleanup();
    return fail("--generate needs the source or prompt: --input NAME=FILE.npy");
  }
  if (inputs.empty()) {
    // A deterministic example: batch 2, sequence 8 (or the declared maxima,
    // if smaller), ids in [1, 10).
    for (size_t i = 0; i < tfrun_model_input_count(model); ++i) {
      tfrun_tensor_info_t ti;
      if (tfrun_status_t *st = tfrun_model_input_info(model, i, &ti)) {
        cleanup();
        return failStatus(st);
      }
      std::string name = ti.name;
      if (*ti.default_value)
        continue; // made from its source input by the runtime
      std::vector<int64_t> shape(ti.rank);
      int64_t n = 1;
      for (size_t d = 0; d < ti.rank; ++d) {
        shape[d] = ti.dims[d] >= 0 ? ti.dims[d] : std::min<int64_t>(d == 0 ? 2 : 8, ti.max_dims[d]);
        n *= shape[d];
      }
      const int64_t len = ti.rank ? shape.back() : 1;
      std::vector<int64_t> ids((size_t)n);
      for (int64_t k = 0; k < n; ++k)
        ids[k] = name == "token_types" || name == "token_type_ids" ? (k % len >= len / 2)
               : name == "attention_mask"                        ? 1
                                                                 : 1 + (k * 7 + 3) % 9;
      if (tfrun_status_t *st = tfrun_session_set_input(session, name.c_str(), TFRUN_I64,
                                                       shape.data(), ti.rank, ids.data())) {
        cleanup();
        return failStatus(st);
      }
    }
  }
  for (auto &[name, path] : inputs) {
    tfc::npy::Array arr;
    std::string err = tfc::npy::read(path, arr);
    if (!err.empty()) {
      cleanup();
      return fail(err);
    }
    tfrun_dtype_t dt = arr.descr == "<i8" ? TFRUN_I64 : arr.descr == "<i4" ? TFRUN_I32 : TFRUN_F32;
    if (arr.descr != "<i8" && arr.descr != "<i4") {
      cleanup();
      return fail("input '" + name + "' from '" + path + "' has dtype " + arr.descr +
                  "; token ids must be int64 or int32");
    }
    if (tfrun_status_t *st = tfrun_session_set_input(session, name.c_str(), dt,
                                                     arr.shape.data(), arr.shape.size(),
                                                     arr.data.data())) {
      cleanup();
      return failStatus(st);
    }
  }

  if (generate) {
    int rc = runGenerate(session, gopt, bench, profile, outDir, start);
    cleanup();
    return rc;
  }
  if (bench) {
    if (tfrun_status_t *st = tfrun_session_run(session)) { // warm-up
      cleanup();
      return failStatus(st);
    }
    tfrun_session_enable_profiling(session, profile);
    std::vector<double> ms;
    for (int r = 0; r < bench; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      if (tfrun_status_t *st = tfrun_session_run(session)) {
        cleanup();
        return failStatus(st);
      }
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("latency over %d runs: min %.3f ms, median %.3f ms, max %.3f ms\n", bench,
                ms.front(), ms[ms.size() / 2], ms.back());
    printMemory(session, start);
  } else {
    tfrun_session_enable_profiling(session, profile);
    if (tfrun_status_t *st = tfrun_session_run(session)) {
      cleanup();
      return failStatus(st);
    }
  }
  if (profile)
    std::fputs(tfrun_session_profile(session), stdout);

  for (size_t i = 0; i < tfrun_model_output_count(model); ++i) {
    const char *name = tfrun_model_output_name(model, i);
    const float *data;
    const int64_t *shape;
    size_t rank;
    if (tfrun_status_t *st = tfrun_session_get_output(session, name, &data, &shape, &rank)) {
      cleanup();
      return failStatus(st);
    }
    std::vector<int64_t> dims(shape, shape + rank);
    size_t n = 1;
    for (int64_t d : dims)
      n *= (size_t)d;
    warnNonFinite(name, data, n);
    if (!outDir.empty()) {
      std::string err = tfc::npy::writeF32(outDir + "/" + name + ".npy", data, dims);
      if (!err.empty()) {
        cleanup();
        return fail(err);
      }
    } else if (!bench) {
      double sum = 0, mn = INFINITY, mx = -INFINITY;
      for (size_t k = 0; k < n; ++k) {
        sum += data[k];
        mn = std::min(mn, (double)data[k]);
        mx = std::max(mx, (double)data[k]);
      }
      std::printf("%s: shape [", name);
      for (size_t d = 0; d < rank; ++d)
        std::printf("%s%lld", d ? ", " : "", (long long)dims[d]);
      std::printf("] mean %.6g min %.6g max %.6g first [", n ? sum / n : 0.0, mn, mx);
      for (size_t k = 0; k < std::min<size_t>(n, 4); ++k)
        std::printf("%s%.6g", k ? ", " : "", data[k]);
      std::printf("]\n");
    }
  }
  cleanup();
  return 0;
}
