//===- tfrun.cpp - run a compiled model.bin from the command line ---------===//
//
//   tfrun model.bin [--input NAME=FILE.npy ...] [--output-dir DIR] [--threads N]
//                   [--bench N] [--profile]
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

namespace {

int fail(const std::string &msg) {
  std::fprintf(stderr, "tfrun: error: %s\n", msg.c_str());
  return 1;
}

int failStatus(tfrun_status_t *st) {
  std::string msg = tfrun_status_message(st);
  tfrun_status_release(st);
  return fail(msg);
}

const char *kUsage =
    "usage: tfrun model.bin [--input NAME=FILE.npy ...] [--output-dir DIR]\n"
    "             [--threads N] [--bench N] [--profile]\n"
    "  --input NAME=FILE.npy  token ids (int64 or int32, [batch, seq]) for input NAME\n"
    "  --output-dir DIR       write DIR/<output>.npy for every output\n"
    "  --threads N            number of threads (default: all cores)\n"
    "  --bench N              run N times after a warm-up; print min/median/max latency\n"
    "  --profile              print the time spent per kernel (over all timed runs)\n"
    "Without --input, a deterministic example input is used and each output is\n"
    "summarized.\n";

} // namespace

int main(int argc, char **argv) {
  std::string modelPath, outDir;
  std::vector<std::pair<std::string, std::string>> inputs;
  int threads = 0, bench = 0;
  bool profile = false;
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
      threads = std::atoi(value("--threads"));
      if (threads <= 0)
        return fail("--threads expects a positive number");
    } else if (a == "--profile") {
      profile = true;
    } else if (a == "--bench") {
      bench = std::atoi(value("--bench"));
      if (bench <= 0)
        return fail("--bench expects a positive number");
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

  tfrun_model_t *model = nullptr;
  if (tfrun_status_t *st = tfrun_model_load_file(modelPath.c_str(), &model))
    return failStatus(st);
  tfrun_session_t *session = nullptr;
  if (tfrun_status_t *st = tfrun_session_create(model, threads, &session)) {
    tfrun_model_release(model);
    return failStatus(st);
  }
  auto cleanup = [&] {
    tfrun_session_release(session);
    tfrun_model_release(model);
  };

  if (inputs.empty()) {
    // A deterministic example: batch 2, sequence 8, ids in [1, 10).
    for (size_t i = 0; i < tfrun_model_input_count(model); ++i) {
      std::string name = tfrun_model_input_name(model, i);
      int64_t shape[2] = {2, 8};
      std::vector<int64_t> ids(16);
      for (int64_t k = 0; k < 16; ++k)
        ids[k] = name == "token_types" ? (k % 8 >= 4) : 1 + (k * 7 + 3) % 9;
      if (tfrun_status_t *st =
              tfrun_session_set_input(session, name.c_str(), TFRUN_I64, shape, 2, ids.data())) {
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
