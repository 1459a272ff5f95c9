import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// `TunnelDomainID` against `Vectors/domains.json` (Chromium `tunnelserver::DecodeDomain`,
/// PROTOCOL.md §4.1).
@Suite struct TunnelDomainTests {
    struct Vector: Decodable, Sendable, CustomTestStringConvertible {
        let name: String
        let id: UInt16
        let host: String?
        var testDescription: String { name }
    }

    struct HashInputExample: Decodable {
        let id: UInt16
        let sha256Input: String
        let sha256: String
    }

    struct File: Decodable {
        let vectors: [Vector]
        let hashInputExample: HashInputExample
    }

    static func file() throws -> File { try Vectors.load("domains", as: File.self) }

    @Test("every ID maps to its host (nil for 2…255)", arguments: try file().vectors)
    func host(_ vector: Vector) {
        #expect(TunnelDomainID(rawValue: vector.id).host == vector.host)
    }

    @Test func vectorFileShape() throws {
        let vectors = try Self.file().vectors
        #expect(vectors.count == 16)
        #expect(vectors.filter { $0.host == nil }.map(\.id).sorted() == [2, 255])
    }

    /// The hash input is "caBLEv2 tunnel server domain" ‖ uint16_le(id) ‖ 0x00, and the host comes
    /// from the first eight bytes of its SHA-256.
    @Test func hashInputExample() throws {
        let example = try Self.file().hashInputExample
        let input = Array("caBLEv2 tunnel server domain".utf8) + [UInt8(example.id & 0xFF), UInt8(example.id >> 8), 0]
        #expect(Hex.encode(input) == example.sha256Input)
        #expect(Hex.encode(Array(SHA256.hash(data: input))) == example.sha256)
        #expect(TunnelDomainID(rawValue: example.id).host == "cable.wufkweyy3uaxb.com")

        // Decode the host by hand from the published digest: TLD from the low two bits, then
        // base-32 letters five bits at a time.
        let digest = hex(example.sha256)
        var v = (0..<8).reduce(UInt64(0)) { $0 | UInt64(digest[$1]) << UInt64(8 * $1) }
        let tld = ["com", "org", "net", "info"][Int(v & 3)]
        v >>= 2
        var label = ""
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
        while v != 0 {
            label.append(alphabet[Int(v & 31)])
            v >>= 5
        }
        #expect("cable.\(label).\(tld)" == TunnelDomainID(rawValue: example.id).host)
    }

    @Test func assignedDomains() {
        #expect(TunnelDomainID.google.rawValue == 0)
        #expect(TunnelDomainID.apple.rawValue == 1)
        #expect(TunnelDomainID.google.host == "cable.ua5v.com")
        #expect(TunnelDomainID.apple.host == "cable.auth.com")
        for id in UInt16(2)...255 {
            #expect(TunnelDomainID(rawValue: id).host == nil, "id \(id)")
        }
        #expect(HybridConstants.assignedDomainCount == 2)
    }

    /// Every hashed host has the shape `cable.<base-32 label>.<tld>`; a sample across the range.
    @Test func hashedHostShape() throws {
        let alphabet = Set("abcdefghijklmnopqrstuvwxyz234567")
        var hosts = Set<String>()
        for id in stride(from: 256, through: 65535, by: 61) {
            let host = try #require(TunnelDomainID(rawValue: UInt16(id)).host)
            let parts = host.split(separator: ".", omittingEmptySubsequences: false)
            #expect(parts.count == 3, "\(host)")
            #expect(parts.first == "cable")
            #expect(["com", "org", "net", "info"].contains(String(parts.last ?? "")), "\(host)")
            #expect(parts.count == 3 && !parts[1].isEmpty && parts[1].count <= 13 && parts[1].allSatisfy(alphabet.contains), "\(host)")
            hosts.insert(host)
        }
        // Distinct IDs give distinct hosts in the sample.
        #expect(hosts.count == Array(stride(from: 256, through: 65535, by: 61)).count)
    }

    @Test func description() {
        #expect(TunnelDomainID.google.description == "0 (cable.ua5v.com)")
        #expect(TunnelDomainID(rawValue: 7).description == "7 (unknown)")
        #expect(TunnelDomainID(rawValue: 266).description == "266 (cable.wufkweyy3uaxb.com)")
    }
}
