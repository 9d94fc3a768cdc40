// The CUDA backend's kernels compiled as C++ against cudaemu's headers. Device code compares
// threadIdx (unsigned) with ints, as nvcc lets it.
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "kernels/cuda/kernels.cu"
