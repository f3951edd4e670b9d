// The AVX-512 instance of convert_impl.h (built with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq); convert_cpu.cc calls it only where cpu_isa.h says
// the CPU has AVX-512.
#define TFC_CONVERT_NS avx512
#define TFC_CONVERT_WIDTH 16
#include "backends/cpu/convert_impl.h"
