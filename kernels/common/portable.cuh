// Fixed-width integers and float limits for both compilers: nvcc has the C library headers,
// NVRTC (run-time compilation, what most installs use) has none, so it gets the few we need.
#pragma once
#ifdef __CUDACC_RTC__
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef long long int64_t;
#ifndef FLT_MAX
#define FLT_MAX 3.402823466e+38F
#endif
#else
#include <stdint.h>
#include <float.h>
#endif
