// cublas_emu.cc - the cuBLAS calls the project makes, on the CPU
// (libcublas.so.13 in the emulator's build folder: backends/cuda/cublas_lazy.c
// dlopens it by that soname and looks up the _v2 symbols).
//
// A handle holds a stream (default 0), a math mode and a pointer mode. Work
// goes on the handle's stream through emu_enqueue, like a kernel; SGEMM is
// OpenBLAS's cblas_sgemm in column-major order, which is cuBLAS's layout.
// Argument checks and the beta == 0 rule follow the cuBLAS documentation
// (cuBLAS API reference, cublas<t>gemm()). TF32 and tensor-op math modes are
// accepted and computed in full FP32 (a stricter result than the GPU's).
// Relies on: emu.h (the emulated runtime), OpenBLAS (cblas.h).
#include <cblas.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "tests/gpu_emu/emu.h"

struct cublasContext {
    cudaStream_t stream = nullptr;
    int device = 0;
    // cublasSetWorkspace's buffer; none: the library's own pool (cublasSetStream
    // goes back to it: "unconditionally resets the cuBLAS library workspace
    // back to the default workspace pool")
    void *workspace = nullptr;
    size_t workspace_bytes = 0;
    bool own_workspace = false;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
    cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

namespace {

// p..p+bytes must lie in one device allocation: otherwise the work would
// read or write outside it, which on a GPU is an illegal address found when
// the kernel runs. The emulator reports it the same way (a sticky error at
// the next synchronising call) and does not run the work.
bool in_device(const void *p, size_t bytes) {
    size_t left = 0;
    return bytes == 0 || (emu_device_of(p, &left) >= 0 && left >= bytes);
}

void fault_later(cudaStream_t s, const char *call, const char *what) {
    std::string msg = std::string(call) + ": " + what + " is not device memory of that size";
    emu_enqueue(s, [msg] { emu_device_fault(cudaErrorIllegalAddress, msg.c_str()); });
}

// A scalar argument: read at the call in host pointer mode ("alpha and beta
// can be passed by reference on the host"), when the work runs in device
// pointer mode.
struct Scalar {
    const float *p;
    float host;
    bool device;
    float get() const { return device ? *p : host; }
};

Scalar scalar(const cublasContext *h, const float *p) {
    bool dev = h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
    return {p, dev ? 0.0f : *p, dev};
}

bool valid_op(cublasOperation_t op) {
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// Bytes a column-major rows x cols matrix with leading dimension ld spans.
size_t span(int rows, int cols, int ld) {
    if (rows <= 0 || cols <= 0) return 0;
    return ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * sizeof(float);
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
    // "This function initializes the cuBLAS library and creates a handle to
    // an opaque structure holding the cuBLAS library context." The handle
    // belongs to the current device.
    if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    auto *h = new cublasContext;
    h->device = dev;
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    // Queued work holds copies of what it needs, not the handle.
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
    // "If the cuBLAS library stream is not set, all kernels use the default
    // NULL stream."
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (streamId != nullptr && emu_stream_device(streamId) < 0) return CUBLAS_STATUS_INVALID_VALUE;
    handle->stream = streamId;
    handle->workspace = nullptr, handle->workspace_bytes = 0, handle->own_workspace = false;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                     size_t workspaceSizeInBytes) {
    // A user-owned device buffer for the calls that follow on the handle's
    // stream; it must be aligned to 256 bytes; NULL with size 0 means none
    // (the calls then use no workspace).
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (workspace == nullptr && workspaceSizeInBytes != 0) return CUBLAS_STATUS_INVALID_VALUE;
    if ((uintptr_t)workspace % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (workspaceSizeInBytes > 0 && !in_device(workspace, workspaceSizeInBytes))
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->workspace = workspace, handle->workspace_bytes = workspaceSizeInBytes;
    handle->own_workspace = true;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId) {
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (streamId == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *streamId = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    unsigned base = (unsigned)mode & 0xf;
    unsigned flags = (unsigned)mode & ~0xfu;
    if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH && base != CUBLAS_PEDANTIC_MATH &&
        base != CUBLAS_TF32_TENSOR_OP_MATH)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (flags & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode) {
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->math;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t *mode) {
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    }
    return "unknown error";
}

cublasStatus_t cublasSscal_v2(cublasHandle_t handle, int n, const float *alpha, float *x, int incx) {
    // x = alpha x; as in the reference BLAS, nothing to do for n <= 0 or
    // incx <= 0.
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (alpha == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    if (n <= 0 || incx <= 0) return CUBLAS_STATUS_SUCCESS;
    if (!in_device(x, ((size_t)(n - 1) * (size_t)incx + 1) * sizeof(float))) {
        fault_later(handle->stream, "cublasSscal", "x");
        return CUBLAS_STATUS_SUCCESS;
    }
    Scalar a = scalar(handle, alpha);
    emu_count_library(handle->stream,
                      handle->own_workspace ? EmuLibrary::blas : EmuLibrary::blas_pool);
    emu_enqueue(handle->stream, [=] { cblas_sscal(n, a.get(), x, incx); });
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc) {
    // C = alpha op(A) op(B) + beta C, column-major; op(A) m x k, op(B) k x n.
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    // CUBLAS_STATUS_INVALID_VALUE: "If m < 0 or n < 0 or k < 0 or if transa
    // or transb != CUBLAS_OP_N or CUBLAS_OP_C or CUBLAS_OP_T or if lda <
    // max(1, m) if transa == CUBLAS_OP_N and lda < max(1, k) otherwise or if
    // ldb < max(1, k) if transb == CUBLAS_OP_N and ldb < max(1, n) otherwise
    // or if ldc < max(1, m) or if alpha or beta == NULL or C == NULL if C
    // needs to be scaled"
    bool na = transa == CUBLAS_OP_N, nb = transb == CUBLAS_OP_N;
    if (m < 0 || n < 0 || k < 0 || !valid_op(transa) || !valid_op(transb) ||
        lda < std::max(1, na ? m : k) || ldb < std::max(1, nb ? k : n) || ldc < std::max(1, m) ||
        alpha == nullptr || beta == nullptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;  // C is empty
    if (C == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    // A is stored (na ? m x k : k x m), B (nb ? k x n : n x k)
    size_t a_bytes = span(na ? m : k, na ? k : m, lda);
    size_t b_bytes = span(nb ? k : n, nb ? n : k, ldb);
    const char *outside = !in_device(A, a_bytes)           ? "A"
                          : !in_device(B, b_bytes)           ? "B"
                          : !in_device(C, span(m, n, ldc))   ? "C"
                                                             : nullptr;
    if (outside != nullptr) {
        fault_later(handle->stream, "cublasSgemm", outside);
        return CUBLAS_STATUS_SUCCESS;
    }
    Scalar a = scalar(handle, alpha), b = scalar(handle, beta);
    auto op = [](cublasOperation_t t) { return t == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; };
    CBLAS_TRANSPOSE ta = op(transa), tb = op(transb);
    emu_count_library(handle->stream,
                      handle->own_workspace ? EmuLibrary::blas : EmuLibrary::blas_pool);
    emu_enqueue(handle->stream, [=] {
        float av = a.get(), bv = b.get();
        if (bv == 0.0f) {
            // beta: "If beta == 0, C does not have to be a valid input": C
            // (maybe NaN poison from cudaMalloc) is set, never read, even
            // where alpha op(A) op(B) is skipped.
            for (int j = 0; j < n; j++)
                std::fill(C + (size_t)j * (size_t)ldc, C + (size_t)j * (size_t)ldc + m, 0.0f);
        }
        if (k == 0 || av == 0.0f) {
            if (bv != 0.0f && bv != 1.0f)
                for (int j = 0; j < n; j++)
                    for (int i = 0; i < m; i++)
                        C[(size_t)j * (size_t)ldc + i] *= bv;
            return;
        }
        cblas_sgemm(CblasColMajor, ta, tb, m, n, k, av, A, lda, B, ldb, bv, C, ldc);
    });
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
