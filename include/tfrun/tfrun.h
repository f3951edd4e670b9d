/*===- tfrun/tfrun.h - the tfc runtime C API -------------------------------===*
 *
 * Loads a model.bin produced by `tfc compile` and runs it. The library has no MLIR
 * or LLVM dependency and never throws or aborts across this API: every fallible
 * call returns a status, NULL on success (as ONNX Runtime's C API does).
 *
 * Ownership and lifetime
 *  - Every create/load has a matching release; release functions accept NULL.
 *  - A status returned by a call is owned by the caller: tfrun_status_release().
 *  - A session borrows its model: release every session before its model.
 *  - Output pointers returned by tfrun_session_get_output stay valid until the next
 *    tfrun_session_run or tfrun_session_release on that session.
 *
 * Thread safety
 *  - A loaded model is immutable and may be shared by any number of sessions on any
 *    number of threads.
 *  - A session is thread-compatible: use each session from one thread at a time.
 *
 *===----------------------------------------------------------------------===*/
#ifndef TFRUN_TFRUN_H
#define TFRUN_TFRUN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TFRUN_API_VERSION 10/* 3: tfrun_session_memory_info, tfrun_model_input_info;
                              4: tfrun_session_generate_stream,
                                 tfrun_session_clear_inputs; generate options
                                 of 0 / NaN take the model's defaults;
                              5: TFRUN_NON_FINITE;
                              6: the engine (tfrun_engine_*), TFRUN_CANCELLED,
                                 TFRUN_BUSY;
                              7: the engine's paged KV cache: kv_block_size
                                 in its options (which grew), requests_preempted
                                 and kv_block_bytes in its stats; generate options
                                 of sample -1, top_k -1, temperature and top_p
                                 NaN take the model's sampling defaults;
                              8: repetition_penalty and min_p in the generate
                                 options (which grew);
                              9: the encoder memory pool's blocks in the
                                 engine's stats (which grew);
                             10: prefix caching: prefix_caching in the engine's
                                 options, kv_blocks_cached and the prefix
                                 cache's token counts in its stats (both grew),
                                 tfrun_engine_cached_tokens, and cache_salt in
                                 the generate options (which grew) */

/* Status codes. Append-only. */
typedef enum tfrun_code_t {
  TFRUN_OK = 0,
  TFRUN_INVALID_ARGUMENT = 1, /* bad input: unknown name, wrong dtype/rank, bad ids */
  TFRUN_INVALID_MODEL = 2,    /* model.bin is truncated, corrupt or inconsistent */
  TFRUN_UNSUPPORTED = 3,      /* a format version or kernel this runtime lacks */
  TFRUN_IO_ERROR = 4,
  TFRUN_OUT_OF_MEMORY = 5,
  TFRUN_INTERNAL = 6,
  TFRUN_NON_FINITE = 7, /* (API version 5) the model computed NaN or +inf where a
                           finite value is needed: generation's logits */
  TFRUN_CANCELLED = 8,  /* (API version 6) an engine request was cancelled */
  TFRUN_BUSY = 9,       /* (API version 6) the engine's queue is full; try again later */
} tfrun_code_t;

/* Element types of inputs and outputs (same values as tfc_dtype_t in tfc/abi.h). */
typedef enum tfrun_dtype_t {
  TFRUN_F32 = 0,
  TFRUN_I64 = 1,
  TFRUN_I32 = 2,
  TFRUN_F16 = 4,  /* compute dtypes of a CUDA session (tfrun_session_options_t) */
  TFRUN_BF16 = 5,
} tfrun_dtype_t;

/* Where a session runs. Append-only. */
typedef enum tfrun_device_t {
  TFRUN_DEVICE_CPU = 0,  /* oneDNN and our kernels, OpenMP threads */
  TFRUN_DEVICE_CUDA = 1, /* an NVIDIA GPU: cuBLASLt and our kernels, one stream per session */
} tfrun_device_t;

typedef struct tfrun_status tfrun_status_t;
typedef struct tfrun_model tfrun_model_t;
typedef struct tfrun_session tfrun_session_t;

/* Status: NULL means success. */
tfrun_code_t tfrun_status_code(const tfrun_status_t *status);
const char *tfrun_status_message(const tfrun_status_t *status);
void tfrun_status_release(tfrun_status_t *status);

/* Loads and fully validates a model.bin (magic, version, checksum, every index and
 * offset). |out_model| must be released with tfrun_model_release. */
tfrun_status_t *tfrun_model_load_file(const char *path, tfrun_model_t **out_model);
/* Same from memory; the bytes are copied, the caller keeps |data|. */
tfrun_status_t *tfrun_model_load_buffer(const void *data, size_t size,
                                        tfrun_model_t **out_model);
void tfrun_model_release(tfrun_model_t *model);

/* Signature. Names are owned by the model. */
size_t tfrun_model_input_count(const tfrun_model_t *model);
const char *tfrun_model_input_name(const tfrun_model_t *model, size_t index);
size_t tfrun_model_output_count(const tfrun_model_t *model);
const char *tfrun_model_output_name(const tfrun_model_t *model, size_t index);
const char *tfrun_model_name(const tfrun_model_t *model);

/* An input's or output's shape: |rank| dims, each constant (dims[i] >= 0) or
 * symbolic (dims[i] == -1, named dim_names[i], e.g. "batch" or "src_len"),
 * and every dim's declared maximum. Arrays owned by the model. Inputs are
 * token ids (I64 or I32 accepted); outputs are returned as F32. */
typedef struct tfrun_tensor_info_t {
  const char *name;
  tfrun_dtype_t dtype;
  size_t rank;
  const int64_t *dims;
  const int64_t *max_dims;
  const char *const *dim_names; /* "" for a constant dim */
  /* Inputs: "" when the input is required; else how it is made when left
   * unbound, e.g. "zeros like input_ids" or "input_ids != 0" (an attention
   * mask from pad_id). Outputs: "". */
  const char *default_value;
} tfrun_tensor_info_t;
tfrun_status_t *tfrun_model_input_info(const tfrun_model_t *model, size_t index,
                                       tfrun_tensor_info_t *out_info);
tfrun_status_t *tfrun_model_output_info(const tfrun_model_t *model, size_t index,
                                        tfrun_tensor_info_t *out_info);

/* Creates a session with its own arena and thread setting (|num_threads| <= 0: the
 * OpenMP default). Release with tfrun_session_release. */
tfrun_status_t *tfrun_session_create(const tfrun_model_t *model, int num_threads,
                                     tfrun_session_t **out_session);
void tfrun_session_release(tfrun_session_t *session);

/* Session options; initialize with tfrun_session_options_init (CPU, default
 * threads, the model's own precision), then set what differs. */
typedef struct tfrun_session_options_t {
  int32_t num_threads;   /* CPU: OpenMP threads; <= 0: the OpenMP default */
  int32_t device;        /* tfrun_device_t */
  int32_t device_id;     /* CUDA: the device ordinal */
  /* CUDA: TFRUN_F32 runs the plan in the dtypes model.bin was compiled with;
   * TFRUN_F16 or TFRUN_BF16 converts an f32 model's weights once, at session
   * creation, and runs every float activation in that dtype (f32 accumulation).
   * The CPU's precision is chosen at compile time (tfc compile --precision): a
   * CPU session accepts only TFRUN_F32 here. */
  int32_t compute_dtype;
} tfrun_session_options_t;

void tfrun_session_options_init(tfrun_session_options_t *options);

/* tfrun_session_create with options. A CUDA session fails with
 * TFRUN_UNSUPPORTED when libtfrun was built without CUDA or there is no such
 * device ("no CUDA device: ..."). */
tfrun_status_t *tfrun_session_create_with_options(const tfrun_model_t *model,
                                                  const tfrun_session_options_t *options,
                                                  tfrun_session_t **out_session);

/* The number of CUDA devices this libtfrun can use: 0 when it was built
 * without CUDA, or there is no driver or GPU. */
int tfrun_cuda_device_count(void);

/* The device and its kernel paths, e.g. "cpu (avx2, fma; f32 openblas; bf16
 * emulated; int8 without vnni; onednn avx2)" or "cuda:0 (NVIDIA H100 80GB
 * HBM3, sm_90)". Owned by the session. */
const char *tfrun_session_device(const tfrun_session_t *session);

/* Binds input |name|: token ids as I64 or I32, shape [batch, seq]. The data is
 * copied. Checks name, dtype, rank, dims against the declared maximums. */
tfrun_status_t *tfrun_session_set_input(tfrun_session_t *session, const char *name,
                                        tfrun_dtype_t dtype, const int64_t *shape,
                                        size_t rank, const void *data);
/* Unbinds every input (API version 4): the next run or generate sees only what
 * is bound after this, and optional inputs get their defaults again. A bound
 * input otherwise stays bound across runs. NULL is a no-op. */
void tfrun_session_clear_inputs(tfrun_session_t *session);
/* Runs the plan on the bound inputs (all inputs must be bound). */
tfrun_status_t *tfrun_session_run(tfrun_session_t *session);
/* The f32 output |name| of the last run: data, shape and rank (owned by the session). */
tfrun_status_t *tfrun_session_get_output(tfrun_session_t *session, const char *name,
                                         const float **out_data,
                                         const int64_t **out_shape, size_t *out_rank);

/* Profiling: when enabled, each run accumulates the time spent per kernel kind.
 * tfrun_session_profile returns a text table (kernel, calls, total ms, share),
 * owned by the session, valid until the next call on it. */
void tfrun_session_enable_profiling(tfrun_session_t *session, int enable);
const char *tfrun_session_profile(tfrun_session_t *session);

/* Memory (docs/c-api.md, "Memory"). A session's arena and KV cache follow the
 * work: the arena of a run is planned for that run's input sizes and grows to
 * the largest run so far; the KV cache is sized to each generate request
 * (rows x (prompt + new tokens)). Sizes in bytes. */
typedef struct tfrun_memory_info_t {
  uint64_t weights_bytes;         /* model.bin's weights section */
  uint64_t arena_bytes;           /* the largest arena of any run so far */
  uint64_t kv_cache_bytes;        /* the largest KV cache of any generate so far */
  uint64_t declared_arena_bytes;  /* @forward's arena at the declared maximum dims */
  uint64_t declared_kv_cache_bytes; /* the KV cache at the declared maxima */
} tfrun_memory_info_t;
tfrun_status_t *tfrun_session_memory_info(const tfrun_session_t *session,
                                          tfrun_memory_info_t *out_info);

/* ---- Generation (docs/generation.md) -------------------------------------
 * For models tfc derived @encode/@decode_step for (encoder-decoder and
 * decoder-only models). The decoding loop and its KV cache run inside the
 * runtime. Inputs come from tfrun_session_set_input:
 *   - encoder-decoder: the source inputs of the model (e.g. "src"), a batch
 *     padded with pad_id; every target starts with bos_id;
 *   - decoder-only: the target input (e.g. "tokens"): prompts, right-padded
 *     with pad_id. */

/* 1 if the model has generation entry points, else 0. */
int tfrun_model_can_generate(const tfrun_model_t *model);
/* The special ids and the KV-cache length compiled into the model: bos/eos are
 * -1 when the YAML declares none, pad is 0 then; all are -1 for a model that
 * cannot generate. Any out-pointer may be NULL. */
void tfrun_model_generation_info(const tfrun_model_t *model, int64_t *bos_id,
                                 int64_t *eos_id, int64_t *pad_id, int64_t *max_len);

typedef struct tfrun_generate_options_t {
  int32_t beam_width;     /* >= 1; 1 = greedy (or sampling); 0 = the model's num_beams */
  int32_t max_len;        /* new tokens, eos included; 0 = the model's max_length (from
                             generation_config.json), else as many as the cache allows */
  float length_penalty;   /* beam search: score / length^length_penalty; NaN = the model's */
  int32_t sample;         /* 1: sample (decoder-only models, beam_width 1); 0: greedy
                             or beam search; -1: the model's do_sample (version 7) */
  float temperature;      /* > 0; NaN = the model's (1 unless its config says) */
  int32_t top_k;          /* 0 = off; -1 = the model's (off unless its description says;
                             a Hugging Face directory's: transformers' default 50) */
  float top_p;            /* (0, 1]; 1 = off; NaN = the model's */
  uint64_t seed;
  int64_t bos_id, eos_id, pad_id; /* -1 = the model's */
  /* Version 8. transformers' repetition_penalty: each token already in the
   * sequence (the prompt, or the decoder's start token, and the new tokens) has
   * its logit divided by it (multiplied when negative) before the choice; > 0,
   * 1 = off; greedy search and sampling only. */
  float repetition_penalty;
  /* Sampling: min_p (transformers' MinPLogitsWarper), after top-k and top-p,
   * keeps the tokens whose probability is at least min_p times the most likely
   * one's; [0, 1], 0 = off. */
  float min_p;
  /* Version 10. An engine request's prefix-cache salt: it shares cached KV blocks
   * only with requests of the same salt (vLLM's cache_salt), so that clients of
   * a shared server cannot learn from their timing what others sent. 0: the
   * unsalted cache. Sessions ignore it. */
  uint64_t cache_salt;
} tfrun_generate_options_t;

/* Fills |options| with the defaults: the model's beam width, max_len, length
 * penalty and sampling (beam_width 0, max_len 0, length_penalty NaN, sample -1,
 * temperature NaN, top_k -1, top_p NaN: greedy, the cache's length, 1, and no
 * sampling unless the model's generation_config.json said otherwise, with
 * temperature 1, top_p 1 and top_k off, or transformers' 50 for a Hugging Face
 * directory), seed 0, the model's ids. */
void tfrun_generate_options_init(tfrun_generate_options_t *options);

/* Runs the whole decoding loop over the bound inputs. The results stay in the
 * session until the next generate or run. */
tfrun_status_t *tfrun_session_generate(tfrun_session_t *session,
                                       const tfrun_generate_options_t *options);
/* Streaming (API version 4). One new token of batch item |batch_index|: the
 * |step|-th (0-based) of the item's new tokens, never eos, and its natural-log
 * probability (greedy and sampling; 0 for a forced token; NaN with beam search). */
typedef struct tfrun_token_t {
  size_t batch_index;
  size_t step;
  int64_t token_id;
  float log_prob;
} tfrun_token_t;
/* Called from inside the decoding loop, on the thread that called
 * tfrun_session_generate_stream, with |token| valid for the call only. Greedy
 * search and sampling call it as each token is chosen, and a nonzero return
 * stops that batch item there (its result is the tokens so far). Beam search
 * calls it with each item's final tokens once the item is finished, and
 * ignores the return. The callback must not call into the same session. */
typedef int (*tfrun_token_callback_t)(const tfrun_token_t *token, void *user_data);

/* tfrun_session_generate that also streams the new tokens to |callback|
 * (which may be NULL: then it is tfrun_session_generate). The results are
 * kept in the session as tfrun_session_generate keeps them. */
tfrun_status_t *tfrun_session_generate_stream(tfrun_session_t *session,
                                              const tfrun_generate_options_t *options,
                                              tfrun_token_callback_t callback,
                                              void *user_data);

/* Number of sequences in the last generate (the batch). */
size_t tfrun_session_generated_count(const tfrun_session_t *session);
/* Sequence |index| of the last generate: its new tokens (no bos/prompt, no eos;
 * owned by the session) and its score (docs/generation.md). */
tfrun_status_t *tfrun_session_get_generated(const tfrun_session_t *session, size_t index,
                                            const int64_t **out_ids, size_t *out_len,
                                            float *out_score);

/* ---- The generation engine (API version 6; docs/c-api.md, "Engine") ----
 * Many generation requests on one model and device, batched continuously: each
 * step runs the rows of every running request together, each at its own
 * position, and requests join and leave between steps. A request's results
 * equal those of the same request on a session of its own. Every function may
 * be called from any thread while the engine runs. The model must outlive the
 * engine. */
typedef struct tfrun_engine tfrun_engine_t;

typedef struct tfrun_engine_options_t {
  tfrun_session_options_t session; /* the device, threads and compute dtype */
  int32_t max_rows;         /* rows per step: a request of batch B holds B (beam K:
                               B x K); 0: the model's max_batch */
  int32_t max_queue;        /* requests waiting for rows; a submit beyond it is
                               refused with TFRUN_BUSY; 0: 256 */
  int32_t max_batch_tokens; /* prompt tokens prefilled per step; 0: 2048 */
  int64_t kv_cache_bytes;   /* > 0: the KV pool's size: blocks of kv_block_size
                               positions of every layer's K and V; an error when not
                               even one fits. 0: every row at max_len, at most 1 GiB */
  int32_t kv_block_size;    /* positions per KV block; 0: 16. A model.bin compiled
                               before paged caches takes max_len (one block per row);
                               another value is TFRUN_UNSUPPORTED there */
  int32_t prefix_caching;   /* decoder-only models: a prompt starts from the KV blocks
                               earlier requests computed for the same leading tokens
                               (whole blocks) and prefills only the rest. 0 or 1: on,
                               -1: off. Encoder-decoder models: none */
} tfrun_engine_options_t;

/* Fills |options| with the defaults: the session defaults, 0 for the rest. */
void tfrun_engine_options_init(tfrun_engine_options_t *options);

/* One input of a request, as tfrun_session_set_input takes it. */
typedef struct tfrun_input_t {
  const char *name;
  tfrun_dtype_t dtype;
  const int64_t *shape;
  size_t rank;
  const void *data;
} tfrun_input_t;

/* An engine for |model|: TFRUN_UNSUPPORTED for a model.bin compiled before the
 * engine existed (recompile it), TFRUN_INVALID_ARGUMENT for one that cannot
 * generate. */
tfrun_status_t *tfrun_engine_create(const tfrun_model_t *model,
                                    const tfrun_engine_options_t *options,
                                    tfrun_engine_t **out_engine);

/* Queues a request: its inputs (copied), its options, and an optional
 * |callback| that streams its new tokens as tfrun_session_generate_stream's
 * does, called on an engine thread (it must not block for long: the
 * request's rows wait for it). Inputs and options are checked here, with the
 * session's messages. A full queue gives TFRUN_BUSY and queues nothing. */
tfrun_status_t *tfrun_engine_submit(tfrun_engine_t *engine, const tfrun_input_t *inputs,
                                    size_t num_inputs, const tfrun_generate_options_t *options,
                                    tfrun_token_callback_t callback, void *user_data,
                                    uint64_t *out_request_id);

/* Waits until the request ends, at most |timeout_ms| milliseconds (< 0: no
 * limit). *done says whether it ended. Once ended, the return is its outcome:
 * NULL when it finished, TFRUN_CANCELLED, or the error that stopped it. */
tfrun_status_t *tfrun_engine_wait(tfrun_engine_t *engine, uint64_t request_id,
                                  int64_t timeout_ms, int *done);

/* An ended request's results, as tfrun_session_generated_count / _get_generated
 * give a session's. Valid until tfrun_engine_release. */
tfrun_status_t *tfrun_engine_generated_count(tfrun_engine_t *engine, uint64_t request_id,
                                             size_t *count);
tfrun_status_t *tfrun_engine_get_generated(tfrun_engine_t *engine, uint64_t request_id,
                                           size_t index, const int64_t **out_ids,
                                           size_t *out_len, float *out_score);

/* The prompt tokens of a request whose KV blocks came from the prefix cache when it
 * was admitted (over its batch items), as OpenAI's usage.prompt_tokens_details
 * .cached_tokens: 0 while queued, without prefix caching, or for encoder-decoders.
 * Any request not yet released (API 10). */
tfrun_status_t *tfrun_engine_cached_tokens(const tfrun_engine_t *engine, uint64_t request_id,
                                           uint64_t *out_tokens);

/* Cancels a queued or running request: it ends with TFRUN_CANCELLED at its next
 * step and its KV blocks return to the pool. An ended request is left as
 * it is. */
tfrun_status_t *tfrun_engine_cancel(tfrun_engine_t *engine, uint64_t request_id);

/* Forgets a request and its results; one still running is cancelled first. */
tfrun_status_t *tfrun_engine_release(tfrun_engine_t *engine, uint64_t request_id);

typedef struct tfrun_engine_stats_t {
  int64_t requests_queued, requests_running;
  int64_t kv_blocks_used, kv_blocks_free; /* the KV pool's blocks */
  int64_t kv_block_positions;             /* positions per block */
  uint64_t requests_finished, requests_cancelled, requests_failed;
  uint64_t tokens_generated, steps;
  double tokens_per_second; /* tokens generated per second of steps run */
  uint64_t requests_preempted; /* preemptions: a request's blocks taken back for one
                                  admitted before it, recomputed when it resumes */
  int64_t kv_block_bytes;       /* bytes per block, to size kv_cache_bytes */
  /* Encoder-decoder models: the encoder memory pool (the cross-attentions' K and
     V of running requests, one sequence of blocks per batch item, shared by its
     beams), sized for every row at the longest source: blocks in use (not counting
     the one block of zeros), free, and the source positions and bytes of one
     block (every cross-attention's K and V). All 0 for decoder-only models. */
  int64_t memory_blocks_used, memory_blocks_free;
  int64_t memory_block_positions, memory_block_bytes;
  /* Prefix caching: of kv_blocks_free, the blocks that still hold a cached prefix
     (reused when a prompt starts with it, else taken last, least recently used
     first); the prompt tokens of the requests admitted, and those of them that
     came from the cache instead of being prefilled. */
  int64_t kv_blocks_cached;
  uint64_t prefix_cache_queries, prefix_cache_hits;
} tfrun_engine_stats_t;

tfrun_status_t *tfrun_engine_stats(const tfrun_engine_t *engine, tfrun_engine_stats_t *out);

/* Cancels every request and stops the engine's threads. NULL is a no-op. */
void tfrun_engine_destroy(tfrun_engine_t *engine);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TFRUN_TFRUN_H */
