# Flags shared by the compiler's directories (ir/, passes/, frontend/, tools/).
# Included per directory so HandleLLVMOptions' global flag changes stay out of runtime/.
include(HandleLLVMOptions)
include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
include_directories(${TFC_SOURCE_DIR} ${TFC_SOURCE_DIR}/include ${TFC_BINARY_DIR})
add_definitions(${LLVM_DEFINITIONS})
