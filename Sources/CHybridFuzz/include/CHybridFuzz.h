#ifndef CHYBRIDFUZZ_H
#define CHYBRIDFUZZ_H

#include <stddef.h>
#include <stdint.h>

/// The callback libFuzzer calls with each input (`LLVMFuzzerTestOneInput`'s shape).
typedef int (*hybrid_fuzz_callback)(const uint8_t *data, size_t size);

/// Whether libFuzzer (`libclang_rt.fuzzer_no_main`) was linked into this binary.
int hybrid_fuzz_has_libfuzzer(void);

/// Runs libFuzzer's driver with `argc`/`argv` (libFuzzer flags and corpus directories) and
/// `callback`. Returns -1 without doing anything when libFuzzer is not linked.
int hybrid_fuzz_run_driver(int *argc, char ***argv, hybrid_fuzz_callback callback);

#endif
