import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import HybridRuntime

/// `MessageAssembler` (the relay peer handler's own frame checks and joining) against the two NIO
/// handlers it replaces on a tunnel connection (`MaskedFrameValidator` + `NIOWebSocketFrameAggregator`,
/// still used when faults are injected): both sides get the same frames and must agree on every
/// output and every error, in order.
@Suite("Relay frame assembly agrees with NIO's aggregator")
struct MessageAssemblerTests {
    static let maxMessageSize = 100

    /// One client frame, masked unless `mask` is nil.
    static func frame(
        _ opcode: WebSocketOpcode, _ bytes: [UInt8], fin: Bool = true, mask: WebSocketMaskingKey? = [1, 2, 3, 4],
        rsv1: Bool = false
    ) -> WebSocketFrame {
        var data = ByteBuffer(bytes: bytes)
        if let mask { data.webSocketMask(mask) }
        return WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, maskKey: mask, data: data)
    }

    /// What came out, in order: "opcode fin bytes" for a frame, "error …" for an error.
    final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = WebSocketFrame
        var events: [String] = []

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            events.append(MessageAssemblerTests.describe(unwrapInboundIn(data)))
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            events.append("error \(error)")
        }
    }

    static func describe(_ frame: WebSocketFrame) -> String {
        "\(frame.opcode) \(frame.fin) \(Array(frame.unmaskedData.readableBytesView))"
    }

    static func describe(_ frame: ClientFrame) -> String {
        "\(frame.opcode) \(frame.fin) \(Array(frame.payload.readableBytesView))"
    }

    /// NIO's pipeline's events for `frames`.
    static func reference(_ frames: [WebSocketFrame]) throws -> [String] {
        let collector = Collector()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers(
            MaskedFrameValidator(),
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: MessageAssembler.maxFragments,
                maxAccumulatedFrameSize: maxMessageSize),
            collector)
        for frame in frames { try channel.writeInbound(frame) }
        _ = try channel.finish()
        return collector.events
    }

    /// The assembler's events for `frames` (after an unmasked frame, nothing more, as the validator).
    static func assembled(_ frames: [WebSocketFrame]) -> [String] {
        var assembler = MessageAssembler()
        var events: [String] = []
        for frame in frames {
            do {
                if let out = try assembler.take(ClientFrame(frame), maxMessageSize: maxMessageSize) {
                    events.append(describe(out))
                }
            } catch MessageAssembler.Failed.earlier {
                continue
            } catch {
                events.append("error \(error)")
            }
        }
        return events
    }

    static let cases: [(String, [WebSocketFrame])] = [
        ("one whole message", [frame(.binary, [1, 2, 3])]),
        ("a text message", [frame(.text, Array("hi".utf8))]),
        (
            "three fragments with a ping between them",
            [frame(.binary, [1], fin: false), frame(.ping, [9]), frame(.continuation, [2], fin: false), frame(.continuation, [3])]
        ),
        ("a continuation first, then a message", [frame(.continuation, [1]), frame(.binary, [2])]),
        (
            "a new message before the last one ended, then the next one",
            [frame(.binary, [1], fin: false), frame(.binary, [2]), frame(.binary, [3])]
        ),
        (
            "fragments over the size limit, then a message",
            [frame(.binary, Array(repeating: 1, count: 60), fin: false), frame(.continuation, Array(repeating: 2, count: 60)),
             frame(.binary, [4])]
        ),
        (
            "too many fragments",
            [frame(.binary, [0], fin: false)] + (1..<300).map { frame(.continuation, [UInt8($0 & 0x7F)], fin: false) }
                + [frame(.binary, [5])]
        ),
        ("an unmasked frame, then nothing more", [frame(.binary, [1]), frame(.binary, [2], mask: nil), frame(.binary, [3])]),
        ("a reserved bit, then nothing more", [frame(.binary, [1], rsv1: true), frame(.connectionClose, [3, 232])]),
        ("an empty message in two empty fragments", [frame(.binary, [], fin: false), frame(.continuation, [])]),
    ]

    @Test("same outputs and errors as MaskedFrameValidator + NIOWebSocketFrameAggregator", arguments: 0..<cases.count)
    func agreement(index: Int) throws {
        let (name, frames) = Self.cases[index]
        let expected = try Self.reference(frames)
        #expect(!expected.isEmpty, "\(name)")
        #expect(Self.assembled(frames) == expected, "\(name)")
    }

    @Test("known answers: a joined message is unmasked and whole; errors are the aggregator's")
    func knownAnswers() {
        #expect(
            Self.assembled([Self.frame(.binary, [1, 2], fin: false), Self.frame(.continuation, [3])])
                == ["\(WebSocketOpcode.binary) true [1, 2, 3]"])
        #expect(
            Self.assembled([Self.frame(.continuation, [1])])
                == ["error \(NIOWebSocketFrameAggregator.Error.didReceiveFragmentBeforeReceivingTextOrBinaryFrame)"])
        #expect(Self.assembled([Self.frame(.binary, [1], mask: nil)]) == ["error \(UnmaskedFrameError())"])
    }
}
