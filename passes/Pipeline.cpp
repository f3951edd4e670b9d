//===- Pipeline.cpp - the pass pipeline `tfc compile` runs -----------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

void mlir::tfc::buildCompilePipeline(PassManager &pm, const PipelineOptions &opts) {
  if (opts.fusion) {
    pm.addNestedPass<func::FuncOp>(createFuseAttention());
    pm.addNestedPass<func::FuncOp>(createFuseLayerNorm());
    pm.addNestedPass<func::FuncOp>(createFoldEmbeddings());
    pm.addNestedPass<func::FuncOp>(createFuseProjections());
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // CSE merges the weight references that packed projections slice from, which
  // lets concat(slice(W), ...) fold back to W.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Generation needs the fused attention (the unfused softmax mixes positions).
  if (opts.fusion && opts.generation) {
    pm.addPass(createDeriveGeneration());
    pm.addNestedPass<func::FuncOp>(createFuseRotary());
  }
}
