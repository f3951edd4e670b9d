// The AVX2 instance of convert_impl.h (built with -mavx2 -mfma -mf16c).
#define TFC_CONVERT_NS avx2
#define TFC_CONVERT_WIDTH 8
#include "backends/cpu/convert_impl.h"
