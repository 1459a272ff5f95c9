import NIOCore
import NIOPosix

/// Where the runtime's Swift tasks run.
package enum RuntimeExecutor {
    /// Makes SwiftNIO's event loops (`MultiThreadedEventLoopGroup.singleton`) Swift concurrency's
    /// global executor for the rest of the process, so a task waiting for a message resumes on the
    /// loop that read it instead of hopping to Swift's own thread pool and back (SwiftNIO's
    /// `NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor`).
    ///
    /// Call it once, first thing, in a process that never blocks a task (a blocking task would
    /// stall an event loop). `hybrid-sim bench` does.
    ///
    /// - Returns: whether the event loops became the global executor.
    package static func runTasksOnEventLoops() -> Bool {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
    }
}
