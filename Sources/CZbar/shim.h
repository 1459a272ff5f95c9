#include <zbar.h>

/// `zbar_fourcc` is a function-like macro and does not import into Swift.
static inline unsigned long czbar_fourcc_y800(void) { return zbar_fourcc('Y', '8', '0', '0'); }
