import NIOCore

/// A SwiftNIO event loop as a Swift *task executor* (SE-0417): a task that prefers it
/// (`withTaskExecutorPreference(_:operation:)`) runs its jobs on the loop's thread, and its
/// nonisolated async functions stay there without hopping.
///
/// SwiftNIO's own takeover of the global executor
/// (``RuntimeExecutor/runTasksOnEventLoops()``) runs each job *on the loop's serial executor*, so
/// every nonisolated async call or return in a driver (which asks for the generic executor) is a
/// switch of executors: the task is enqueued on the loop again and resumes on its next turn, about
/// 150 times per sign-in. On a task executor a job runs on the generic serial executor, and those
/// hops are no switch at all.
package final class EventLoopTaskExecutor: TaskExecutor, Sendable {
    /// The loop the jobs run on.
    package let eventLoop: any EventLoop

    /// Runs jobs on `eventLoop`.
    package init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
