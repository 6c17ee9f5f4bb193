/* cudnn_emu.h - test hooks of the emulated cuDNN (libmr_emu_cudnn,
 * cudnn_emu.cc): what the heuristics (cudnnGetConvolution*Algorithm_v7)
 * report, so tests can feed the project's algorithm picker adversarial
 * lists. The emulation has one implementation, so every algorithm computes
 * the same (deterministic) math; only what the heuristics say changes.
 *
 * Precedence: a list set by mr_emu_cudnn_set_perf, else the environment
 * variable MIRRORED_EMU_CUDNN_PERF (read when a list is first needed, and
 * again after mr_emu_cudnn_reset_perf), else the built-in default list.
 *
 * MIRRORED_EMU_CUDNN_PERF, for tests that drive the executables:
 *   spec    := section { ';' section }
 *   section := kind '=' [ entry { ',' entry } ]      (empty: no results)
 *   kind    := 'fwd' | 'bwd_data' | 'bwd_filter'
 *   entry   := algo { ':' attr }                     (algo: the enum's value)
 *   attr    := 'default' | 'tensor' | 'tensor_conv' | 'fma'   mathType
 *                (CUDNN_DEFAULT_MATH, _TENSOR_OP_MATH,
 *                 _TENSOR_OP_MATH_ALLOW_CONVERSION, CUDNN_FMA_MATH)
 *            | 'det' | 'nondet'                      determinism
 *            | 'notsup' | 'status=' int              status (a cudnnStatus_t)
 *            | 'mem=' bytes | 'time=' ms             memory, time
 * Omitted attributes: CUDNN_DEFAULT_MATH, deterministic, success, the
 * algorithm's own workspace size (what cudnnGet*WorkspaceSize reports), and
 * time 0.1 ms * (position + 1). A kind the spec does not name keeps its
 * default list. Example:
 *   MIRRORED_EMU_CUDNN_PERF="fwd=1:tensor,1:fma:nondet,0:fma;bwd_filter=0:fma:nondet"
 * A malformed spec aborts the process with a message (a typo must not pass
 * as a test of the picker).
 *
 * An algorithm that the active list names only with a failing status also
 * fails when run (cudnnConvolution* returns that status), as a real
 * unsupported algorithm would; one the list does not name runs. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

enum { MR_EMU_CUDNN_FWD = 0, MR_EMU_CUDNN_BWD_DATA = 1, MR_EMU_CUDNN_BWD_FILTER = 2 };

/* Sets what the heuristics for `which` (MR_EMU_CUDNN_FWD, _BWD_DATA,
 * _BWD_FILTER) return: `results` points to `count` cudnnConvolutionFwdAlgoPerf_t,
 * cudnnConvolutionBwdDataAlgoPerf_t or cudnnConvolutionBwdFilterAlgoPerf_t
 * respectively, copied. count 0: no results; count < 0: back to the
 * environment's or the default list for that kind. Thread-safe. */
void mr_emu_cudnn_set_perf(int which, const void *results, int count);

/* All three kinds back to MIRRORED_EMU_CUDNN_PERF or the defaults. */
void mr_emu_cudnn_reset_perf(void);

#ifdef __cplusplus
}
#endif
