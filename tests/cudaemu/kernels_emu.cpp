// The CUDA backend's kernels compiled as C++ against cudaemu's headers.
#include "kernels/cuda/kernels.cu"
