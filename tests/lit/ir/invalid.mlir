// Verifier and shape-inference errors of the tfc ops. Shape rules live in the
// ops' inferReturnTypes, so most messages below come from there (reported at
// the op when the written result type is checked, or when the parser infers it).
// RUN: tfc-opt %s --split-input-file --verify-diagnostics

func.func @matmul_contracting(%a: tensor<?x?x8xf32>, %b: tensor<16x4xf32>) {
  // expected-error @+1 {{matmul contracting dims differ: [?, ?, 8] x [16, 4]}}
  %0 = tfc.matmul %a, %b : (tensor<?x?x8xf32>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
  return
}

// -----

func.func @matmul_contracting_transpose_b(%a: tensor<?x?x8xf32>, %b: tensor<16x4xf32>) {
  // expected-error @+1 {{matmul contracting dims differ: [?, ?, 8] x [16, 4] (transpose_b)}}
  %0 = tfc.matmul %a, %b {transpose_b = true} : (tensor<?x?x8xf32>, tensor<16x4xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{matmul operands must have rank >= 2, got 1 and 2}}
  %0 = tfc.matmul %a, %b : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_batch_broadcast(%a: tensor<2x3x4xf32>, %b: tensor<5x4x6xf32>) {
  // expected-error @+1 {{shapes [2] and [5] do not broadcast (dim 0: 2 vs 5)}}
  %0 = tfc.matmul %a, %b : (tensor<2x3x4xf32>, tensor<5x4x6xf32>) -> tensor<2x3x6xf32>
  return
}

// -----

func.func @matmul_result_type(%a: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'tfc.matmul' op inferred type(s) 'tensor<1x2x2xf32>' are incompatible with return type(s) of operation 'tensor<1x2x4xf32>'}}
  %0 = tfc.matmul %a, %a {transpose_b = true} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

func.func @broadcast(%a: tensor<?x?x8xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{shapes [?, ?, 8] and [16] do not broadcast (dim 2: 8 vs 16)}}
  %0 = tfc.add %a, %b : (tensor<?x?x8xf32>, tensor<16xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @masked_fill_broadcast(%s: tensor<1x2x4xf32>, %m: tensor<1x2xi1>) {
  // expected-error @+1 {{shapes [1, 2, 4] and [1, 2] do not broadcast (dim 2: 4 vs 2)}}
  %0 = tfc.masked_fill %s, %m {value = 0.0 : f64} : (tensor<1x2x4xf32>, tensor<1x2xi1>) -> tensor<1x2x4xf32>
  return
}

// -----

func.func @element_types(%a: tensor<2xf32>, %b: tensor<1x2xi64>) {
  // expected-error @+1 {{operand element types differ: 'tensor<2xf32>' vs 'tensor<1x2xi64>'}}
  %0 = tfc.add %a, %b : (tensor<2xf32>, tensor<1x2xi64>) -> tensor<1x2xf32>
  return
}

// -----

func.func @and_not_bool(%a: tensor<2xf32>) {
  // expected-error @+1 {{'and' expects i1 operands}}
  %0 = tfc.and %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @compare_types(%a: tensor<1x2xi64>, %b: tensor<2xf32>) {
  // expected-error @+1 {{compare operand element types differ}}
  %0 = tfc.compare #tfc<cmp eq> %a, %b : (tensor<1x2xi64>, tensor<2xf32>) -> tensor<1x2xi1>
  return
}

// -----

func.func @select_branches(%c: tensor<1x2xi1>, %a: tensor<2xf32>, %b: tensor<1x2xi64>) {
  // expected-error @+1 {{select branches have different element types}}
  %0 = tfc.select %c, %a, %b : (tensor<1x2xi1>, tensor<2xf32>, tensor<1x2xi64>) -> tensor<1x2xf32>
  return
}

// -----

func.func @reshape_elements(%a: tensor<2x3x8xf32>) {
  // expected-error @+1 {{reshape: input [2, 3, 8] cannot become [0, 5, 5]}}
  %0 = tfc.reshape %a {shape = array<i64: 0, 5, 5>} : tensor<2x3x8xf32> -> tensor<2x5x5xf32>
  return
}

// -----

func.func @reshape_two_inferred(%a: tensor<1x2x4xf32>) {
  // expected-error @+1 {{reshape: more than one -1 in the shape}}
  %0 = tfc.reshape %a {shape = array<i64: -1, -1>} : tensor<1x2x4xf32> -> tensor<?x?xf32>
  return
}

// -----

func.func @reshape_not_divisible(%a: tensor<1x2x4xf32>) {
  // expected-error @+1 {{reshape: cannot infer -1: 8 elements are not divisible by 3}}
  %0 = tfc.reshape %a {shape = array<i64: -1, 3>} : tensor<1x2x4xf32> -> tensor<?x3xf32>
  return
}

// -----

func.func @reshape_copy_past_rank(%a: tensor<2xf32>) {
  // expected-error @+1 {{reshape: 0 at index 1 has no input dim to copy}}
  %0 = tfc.reshape %a {shape = array<i64: 0, 0>} : tensor<2xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @reshape_negative(%a: tensor<2xf32>) {
  // expected-error @+1 {{reshape: invalid dim -2}}
  %0 = tfc.reshape %a {shape = array<i64: -2>} : tensor<2xf32> -> tensor<2xf32>
  return
}

// -----

func.func @transpose_not_permutation(%a: tensor<2x3x8xf32>) {
  // expected-error @+1 {{transpose: perm [0, 0, 1] is not a permutation}}
  %0 = tfc.transpose %a {perm = array<i64: 0, 0, 1>} : tensor<2x3x8xf32> -> tensor<2x2x3xf32>
  return
}

// -----

func.func @transpose_rank(%a: tensor<2x3x8xf32>) {
  // expected-error @+1 {{transpose: perm has 2 entries for rank 3}}
  %0 = tfc.transpose %a {perm = array<i64: 1, 0>} : tensor<2x3x8xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @unsqueeze_axis(%a: tensor<2xf32>) {
  // expected-error @+1 {{unsqueeze: axis 3 is out of range for rank 1}}
  %0 = tfc.unsqueeze %a {axis = 3} : tensor<2xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @slice_range(%a: tensor<1x2x4xf32>) {
  // expected-error @+1 {{slice [2, 6) is out of range for dim 4}}
  %0 = tfc.slice %a {axis = 2, start = 2, size = 4} : tensor<1x2x4xf32> -> tensor<1x2x4xf32>
  return
}

// -----

func.func @slice_from_end_range(%a: tensor<1x2x4xf32>) {
  // expected-error @+1 {{slice [-5, -4) from the end is out of range for dim 4}}
  %0 = tfc.slice %a {axis = 2, start = -5, size = 1} : tensor<1x2x4xf32> -> tensor<1x2x1xf32>
  return
}

// -----

func.func @slice_from_end_past_end(%a: tensor<1x?x4xf32>) {
  // expected-error @+1 {{slice [-1, 1) from the end is out of range for dim ?}}
  %0 = tfc.slice %a {axis = 1, start = -1, size = 2} : tensor<1x?x4xf32> -> tensor<1x2x4xf32>
  return
}

// -----

func.func @reduce_axis(%a: tensor<1x2x4xf32>) {
  // expected-error @+1 {{reduce: axis 3 is out of range for rank 3}}
  %0 = tfc.reduce_sum %a {axis = 3} : tensor<1x2x4xf32> -> tensor<1x2x1xf32>
  return
}

// -----

func.func @positions_axis(%ids: tensor<1x2xi64>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = tfc.positions %ids {axis = 2} : tensor<1x2xi64> -> tensor<1x2xi64>
  return
}

// -----

func.func @positions_padding_axis(%ids: tensor<1x2xi64>) {
  // expected-error @+1 {{positions with padding_idx need [batch, seq] ids and axis 1}}
  %0 = tfc.positions %ids {axis = 0, padding_idx = 1} : tensor<1x2xi64> -> tensor<1x2xi64>
  return
}

// -----

func.func @positions_padding_negative(%ids: tensor<1x2xi64>) {
  // expected-error @+1 {{padding_idx must be >= 0, got -1}}
  %0 = tfc.positions %ids {axis = 1, padding_idx = -1} : tensor<1x2xi64> -> tensor<1x2xi64>
  return
}

// -----

func.func @nopeak_rank(%ids: tensor<2xi64>) {
  // expected-error @+1 {{nopeak_mask expects [batch, seq] ids, got rank 1}}
  %0 = tfc.nopeak_mask %ids : tensor<2xi64> -> tensor<1x2x2xi1>
  return
}

// -----

func.func @embedding_table_rank(%t: tensor<1x2x4xf32>, %ids: tensor<1x2xi64>) {
  // expected-error @+1 {{embedding table must be [vocab, dim], got rank 3}}
  %0 = tfc.embedding %t, %ids : (tensor<1x2x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
  return
}

// -----

func.func @linear_features(%x: tensor<1x2x4xf32>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{linear input has 4 features but the weight [4, 8] expects 8}}
  %0 = tfc.linear %x, %w : (tensor<1x2x4xf32>, tensor<4x8xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<1x2x4xf32>, %w: tensor<8x4xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{linear bias [2] does not match 8 output features}}
  %0 = tfc.linear %x, %w, %b : (tensor<1x2x4xf32>, tensor<8x4xf32>, tensor<2xf32>) -> tensor<1x2x8xf32>
  return
}

// -----

func.func @linear_result_type(%x: tensor<1x2x4xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{'tfc.linear' op inferred type(s) 'tensor<1x2x8xf32>' are incompatible with return type(s) of operation 'tensor<1x2x4xf32>'}}
  %0 = tfc.linear %x, %w : (tensor<1x2x4xf32>, tensor<8x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

func.func @attention_heads(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{'tfc.attention' op model width 8 is not divisible by 3 heads}}
  %0 = tfc.attention #tfc<mask none> %x, %x, %x {num_heads = 3, scale = 0.5} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @attention_heads_positive(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{'tfc.attention' op num_heads must be positive}}
  %0 = tfc.attention #tfc<mask none> %x, %x, %x {num_heads = 0, scale = 0.5} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @attention_mask_missing(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{'tfc.attention' op mask kind 'key_padding' needs mask operand}}
  %0 = tfc.attention #tfc<mask key_padding> %x, %x, %x {num_heads = 2, scale = 0.5} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @attention_mask_extra(%x: tensor<?x?x8xf32>, %ids: tensor<?x?xi64>) {
  // expected-error @+1 {{'tfc.attention' op mask kind 'causal' takes no mask operand}}
  %0 = tfc.attention #tfc<mask causal> %x, %x, %x, %ids {num_heads = 2, scale = 0.5} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @attention_padding_mask_bool(%x: tensor<?x?x8xf32>, %m: tensor<?x?xi1>) {
  // expected-error @+1 {{'tfc.attention' op a key_padding mask operand must be [batch, seq] token ids}}
  %0 = tfc.attention #tfc<mask key_padding> %x, %x, %x, %m {num_heads = 2, scale = 0.5} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @attention_additive_mask_int(%x: tensor<?x?x8xf32>, %ids: tensor<?x?xi64>) {
  // expected-error @+1 {{'tfc.attention' op an additive mask must be a float tensor}}
  %0 = tfc.attention #tfc<mask additive> %x, %x, %x, %ids {num_heads = 2, scale = 0.5} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @attention_widths(%q: tensor<1x2x4xf32>, %kv: tensor<1x2x8xf32>) {
  // expected-error @+1 {{attention query and key widths differ}}
  %0 = tfc.attention #tfc<mask none> %q, %kv, %kv {num_heads = 2, scale = 1.0} : (tensor<1x2x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  return
}

// -----

func.func @attention_lengths(%q: tensor<1x2x4xf32>, %v: tensor<1x3x4xf32>) {
  // expected-error @+1 {{attention key and value lengths differ}}
  %0 = tfc.attention #tfc<mask none> %q, %q, %v {num_heads = 2, scale = 1.0} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x3x4xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{'tfc.softmax' op axis 3 is out of range for rank 3}}
  %0 = tfc.softmax %x {axis = 3} : tensor<?x?x8xf32>
  return
}

// -----

func.func @log_softmax_axis(%x: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'tfc.log_softmax' op axis -4 is out of range for rank 3}}
  %0 = tfc.log_softmax %x {axis = -4} : tensor<1x2x4xf32>
  return
}

// -----

func.func @layer_norm_gain(%x: tensor<?x?x8xf32>, %g: tensor<16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'tfc.layer_norm' op gain and shift must be [8], got 'tensor<16xf32>'}}
  %0 = tfc.layer_norm #tfc<norm layer_norm> %x, %g, %b {eps = 1.0e-5 : f64} : (tensor<?x?x8xf32>, tensor<16xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @layer_norm_shift(%x: tensor<?x?x8xf32>, %g: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{'tfc.layer_norm' op gain and shift must be [8], got 'tensor<2x8xf32>'}}
  %0 = tfc.layer_norm #tfc<norm std_norm> %x, %g, %b {eps = 1.0e-6 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @layer_norm_eps(%x: tensor<?x?x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'tfc.layer_norm' op eps must be non-negative}}
  %0 = tfc.layer_norm #tfc<norm layer_norm> %x, %g, %g {eps = -1.0 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return
}

// -----

func.func @sinusoid_odd_dim() {
  // expected-error @+1 {{'tfc.sinusoid_table' op dim must be positive and even (sin/cos pairs), got 7}}
  %0 = tfc.sinusoid_table #tfc<pe standard> {rows = 16, dim = 7} : tensor<16x7xf32>
  return
}

// -----

func.func @sinusoid_rows() {
  // expected-error @+1 {{'tfc.sinusoid_table' op rows must be positive, got 0}}
  %0 = tfc.sinusoid_table #tfc<pe standard> {rows = 0, dim = 8} : tensor<0x8xf32>
  return
}

// -----

func.func @weight_dynamic_shape() {
  // expected-error @+1 {{'tfc.weight' op weight 'w' must have a static shape}}
  %0 = tfc.weight "w" : tensor<?x8xf32>
  return
}

// -----

func.func @weight_empty_name() {
  // expected-error @+1 {{'tfc.weight' op weight name must not be empty}}
  %0 = tfc.weight "" : tensor<4x8xf32>
  return
}

// -----

func.func @weight_integer() {
  // expected-error @+1 {{'tfc.weight' op result #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi64>'}}
  %0 = tfc.weight "ids" : tensor<4xi64>
  return
}

// -----

func.func @gqa_kv_heads_divide(%q: tensor<?x?x24xf32>, %k: tensor<?x?x16xf32>) {
  // expected-error @+1 {{'tfc.attention' op num_kv_heads 2 must divide num_heads 3}}
  %0 = tfc.attention #tfc<mask causal> %q, %k, %k {num_heads = 3, num_kv_heads = 2, scale = 0.5} : (tensor<?x?x24xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x24xf32>
  return
}

// -----

func.func @gqa_key_width(%q: tensor<?x?x32xf32>, %k: tensor<?x?x12xf32>) {
  // expected-error @+1 {{a key of 2 heads must be 2/4 of the query's width 32, got 12}}
  %0 = tfc.attention #tfc<mask causal> %q, %k, %k {num_heads = 4, num_kv_heads = 2, scale = 0.5} : (tensor<?x?x32xf32>, tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x32xf32>
  return
}

// -----

func.func @rotary_head_dim(%x: tensor<?x?x12xf32>, %f: tensor<2xf32>) {
  // expected-error @+1 {{'tfc.rotary' op width 12 is not a multiple of head_dim 8}}
  %0 = tfc.rotary %x, %f {head_dim = 8} : (tensor<?x?x12xf32>, tensor<2xf32>) -> tensor<?x?x12xf32>
  return
}

// -----

func.func @rotary_odd_head_dim(%x: tensor<?x?x12xf32>, %f: tensor<1xf32>) {
  // expected-error @+1 {{'tfc.rotary' op head_dim must be positive and even, got 3}}
  %0 = tfc.rotary %x, %f {head_dim = 3} : (tensor<?x?x12xf32>, tensor<1xf32>) -> tensor<?x?x12xf32>
  return
}

// -----

func.func @rotary_too_many_frequencies(%x: tensor<?x?x16xf32>, %f: tensor<5xf32>) {
  // expected-error @+1 {{'tfc.rotary' op inv_freq of 5 frequencies rotates more than head_dim 8}}
  %0 = tfc.rotary %x, %f {head_dim = 8} : (tensor<?x?x16xf32>, tensor<5xf32>) -> tensor<?x?x16xf32>
  return
}

// -----

func.func @rotary_rank(%x: tensor<?x16xf32>, %f: tensor<4xf32>) {
  // expected-error @+1 {{rotary expects a [batch, seq, heads * head_dim] input}}
  %0 = tfc.rotary %x, %f {head_dim = 8} : (tensor<?x16xf32>, tensor<4xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @attention_softcap_negative(%q: tensor<?x?x16xf32>) -> tensor<?x?x16xf32> {
  // expected-error @+1 {{'tfc.attention' op the score soft-cap -2.000000e+00 must be finite and not negative}}
  %0 = tfc.attention #tfc<mask causal> %q, %q, %q {num_heads = 2, scale = 0.5, softcap = -2.0} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  return %0 : tensor<?x?x16xf32>
}

// -----

func.func @cached_attention_rotary_too_wide(%q: tensor<?x?x16xf32>, %kc: tensor<?x8x16xf32>,
                                            %pos: tensor<i64>, %f: tensor<5xf32>) -> tensor<?x?x16xf32> {
  // expected-error @+1 {{'tfc.cached_attention' op inv_freq of 5 frequencies rotates more than head_dim 8}}
  %o = tfc.cached_attention %q, %q, %q, %kc, %kc, %pos rotary(%f) {num_heads = 2, scale = 0.5} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x8x16xf32>, tensor<?x8x16xf32>, tensor<i64>, tensor<5xf32>) -> tensor<?x?x16xf32>
  return %o : tensor<?x?x16xf32>
}
