@testable import HybridFiles
import Testing

/// Functions of the C library found by name: glibc's `<malloc.h>` ones the relay and the address-space
/// fitting call, and `nil`, not a crash, for a name the library does not have.
@Suite("CLibrary: functions looked up by name")
struct CLibraryTests {
    @Test("malloc_trim and mallopt are found on glibc and callable; an unknown name is nil")
    func lookup() {
        #if canImport(Glibc)
        let trim = CLibrary.function("malloc_trim", as: (@convention(c) (Int) -> Int32).self)
        #expect(trim != nil)
        #expect(trim.map { $0(0) >= 0 } == true)
        // M_TRIM_THRESHOLD (-1) set to its default value, 128 KiB: accepted (1), nothing changed.
        let option = CLibrary.function("mallopt", as: (@convention(c) (Int32, Int32) -> Int32).self)
        #expect(option.map { $0(-1, 128 * 1024) } == 1)
        #endif
        #expect(CLibrary.function("hybridsim_no_such_function", as: (@convention(c) () -> Void).self) == nil)
    }
}
