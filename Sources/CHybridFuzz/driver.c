// libFuzzer's entry point without its `main`: `LLVMFuzzerRunDriver` is defined by
// libclang_rt.fuzzer_no_main, which Scripts/fuzz links in. The reference is weak, so the normal
// build (no libFuzzer) still links and `hybrid-fuzz` falls back to replaying files.
#include "CHybridFuzz.h"

extern int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *, size_t))
    __attribute__((weak));

int hybrid_fuzz_has_libfuzzer(void) { return LLVMFuzzerRunDriver != NULL; }

int hybrid_fuzz_run_driver(int *argc, char ***argv, hybrid_fuzz_callback callback) {
    if (LLVMFuzzerRunDriver == NULL) return -1;
    return LLVMFuzzerRunDriver(argc, argv, callback);
}
