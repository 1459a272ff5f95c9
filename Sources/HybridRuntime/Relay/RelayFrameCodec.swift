import NIOCore
import NIOWebSocket

/// One WebSocket frame a tunnel peer sent (RFC 6455 §5.2), as ``RelayFrameReader`` reads it off the
/// wire: payload already unmasked. (The load generator reads the relay's unmasked frames with the
/// same reader.)
///
/// A plain value (no storage object per frame, unlike NIO's `WebSocketFrame`): the relay reads one
/// per relayed message.
struct ClientFrame {
    var fin: Bool
    var opcode: WebSocketOpcode
    /// Whether the frame carried a masking key (every client frame must, RFC 6455 §5.1).
    var masked: Bool
    /// Whether RSV1, RSV2 or RSV3 was set.
    var reservedBits: Bool
    /// The unmasked payload. In front of its reader index the buffer holds the header of the frame
    /// the relay would send with these bytes (final, unmasked, same opcode), so forwarding the
    /// message whole is the same buffer with its reader index moved back
    /// (``RelayFrameWriter/frame(opcode:payload:allocator:)``), not a copy.
    var payload: ByteBuffer

    init(fin: Bool, opcode: WebSocketOpcode, masked: Bool = true, reservedBits: Bool = false, payload: ByteBuffer) {
        self.fin = fin
        self.opcode = opcode
        self.masked = masked
        self.reservedBits = reservedBits
        self.payload = payload
    }

    /// A frame NIO's decoder produced (the fault-injection pipeline, tests).
    init(_ frame: WebSocketFrame) {
        self.init(
            fin: frame.fin, opcode: frame.opcode, masked: frame.maskKey != nil,
            reservedBits: frame.rsv1 || frame.rsv2 || frame.rsv3, payload: frame.unmaskedData)
    }
}

/// Reads client frames from the bytes of a tunnel peer's connection, with the checks of NIO's
/// `WebSocketFrameDecoder` and the same errors, in its order: a 64-bit length above `Int.max` or a
/// length above the largest message (`NIOWebSocketError.invalidFrameLength`), then a fragmented
/// control frame (`.fragmentedControlFrame`) and a control frame over 125 bytes
/// (`.multiByteControlFrameLength`). Like NIO's decoder it reads unmasked frames and frames with
/// reserved bits too (``ClientFrame/masked``, ``ClientFrame/reservedBits``); ``MessageAssembler``
/// refuses them. Checks are made as soon as the header is complete, before the payload arrives, so
/// the relay never waits for (or buffers) a payload it will refuse.
struct RelayFrameReader {
    /// The start of a frame whose rest has not arrived yet (a small copy, not a slice of a read
    /// buffer that may be large).
    private var partial: ByteBuffer?
    /// The bytes broke the framing: nothing more is read (as NIO's decoder after an error).
    private(set) var failed = false

    /// Reads every complete frame in `input` (after what earlier reads left over) and hands each to
    /// `body`, in order; keeps the start of an incomplete frame for the next read.
    ///
    /// - Throws: the first framing error (see the type's documentation); after it, every later
    ///   read is ignored.
    mutating func read(
        _ input: ByteBuffer, maxFrameSize: Int, allocator: ByteBufferAllocator, _ body: (ClientFrame) -> Void
    ) throws {
        guard !failed else { return }
        var input = input
        let continuing = partial != nil
        if var held = partial {
            // Appended in place (the held buffer is ours alone and grows by doubling), so a frame
            // that arrives a few bytes per read costs linear, not quadratic, copying.
            partial = nil
            held.writeBuffer(&input)
            input = held
        }
        do {
            while let frame = try Self.next(from: &input, maxFrameSize: maxFrameSize, allocator: allocator) {
                body(frame)
            }
        } catch {
            failed = true
            throw error
        }
        guard input.readableBytes > 0 else { return }
        if continuing {
            input.discardReadBytes()
            partial = input
        } else {
            // A slice of the read's buffer, which may be large: keep a copy of just these bytes.
            var rest = allocator.buffer(capacity: input.readableBytes)
            rest.writeBuffer(&input)
            partial = rest
        }
    }

    /// Reads one frame from the front of `buffer` and moves past it; `nil` (and `buffer`
    /// unchanged) when the frame is not complete yet.
    static func next(from buffer: inout ByteBuffer, maxFrameSize: Int, allocator: ByteBufferAllocator) throws -> ClientFrame? {
        let start = buffer.readerIndex
        guard buffer.readableBytes >= 2,
            let first = buffer.getInteger(at: start, as: UInt8.self),
            let second = buffer.getInteger(at: start + 1, as: UInt8.self)
        else { return nil }
        var headerLength = 2
        var length = Int(second & 0x7F)
        switch length {
        case 126:
            guard let word = buffer.getInteger(at: start + 2, as: UInt16.self) else { return nil }
            length = Int(word)
            headerLength = 4
        case 127:
            guard let quad = buffer.getInteger(at: start + 2, as: UInt64.self) else { return nil }
            guard quad <= UInt64(Int.max) else { throw NIOWebSocketError.invalidFrameLength }
            length = Int(quad)
            headerLength = 10
        default:
            break
        }
        let fin = first & 0x80 != 0
        let opcode = WebSocketOpcode(encodedWebSocketOpcode: first & 0x0F)!
        try check(length: length, fin: fin, opcode: opcode, maxFrameSize: maxFrameSize)
        let masked = second & 0x80 != 0
        var key: (UInt8, UInt8, UInt8, UInt8)?
        if masked {
            guard buffer.readableBytes >= headerLength + 4 else { return nil }
            let at = start + headerLength
            key = (
                buffer.getInteger(at: at, as: UInt8.self)!, buffer.getInteger(at: at + 1, as: UInt8.self)!,
                buffer.getInteger(at: at + 2, as: UInt8.self)!, buffer.getInteger(at: at + 3, as: UInt8.self)!
            )
            headerLength += 4
        }
        guard buffer.readableBytes >= headerLength + length else { return nil }
        let payloadStart = start + headerLength
        let payload = unmasked(buffer, at: payloadStart, length: length, key: key, opcode: opcode, allocator: allocator)
        buffer.moveReaderIndex(to: payloadStart + length)
        return ClientFrame(fin: fin, opcode: opcode, masked: masked, reservedBits: first & 0x70 != 0, payload: payload)
    }

    /// `WebSocketFrameDecoder`'s checks once the length is known.
    private static func check(length: Int, fin: Bool, opcode: WebSocketOpcode, maxFrameSize: Int) throws {
        guard length <= maxFrameSize else { throw NIOWebSocketError.invalidFrameLength }
        if opcode.isControlOpcode {
            guard fin else { throw NIOWebSocketError.fragmentedControlFrame }
            guard length <= 125 else { throw NIOWebSocketError.multiByteControlFrameLength }
        }
    }

    /// The payload's bytes unmasked, in a new buffer with ``RelayFrameWriter/headroom`` bytes in
    /// front that end with the outgoing frame's header (one allocation and one pass over the bytes;
    /// the connection's read buffer is not kept).
    private static func unmasked(
        _ buffer: ByteBuffer, at index: Int, length: Int, key: (UInt8, UInt8, UInt8, UInt8)?, opcode: WebSocketOpcode,
        allocator: ByteBufferAllocator
    ) -> ByteBuffer {
        let headroom = RelayFrameWriter.headroom
        var out = allocator.buffer(capacity: headroom + length)
        out.moveWriterIndex(forwardBy: headroom)
        out.moveReaderIndex(forwardBy: headroom)
        // The relay's own frame header for these bytes, already in front of them: forwarding the
        // message whole then needs no copy (``RelayFrameWriter/frame(opcode:payload:allocator:)``).
        RelayFrameWriter.setHeader(in: &out, before: headroom, opcode: opcode, length: length)
        guard length > 0 else { return out }
        buffer.withUnsafeReadableBytes { source in
            let offset = index - buffer.readerIndex
            out.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { target in
                guard let key else {
                    target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + length]))
                    return length
                }
                withUnsafeBytes(of: key) { mask in
                    for i in 0..<length {
                        target[i] = source[offset + i] ^ mask[i & 3]
                    }
                }
                return length
            }
        }
        return out
    }
}

/// Writes the relay's (server, unmasked) frames: header and payload in one buffer, so a relayed
/// message is one buffer and one `write` on the socket.
enum RelayFrameWriter {
    /// The largest server frame header (2 bytes, plus 8 for a 64-bit length; no masking key).
    static let headroom = 10

    /// Header length for a payload of `length` bytes.
    static func headerLength(payload length: Int) -> Int {
        length < 126 ? 2 : length <= Int(UInt16.max) ? 4 : 10
    }

    /// A final frame of `opcode` carrying `payload`. When the bytes in front of `payload`'s reader
    /// index already are that frame's header (``RelayFrameReader`` writes it there for every frame
    /// it reads), the frame is `payload` with its reader index moved back: no copy, and no write
    /// into a buffer others may share. Otherwise (a joined, rewritten or control message) header
    /// and payload go into a new buffer.
    static func frame(opcode: WebSocketOpcode, payload: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer {
        let length = payload.readableBytes
        let headerLength = headerLength(payload: length)
        if payload.readerIndex >= headerLength,
            hasHeader(payload, at: payload.readerIndex - headerLength, opcode: opcode, length: length)
        {
            var frame = payload
            frame.moveReaderIndex(to: payload.readerIndex - headerLength)
            return frame
        }
        var frame = allocator.buffer(capacity: headerLength + length)
        frame.moveWriterIndex(forwardBy: headerLength)
        setHeader(in: &frame, before: headerLength, opcode: opcode, length: length)
        frame.moveReaderIndex(to: 0)
        var copy = payload
        frame.writeBuffer(&copy)
        return frame
    }

    /// Writes the header of a final, unmasked frame of `opcode` and `length` bytes so that it ends
    /// at index `end` of `buffer`.
    static func setHeader(in buffer: inout ByteBuffer, before end: Int, opcode: WebSocketOpcode, length: Int) {
        let at = end - headerLength(payload: length)
        buffer.setInteger(0x80 | UInt8(webSocketOpcode: opcode), at: at)
        switch headerLength(payload: length) {
        case 2:
            buffer.setInteger(UInt8(length), at: at + 1)
        case 4:
            buffer.setInteger(UInt8(126), at: at + 1)
            buffer.setInteger(UInt16(length), at: at + 2)
        default:
            buffer.setInteger(UInt8(127), at: at + 1)
            buffer.setInteger(UInt64(length), at: at + 2)
        }
    }

    /// Whether the bytes of `buffer` from `at` are the header of a final, unmasked frame of
    /// `opcode` and `length` bytes (read only).
    private static func hasHeader(_ buffer: ByteBuffer, at: Int, opcode: WebSocketOpcode, length: Int) -> Bool {
        // ByteBuffer reads only readable bytes: a view whose reader index is at the header.
        var buffer = buffer
        buffer.moveReaderIndex(to: at)
        guard buffer.getInteger(at: at, as: UInt8.self) == 0x80 | UInt8(webSocketOpcode: opcode) else { return false }
        switch headerLength(payload: length) {
        case 2:
            return buffer.getInteger(at: at + 1, as: UInt8.self) == UInt8(length)
        case 4:
            return buffer.getInteger(at: at + 1, as: UInt8.self) == 126
                && buffer.getInteger(at: at + 2, as: UInt16.self) == UInt16(length)
        default:
            return buffer.getInteger(at: at + 1, as: UInt8.self) == 127
                && buffer.getInteger(at: at + 2, as: UInt64.self) == UInt64(length)
        }
    }
}
