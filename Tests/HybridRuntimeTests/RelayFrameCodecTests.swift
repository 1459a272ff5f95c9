import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import HybridRuntime

/// The relay peer handler's own wire reading and writing (`RelayFrameReader` + `MessageAssembler`,
/// `RelayFrameWriter`) against NIO's WebSocket codec, which they replace on a tunnel connection:
/// the same bytes, cut into reads in different ways, must give the same messages and errors in the
/// same order; what the relay writes must decode with NIO's decoder to the frame it meant.
@Suite("Relay frame reader and writer agree with NIO's WebSocket codec")
struct RelayFrameCodecTests {
    static let maxMessageSize = MessageAssemblerTests.maxMessageSize

    /// The wire bytes of `frames`, as NIO's encoder writes them (masked frames keep their key).
    static func wire(_ frames: [WebSocketFrame]) throws -> [UInt8] {
        let channel = EmbeddedChannel(handler: WebSocketFrameEncoder())
        var bytes: [UInt8] = []
        for frame in frames {
            var frame = frame
            if let key = frame.maskKey {
                // The encoder masks the data itself: hand it the clear text.
                frame = WebSocketFrame(
                    fin: frame.fin, rsv1: frame.rsv1, opcode: frame.opcode, maskKey: key, data: frame.unmaskedData)
            }
            try channel.writeOutbound(frame)
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
        }
        _ = try channel.finish()
        return bytes
    }

    /// NIO's events for `bytes` in reads of `chunk` bytes: decoder, validator, aggregator.
    static func reference(_ bytes: [UInt8], chunk: Int) throws -> [String] {
        let collector = MessageAssemblerTests.Collector()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers(
            ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxMessageSize)),
            MaskedFrameValidator(),
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: MessageAssembler.maxFragments,
                maxAccumulatedFrameSize: maxMessageSize),
            collector)
        for start in stride(from: 0, to: bytes.count, by: chunk) {
            // After a decoder error NIO's handler drops reads with an error of its own; the relay's
            // handler has stopped at the first error by then, so those are not compared.
            _ = try? channel.writeInbound(ByteBuffer(bytes: bytes[start..<min(start + chunk, bytes.count)]))
        }
        _ = try? channel.finish()
        return collector.events.filter { !$0.contains("dataReceivedInErrorState") }
    }

    /// The relay's events for the same reads.
    static func relay(_ bytes: [UInt8], chunk: Int) -> [String] {
        var reader = RelayFrameReader()
        var assembler = MessageAssembler()
        var events: [String] = []
        for start in stride(from: 0, to: bytes.count, by: chunk) {
            do {
                try reader.read(
                    ByteBuffer(bytes: bytes[start..<min(start + chunk, bytes.count)]), maxFrameSize: maxMessageSize,
                    allocator: ByteBufferAllocator()
                ) { frame in
                    do {
                        if let out = try assembler.take(frame, maxMessageSize: maxMessageSize) {
                            events.append(MessageAssemblerTests.describe(out))
                        }
                    } catch MessageAssembler.Failed.earlier {
                    } catch {
                        events.append("error \(error)")
                    }
                }
            } catch {
                events.append("error \(error)")
            }
        }
        return events
    }

    static let frame = MessageAssemblerTests.frame

    /// Frames only the raw reader sees differently from NIO's frame values: length encodings and
    /// the decoder's own errors.
    static let wireCases: [(String, [WebSocketFrame])] = [
        ("a 16-bit length (126 bytes is over the limit here)", [frame(.binary, Array(repeating: 7, count: 99), true, [9, 8, 7, 6], false)]),
        ("a message over the limit", [frame(.binary, Array(repeating: 1, count: 101), true, [1, 2, 3, 4], false), frame(.binary, [2], true, [1, 2, 3, 4], false)]),
        ("a fragmented ping", [frame(.ping, [1], false, [1, 2, 3, 4], false)]),
        ("a close frame of 126 bytes", [frame(.connectionClose, [3, 232] + Array(repeating: 65, count: 124), true, [1, 2, 3, 4], false)]),
        ("an unknown opcode", [frame(WebSocketOpcode(encodedWebSocketOpcode: 3)!, [1], true, [1, 2, 3, 4], false)]),
    ]

    static var allCases: [(String, [WebSocketFrame])] { MessageAssemblerTests.cases + wireCases }

    @Test("same messages and errors as NIO for every way of cutting the bytes into reads", arguments: 0..<allCases.count)
    func agreement(index: Int) throws {
        let (name, frames) = Self.allCases[index]
        let bytes = try Self.wire(frames)
        for chunk in [1, 2, 3, 7, 64, bytes.count] {
            let expected = try Self.reference(bytes, chunk: chunk)
            #expect(!expected.isEmpty, "\(name)")
            #expect(Self.relay(bytes, chunk: chunk) == expected, "\(name), reads of \(chunk) bytes")
        }
    }

    @Test("a 64-bit length above Int.max and one above the limit are refused from the header alone")
    func lengthsFromTheHeader() throws {
        var huge = ByteBuffer(bytes: [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0])
        #expect(throws: NIOWebSocketError.invalidFrameLength) {
            _ = try RelayFrameReader.next(from: &huge, maxFrameSize: 100, allocator: ByteBufferAllocator())
        }
        // 101 bytes announced, none sent yet: refused before the payload arrives.
        var over = ByteBuffer(bytes: [0x82, 0x80 | 101, 1, 2, 3, 4])
        #expect(throws: NIOWebSocketError.invalidFrameLength) {
            _ = try RelayFrameReader.next(from: &over, maxFrameSize: 100, allocator: ByteBufferAllocator())
        }
        var incomplete = ByteBuffer(bytes: [0x82, 0x85, 1, 2, 3, 4, 9])
        let before = incomplete
        let none = try RelayFrameReader.next(from: &incomplete, maxFrameSize: 100, allocator: ByteBufferAllocator())
        #expect(none == nil)
        #expect(incomplete == before)
    }

    @Test("after an error nothing more is read")
    func stopsAfterError() throws {
        var reader = RelayFrameReader()
        var count = 0
        #expect(throws: NIOWebSocketError.fragmentedControlFrame) {
            try reader.read(ByteBuffer(bytes: [0x09, 0x80, 1, 2, 3, 4]), maxFrameSize: 100, allocator: ByteBufferAllocator()) { _ in count += 1 }
        }
        try reader.read(try ByteBuffer(bytes: Self.wire([Self.frame(.binary, [1], true, [1, 2, 3, 4], false)])), maxFrameSize: 100, allocator: ByteBufferAllocator()) { _ in count += 1 }
        #expect(reader.failed)
        #expect(count == 0)
    }

    /// NIO's decoding of what the relay writes.
    static func decoded(_ buffer: ByteBuffer, maxFrameSize: Int = 1 << 20) throws -> [WebSocketFrame] {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxFrameSize)))
        try channel.writeInbound(buffer)
        var frames: [WebSocketFrame] = []
        while let frame = try channel.readInbound(as: WebSocketFrame.self) { frames.append(frame) }
        _ = try channel.finish()
        return frames
    }

    @Test("the relay's frames decode with NIO to the payload it meant, for each length encoding, with and without headroom", arguments: [0, 1, 125, 126, 65535, 65536])
    func writer(length: Int) throws {
        let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        // As the reader hands it on: unmasked, with room in front.
        var wire = try ByteBuffer(bytes: Self.wire([Self.frame(.binary, payload, true, [5, 6, 7, 8], false)]))
        let read = try #require(try RelayFrameReader.next(from: &wire, maxFrameSize: 1 << 20, allocator: ByteBufferAllocator()))
        #expect(read.payload.readerIndex == RelayFrameWriter.headroom)
        // Forwarded whole, the read payload is framed in place, though `read` still holds it: the
        // frame starts in the same storage, the header's length before the payload.
        let inPlace = RelayFrameWriter.frame(opcode: .binary, payload: read.payload, allocator: ByteBufferAllocator())
        let payloadStart = read.payload.withUnsafeReadableBytes { $0.baseAddress! }
        let frameStart = inPlace.withUnsafeReadableBytes { $0.baseAddress! }
        #expect(frameStart == payloadStart - RelayFrameWriter.headerLength(payload: length))
        // Another opcode (a pong for a ping) cannot use that header: a new buffer.
        let other = RelayFrameWriter.frame(opcode: .text, payload: read.payload, allocator: ByteBufferAllocator())
        #expect(other.withUnsafeReadableBytes { $0.baseAddress! } != frameStart)
        #expect(try Self.decoded(other).first?.opcode == .text)
        for input in [read.payload, ByteBuffer(bytes: payload)] {
            let frame = RelayFrameWriter.frame(opcode: .binary, payload: input, allocator: ByteBufferAllocator())
            #expect(frame.readableBytes == RelayFrameWriter.headerLength(payload: length) + length)
            let frames = try Self.decoded(frame)
            #expect(frames.count == 1)
            #expect(frames.first?.fin == true)
            #expect(frames.first?.opcode == .binary)
            #expect(frames.first?.maskKey == nil)
            let same = frames.first.map { Array($0.data.readableBytesView) == payload } ?? false
            #expect(same, "payload of \(length) bytes")
        }
    }
}
