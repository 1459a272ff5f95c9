/// Serialises the tests that load the whole machine: hundreds of sockets and transactions at once.
///
/// Swift Testing runs suites in parallel. Two such tests running together on a 2-core machine starve
/// each other's event loops (all relays and clients share NIO's two singleton loops), and a step
/// with a 5 s limit in one of them can then time out although nothing is wrong. Each heavy test runs
/// its body inside ``exclusively(_:)``; everything else is unaffected.
actor HeavyLoadGate {
    /// The one gate of the test process.
    static let shared = HeavyLoadGate()

    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    private func acquire() async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func release() {
        if waiting.isEmpty {
            busy = false
        } else {
            waiting.removeFirst().resume()
        }
    }

    /// Runs `body` when no other heavy test is running.
    static func exclusively<T>(_ body: () async throws -> T) async throws -> T {
        await shared.acquire()
        do {
            let result = try await body()
            await shared.release()
            return result
        } catch {
            await shared.release()
            throw error
        }
    }
}
