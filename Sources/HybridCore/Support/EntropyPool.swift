#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Bytes from the kernel's cryptographically secure generator, fetched in blocks of 256 (the most
/// one `getentropy` call returns) and handed out in order, each byte once. Backs
/// ``RandomSource/system``.
final class EntropyPool: Sendable {
    static let shared = EntropyPool()

    /// The most bytes one `getentropy` call may return.
    static let blockSize = 256

    private struct State {
        var block = [UInt8](repeating: 0, count: EntropyPool.blockSize)
        /// Bytes of `block` already handed out.
        var used = EntropyPool.blockSize
    }

    private let state = Mutex(State())

    /// `count` fresh random bytes.
    func bytes(_ count: Int) -> [UInt8] {
        guard count > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: count)
        state.withLock { state in
            var offset = 0
            while offset < count {
                if state.used == Self.blockSize {
                    Self.fill(&state.block)
                    state.used = 0
                }
                let take = min(count - offset, Self.blockSize - state.used)
                out.withUnsafeMutableBufferPointer { target in
                    state.block.withUnsafeMutableBufferPointer { source in
                        let from = source.baseAddress! + state.used
                        (target.baseAddress! + offset).update(from: from, count: take)
                        // A byte handed out is not kept in the pool.
                        from.update(repeating: 0, count: take)
                    }
                }
                state.used += take
                offset += take
            }
        }
        return out
    }

    /// Fills `block` from the kernel; if `getentropy` fails (it does not on a supported kernel),
    /// from `SystemRandomNumberGenerator`, which traps rather than return weak bytes.
    private static func fill(_ block: inout [UInt8]) {
        let filled = block.withUnsafeMutableBytes { getentropy($0.baseAddress, $0.count) }
        guard filled != 0 else { return }
        var generator = SystemRandomNumberGenerator()
        for index in block.indices { block[index] = UInt8.random(in: .min ... .max, using: &generator) }
    }
}
