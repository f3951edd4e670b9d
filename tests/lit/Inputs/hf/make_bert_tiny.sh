#!/bin/sh
# Writes a BERT checkpoint directory for bert-tiny.json's sizes into $1, without
# torch: config.json and model.safetensors (make_safetensors.py's ramp data) with
# every tensor under $2 (a task checkpoint's "bert." prefix; "" for BertModel), plus
# a pooler and a classifier when $2 is given (a BertForSequenceClassification
# checkpoint, as bert-tiny.json's architectures says; for "" the architectures line
# goes, as in a BertModel checkpoint).
set -e
out=$1; p=$2; here=$(dirname "$0")
mkdir -p "$out"
if [ -n "$p" ]; then
  cp "$here/bert-tiny.json" "$out/config.json"
else
  grep -v '"architectures"' "$here/bert-tiny.json" > "$out/config.json"
fi
set -- "${p}embeddings.word_embeddings.weight=10x8" "${p}embeddings.position_embeddings.weight=16x8" \
  "${p}embeddings.token_type_embeddings.weight=2x8" "${p}embeddings.LayerNorm.weight=8" \
  "${p}embeddings.LayerNorm.bias=8"
for m in attention.self.query attention.self.key attention.self.value attention.output.dense; do
  set -- "$@" "${p}encoder.layer.0.$m.weight=8x8" "${p}encoder.layer.0.$m.bias=8"
done
set -- "$@" "${p}encoder.layer.0.intermediate.dense.weight=16x8" "${p}encoder.layer.0.intermediate.dense.bias=16" \
  "${p}encoder.layer.0.output.dense.weight=8x16" "${p}encoder.layer.0.output.dense.bias=8"
for n in attention.output.LayerNorm output.LayerNorm; do
  set -- "$@" "${p}encoder.layer.0.$n.weight=8" "${p}encoder.layer.0.$n.bias=8"
done
[ -n "$p" ] && set -- "$@" "${p}pooler.dense.weight=8x8" "${p}pooler.dense.bias=8" \
  "classifier.weight=2x8" "classifier.bias=2"
python3 "$here/../make_safetensors.py" "$out/model.safetensors" "$@"
