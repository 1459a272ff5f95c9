import Foundation
import HybridSim

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `relay --end-with-stdin` (a hidden flag): the relay stops as on SIGTERM once its standard input
/// ends. `bench relay` and `bench hostile` start their relay with a pipe there whose only write end
/// they hold; the kernel closes it however the bench ends (SIGKILL, a crash, an allocation failure
/// under `ulimit -v`), so that relay, whose timeouts are a day long, does not live on as an orphan
/// holding its port.
///
/// A pipe rather than Linux's `PR_SET_PDEATHSIG`: `posix_spawn` cannot set that in the child, and
/// it fires when the spawning *thread* ends, which a thread of Swift concurrency's pool may do
/// while the bench runs on. A pipe's end is seen also when the parent ended before the watch began.
enum StandardInputLifeline {
    /// Starts the thread that reads (and drops) standard input until it ends or fails, then says
    /// so on standard error and sends this process SIGTERM (the relay's ordinary shutdown).
    static func watch() {
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 512)
            var why = "ended"
            while true {
                let count = read(STDIN_FILENO, &buffer, buffer.count)
                if count > 0 { continue }
                if count < 0 {
                    if errno == EINTR { continue }
                    why = "cannot be read (\(String(cString: strerror(errno))))"
                }
                break
            }
            progressLine("relay: standard input \(why) (--end-with-stdin: the process that started this relay is gone); stopping")
            kill(getpid(), SIGTERM)
        }
    }
}
