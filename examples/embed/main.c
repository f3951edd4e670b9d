/* Embedding tfc's runtime: load a model.bin, feed token ids, read the output.
 * Build against the installed package: see CMakeLists.txt beside this file. */
#include <stdio.h>
#include <tfrun/tfrun.h>

static int check(tfrun_status_t *st) {
  if (!st)
    return 0;
  fprintf(stderr, "error: %s\n", tfrun_status_message(st));
  tfrun_status_release(st);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s model.bin\n", argv[0]);
    return 2;
  }
  tfrun_model_t *model = NULL;
  tfrun_session_t *session = NULL;
  if (check(tfrun_model_load_file(argv[1], &model)) ||
      check(tfrun_session_create(model, 1, &session)))
    return 1;
  int64_t ids[2][4] = {{5, 6, 7, 0}, {8, 9, 0, 0}}, shape[2] = {2, 4};
  for (size_t i = 0; i < tfrun_model_input_count(model); ++i)
    if (check(tfrun_session_set_input(session, tfrun_model_input_name(model, i), TFRUN_I64,
                                      shape, 2, ids)))
      return 1;
  const float *out;
  const int64_t *dims;
  size_t rank;
  if (check(tfrun_session_run(session)) ||
      check(tfrun_session_get_output(session, tfrun_model_output_name(model, 0), &out,
                                     &dims, &rank)))
    return 1;
  printf("%s: rank %zu, last dim %lld, out[0] = %f\n", tfrun_model_output_name(model, 0),
         rank, (long long)dims[rank - 1], out[0]);
  tfrun_session_release(session);
  tfrun_model_release(model);
  return 0;
}
