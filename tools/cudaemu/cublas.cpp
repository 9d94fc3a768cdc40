// cudaemu's cublasGemmEx: column-major C = alpha op(A) op(B) + beta C with fp32 accumulation,
// run (or captured) on the handle's stream like any other work.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include <functional>
#include <vector>

struct cublasContext {
    cudaStream_t stream;
};

extern "C" cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    *handle = new cublasContext{NULL};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes)
{
    (void)workspace, (void)bytes;
    return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

extern "C" cublasStatus_t cublasGetVersion(cublasHandle_t handle, int *version)
{
    (void)handle;
    *version = 130000;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "unknown cuBLAS status";
}

static float load(const void *p, cudaDataType t, size_t i)
{
    if (t == CUDA_R_32F)
        return ((const float *)p)[i];
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

static void store(void *p, cudaDataType t, size_t i, float f)
{
    if (t == CUDA_R_32F)
        ((float *)p)[i] = f;
    else
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16(f);
}

// op(X) as R rows of K floats each, row r holding row r of op(X) (so both operands of a dot
// product are contiguous).
static std::vector<float> rows_of(const void *x, cudaDataType t, int ld, bool trans, int r_n,
                                  int k_n, bool x_is_b)
{
    std::vector<float> out((size_t)r_n * k_n);
    for (int r = 0; r < r_n; r++)
        for (int k = 0; k < k_n; k++) {
            // A (m x k) N: A[r + k ld], T: A[k + r ld]. B's rows are op(B)'s columns (n x k):
            // N: B[k + r ld], T: B[r + k ld].
            bool contiguous = x_is_b ? !trans : trans;
            size_t i = contiguous ? (size_t)k + (size_t)r * ld : (size_t)r + (size_t)k * ld;
            out[(size_t)r * k_n + k] = load(x, t, i);
        }
    return out;
}

// The (A, B, C) types cuBLAS takes with CUBLAS_COMPUTE_32F, of those with fp32 and bf16.
static bool supported(cudaDataType a, cudaDataType b, cudaDataType c)
{
    if (a != b)
        return false;
    return a == CUDA_R_16BF ? c == CUDA_R_16BF || c == CUDA_R_32F : c == CUDA_R_32F;
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                       cublasOperation_t transb, int m, int n, int k,
                                       const void *alpha, const void *A, cudaDataType Atype,
                                       int lda, const void *B, cudaDataType Btype, int ldb,
                                       const void *beta, void *C, cudaDataType Ctype, int ldc,
                                       cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    (void)algo;
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || transa == CUBLAS_OP_C || transb == CUBLAS_OP_C
        || ldc < (m > 1 ? m : 1) || lda < (transa == CUBLAS_OP_N ? (m > 1 ? m : 1) : (k > 1 ? k : 1))
        || ldb < (transb == CUBLAS_OP_N ? (k > 1 ? k : 1) : (n > 1 ? n : 1)))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (computeType != CUBLAS_COMPUTE_32F || !supported(Atype, Btype, Ctype))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    // Host pointer mode: the scalars are read at the call, as cuBLAS does.
    const float a = *(const float *)alpha, b = *(const float *)beta;
    const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
    cudaError_t e = cudaemu_enqueue(handle->stream, [=]() {
        std::vector<float> ar = rows_of(A, Atype, lda, ta, m, k, false);
        std::vector<float> bc = rows_of(B, Btype, ldb, tb, n, k, true);
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                const float *x = &ar[(size_t)i * k], *y = &bc[(size_t)j * k];
                float s = 0.0f;
                for (int l = 0; l < k; l++)
                    s += x[l] * y[l];
                const size_t at = (size_t)i + (size_t)j * ldc;
                // beta 0: C is not read (it may hold anything, NaN included), as in cuBLAS
                store(C, Ctype, at, b == 0.0f ? a * s : a * s + b * load(C, Ctype, at));
            }
    });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
