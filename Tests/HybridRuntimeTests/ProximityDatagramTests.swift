import HybridRuntime
import Testing

@Suite("Proximity datagram")
struct ProximityDatagramTests {
    private let advert: [UInt8] = Array(100..<120)

    @Test("encodes UUID big-endian, RSSI as int8, then the 20-byte advert", arguments: ProximityServiceUUID.allCases)
    func layout(uuid: ProximityServiceUUID) throws {
        let datagram = try ProximityDatagram(serviceUUID: uuid, rssi: -45, advert: advert)
        let bytes = datagram.bytes
        #expect(bytes.count == 23)
        #expect(bytes[0] == UInt8(uuid.rawValue >> 8))
        #expect(bytes[1] == UInt8(uuid.rawValue & 0xFF))
        #expect(bytes[2] == 0xD3)  // -45
        #expect(Array(bytes[3...]) == advert)
        #expect(try ProximityDatagram(parsing: bytes) == datagram)
    }

    @Test("known bytes parse: FFF9, rssi -128 and +127")
    func knownBytes() throws {
        let low = try ProximityDatagram(parsing: [0xFF, 0xF9, 0x80] + advert)
        #expect(low.serviceUUID == .fido)
        #expect(low.rssi == -128)
        let high = try ProximityDatagram(parsing: [0xFD, 0xE2, 0x7F] + advert)
        #expect(high.serviceUUID == .google)
        #expect(high.rssi == 127)
        #expect(high.advert == advert)
    }

    @Test("wrong lengths are .wrongDatagramLength", arguments: [0, 1, 3, 22, 24, 64])
    func wrongLength(length: Int) async {
        let bytes = [UInt8](repeating: 0xFF, count: length)
        await expectRuntimeError(.wrongDatagramLength) { _ = try ProximityDatagram(parsing: bytes) }
    }

    @Test("other UUIDs are .unknownServiceUUID", arguments: [UInt16(0x0000), 0xFFFA, 0xF9FF, 0xE2FD, 0xFEF9])
    func unknownUUID(uuid: UInt16) async {
        let bytes = [UInt8(uuid >> 8), UInt8(uuid & 0xFF), 0] + Array(repeating: 0, count: 20)
        let error = await expectRuntimeError(.unknownServiceUUID) { _ = try ProximityDatagram(parsing: bytes) }
        #expect(error?.description.contains("unknown service UUID") == true)
    }

    @Test("an advert must have exactly 20 bytes", arguments: [0, 19, 21])
    func advertLength(length: Int) async {
        await expectRuntimeError(.wrongAdvertLength) {
            _ = try ProximityDatagram(rssi: 0, advert: Array(repeating: 1, count: length))
        }
    }

    @Test(
        "udp:// endpoints parse and print",
        arguments: [
            ("udp://127.0.0.1:47002", "127.0.0.1", 47002),
            ("udp://localhost:1", "localhost", 1),
            ("udp://[::1]:65535", "::1", 65535),
        ]
    )
    func endpoints(text: String, host: String, port: Int) throws {
        let endpoint = try ProximityEndpoint(parsing: text)
        #expect(endpoint.host == host)
        #expect(endpoint.port == port)
        #expect(endpoint.description == text)
    }

    @Test(
        "malformed udp:// endpoints are .invalidAddress",
        arguments: [
            "127.0.0.1:47002", "udp://127.0.0.1", "udp://:47002", "udp://127.0.0.1:0", "udp://127.0.0.1:x",
            "tcp://127.0.0.1:1",
        ]
    )
    func badEndpoints(text: String) async {
        await expectRuntimeError(.invalidAddress) { _ = try ProximityEndpoint(parsing: text) }
    }
}
