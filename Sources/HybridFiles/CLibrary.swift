#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Functions of the C library looked up by name at run time, for the ones its Swift module does not
/// import (glibc's `<malloc.h>`: `malloc_trim`, `mallopt`) and that another C library (musl) lacks:
/// a direct call would not link there.
package enum CLibrary {
    /// The function `name` of the process's C library as `type` (a `@convention(c)` function type
    /// the caller must get right), `nil` where there is none.
    package static func function<Function>(_ name: String, as type: Function.Type) -> Function? {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, name) else { return nil }
        return unsafeBitCast(symbol, to: type)
    }
}
