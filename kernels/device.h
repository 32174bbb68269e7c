// device.h: the one shim that lets every kernel in kernels/ compile twice:
//   * by NVRTC for the GPU (the `cuda` backend), where __CUDACC__/__CUDACC_RTC__ is defined;
//   * by the host C++ compiler for the emulator (build.rs, DPHD_HOST defined), where a launch of
//     n work items is a loop i = 0..n calling the kernel once per item.
//
// Kernel subset (docs/gpu.md): one thread per work item, no shared memory, no __syncthreads,
// no warp intrinsics, no atomics in the core path (scatter is a gather through a precomputed
// transpose, so results are deterministic and identical in both compilers), f64 throughout.
//
// Every kernel is declared   DPHD_KERNEL(name)(long long n, ...)   and starts with
//   const long long i = DPHD_ITEM; if (i >= n) return;
// On the GPU the item is blockIdx.x * blockDim.x + threadIdx.x; in the emulator it is the
// value of the hidden first parameter `dphd_item` that the launcher loops over.
#ifndef DPHD_DEVICE_H
#define DPHD_DEVICE_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DPHD_KERNEL(name) extern "C" __global__ void name
#define DPHD_ITEM_PARAM long long dphd_item_unused,
#define DPHD_ITEM ((long long)blockIdx.x * (long long)blockDim.x + (long long)threadIdx.x)
#define DPHD_FN __device__ static inline
#else
#include <cmath>
#define DPHD_KERNEL(name) extern "C" void name
#define DPHD_ITEM_PARAM long long dphd_item,
#define DPHD_ITEM (dphd_item)
#define DPHD_FN static inline
using std::fabs;
using std::sqrt;
using std::log;
using std::ldexp;
using std::frexp;
using std::isfinite;
using std::fmax;
using std::copysign;
using std::isinf;
using std::fmin;
using std::exp;
using std::floor;
#endif

// Double-precision epsilon (2^-52), as Rust's f64::EPSILON.
#define DPHD_EPS 2.220446049250313e-16

#endif
