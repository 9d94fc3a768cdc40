// What cudaemu's runtime (runtime.cpp), launcher (launch.cpp) and cuBLAS (cublas.cpp) share.
#ifndef CUDAEMU_INTERNAL_H
#define CUDAEMU_INTERNAL_H

#include <cuda_runtime.h>

#include <functional>

// Records E as the last error (cudaGetLastError) and returns it.
cudaError_t cudaemu_fail(cudaError_t e);
// Prints "cudaemu: WHAT" and aborts: for what a GPU would hang on or leave undefined.
[[noreturn]] void cudaemu_fatal(const char *what);
// Queues WORK on STREAM (NULL: the legacy stream), or records it while the stream captures.
cudaError_t cudaemu_enqueue(cudaStream_t stream, std::function<void()> work);
// The dynamic shared memory FUNC may launch with (48 KiB unless cudaFuncSetAttribute raised it).
size_t cudaemu_dynamic_smem_limit(const void *func);

#endif
