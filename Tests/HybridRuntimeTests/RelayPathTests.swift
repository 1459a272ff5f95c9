import CTAP2
import HybridCore
import HybridRuntime
import Testing

@Suite("Tunnel service path parsing")
struct RelayPathTests {
    @Test("Vectors/tunnel.json loads with valid and invalid paths")
    func vectorsLoad() throws {
        let vectors = try TunnelPathVectors.loaded.get()
        #expect(TunnelPathVectors.valid.count == 5)
        #expect(TunnelPathVectors.valid.filter { $0.method == "contact" }.count == 2)
        #expect(TunnelPathVectors.invalid.count == vectors.count - 5)
        #expect(TunnelPathVectors.invalid.count >= 27)
    }

    @Test(
        "valid paths from Vectors/tunnel.json parse and re-serialise (hex in upper case)",
        arguments: TunnelPathVectors.valid
    )
    func validPaths(vector: TunnelPathVector) throws {
        let parsed = try #require(TunnelServicePath(parsing: vector.path))
        let segments = vector.path.split(separator: "/").map(String.init)
        switch parsed {
        case .new(let tunnelID):
            #expect(vector.method == "new")
            #expect(tunnelID == Array("hello, webauthn!".utf8))
            #expect(parsed.path == "/cable/new/" + segments[2].uppercased())
        case .connect(let routingID, let tunnelID):
            #expect(vector.method == "connect")
            #expect(routingID == Array("abc".utf8))
            #expect(tunnelID == Array("hello, webauthn!".utf8))
            #expect(
                parsed.path
                    == vector.path.uppercased().replacingOccurrences(of: "/CABLE/CONNECT/", with: "/cable/connect/")
            )
        case .contact(let contactID):
            #expect(vector.method == "contact")
            #expect(Hex.encode(contactID) == vector.contactID)
            #expect(parsed.path == vector.path)
        }
    }

    @Test("invalid paths from Vectors/tunnel.json are rejected", arguments: TunnelPathVectors.invalid)
    func invalidPaths(path: String) {
        #expect(TunnelServicePath(parsing: path) == nil)
    }

    @Test(
        "more malformed paths are rejected",
        arguments: [
            "/cable/new/68656C6C6F2C20776562617574686E21?x=1",
            "/cable/new//68656C6C6F2C20776562617574686E21",
            "//cable/new/68656C6C6F2C20776562617574686E21",
            "/cable/NEW/68656C6C6F2C20776562617574686E21",
            "/cable/new/68656C6C6F2C20776562617574686E2G",
            "/cable/new/+8656C6C6F2C20776562617574686E21",
            "/cable/contact/abc=",
            "/cable/contact/ab+/",
            "/cable/other/68656C6C6F2C20776562617574686E21",
            "/cable",
            "",
        ]
    )
    func moreInvalidPaths(path: String) {
        #expect(TunnelServicePath(parsing: path) == nil)
    }

    @Test("paths are built in upper-case hex and round-trip")
    func buildAndParse() throws {
        let tunnelID: [UInt8] = Array(0xF0...0xFF)
        let routingID: [UInt8] = [0x0A, 0xBC, 0xDE]
        let new = TunnelServicePath.new(tunnelID: tunnelID)
        #expect(new.path == "/cable/new/F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF")
        #expect(TunnelServicePath(parsing: new.path) == new)
        let connect = TunnelServicePath.connect(routingID: routingID, tunnelID: tunnelID)
        #expect(connect.path == "/cable/connect/0ABCDE/F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF")
        #expect(TunnelServicePath(parsing: connect.path) == connect)
    }

    @Test(
        "contact IDs are unpadded base64url",
        arguments: [
            ([UInt8]([0xFB, 0xFF]), "-_8"),
            ([UInt8]("ABC".utf8), "QUJD"),
            ([UInt8]([0]), "AA"),
            ([UInt8](0..<20), "AAECAwQFBgcICQoLDA0ODxAREhM"),
        ]
    )
    func contactPaths(id: [UInt8], encoded: String) throws {
        let path = TunnelServicePath.contact(contactID: id)
        #expect(path.path == "/cable/contact/\(encoded)")
        #expect(TunnelServicePath(parsing: path.path) == path)
    }
}

/// The parser reads a target's UTF-8 bytes; this is the earlier reading by `Character`s, kept as the
/// reference the byte parser must agree with on every input (Unicode included: a combining mark
/// after `/` makes one `Character`, not a separator).
@Suite("Tunnel service path parsing: bytes agree with characters")
struct RelayPathReferenceTests {
    private static func reference(_ target: String) -> TunnelServicePath? {
        guard target.utf8.count <= TunnelServicePath.maxPathLength, target.hasPrefix("/cable/") else { return nil }
        let segments = target.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count >= 4, segments[0].isEmpty else { return nil }
        switch (segments[2], segments.count) {
        case ("new", 4):
            return Hex.decode(segments[3], byteCount: 16).map { .new(tunnelID: $0) }
        case ("connect", 5):
            guard let routingID = Hex.decode(segments[3], byteCount: 3),
                let tunnelID = Hex.decode(segments[4], byteCount: 16)
            else { return nil }
            return .connect(routingID: routingID, tunnelID: tunnelID)
        case ("contact", 4):
            guard let id = Base64URL.decodeUnpadded(segments[3]), !id.isEmpty else { return nil }
            return .contact(contactID: id)
        default:
            return nil
        }
    }

    @Test(
        "Unicode around the separators and keywords",
        arguments: [
            "/cable/new/68656C6C6F2C20776562617574686E21",
            "/cable/new/\u{301}68656C6C6F2C20776562617574686E21",
            "/cable/new\u{301}/68656C6C6F2C20776562617574686E21",
            "/cable\u{301}/new/68656C6C6F2C20776562617574686E21",
            "/cable/ne\u{301}w/68656C6C6F2C20776562617574686E21",
            "/cable/new/68656C6C6F2C20776562617574686E2\u{301}1",
            "/cable/new/\u{FF16}8656C6C6F2C20776562617574686E21",
            "/cable/connect/C0FFEE/\u{301}68656C6C6F2C20776562617574686E21",
            "/cable/connect/C0FFEE\u{301}/68656C6C6F2C20776562617574686E21",
            "/cable/connect/C0FFEE/68656C6C6F2C20776562617574686E21/",
            "/cable/connect/C0FFEE//68656C6C6F2C20776562617574686E21",
            "/cable/connect/C0FFEE",
            "/cable/connect//68656C6C6F2C20776562617574686E21",
            "/cable/contact/QUJD\u{301}",
            "/cable/contact/QUJD",
            "/cable/\u{212A}/QUJD",
        ]
    )
    func unicode(target: String) {
        #expect(TunnelServicePath(parsing: target) == Self.reference(target), "\(target.debugDescription)")
    }

    @Test("10,000 mutations of valid targets parse as the reference parses them")
    func mutations() {
        let seeds = [
            "/cable/new/68656C6C6F2C20776562617574686E21",
            "/cable/connect/C0FFEE/68656C6C6F2C20776562617574686E21",
            "/cable/contact/AAECAwQFBgcICQoLDA0ODxAREhM",
        ]
        let alphabet: [String] = ["/", "a", "F", "0", "9", "g", "-", "_", "=", ".", "?", "%", " ", "\u{301}", "\u{FF10}", "é", "new", "connect", "contact"]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        var accepted = 0
        for round in 0..<10_000 {
            var characters = Array(seeds[round % seeds.count])
            for _ in 0...next(3) {
                let position = next(characters.count + 1)
                switch next(3) {
                case 0: characters.insert(contentsOf: alphabet[next(alphabet.count)], at: position)
                case 1: if position < characters.count { characters.remove(at: position) }
                default:
                    if position < characters.count { characters[position] = Array(alphabet[next(alphabet.count)])[0] }
                }
            }
            let target = String(characters)
            let parsed = TunnelServicePath(parsing: target)
            #expect(parsed == Self.reference(target), "\(target.debugDescription)")
            if parsed != nil { accepted += 1 }
        }
        #expect(accepted > 100, "the mutations also reach accepted targets (\(accepted))")
    }
}

@Suite("The simulator's listen path")
struct ListenPathTests {
    @Test("/cable/listen/ builds unpadded base64url and parses it back strictly")
    func listenPath() {
        let id: [UInt8] = [0xFB, 0xFF]
        #expect(TunnelServicePath.listenPath(contactID: id) == "/cable/listen/-_8")
        #expect(TunnelServicePath.listenContactID(parsing: "/cable/listen/-_8") == id)
        for bad in ["/cable/listen/-_8=", "/cable/listen/", "/cable/listen/-_8/x", "/cable/listen/AB", "/cable/contact/-_8"] {
            #expect(TunnelServicePath.listenContactID(parsing: bad) == nil, "\(bad)")
        }
        // The listen path is not one of the tunnel service's own three shapes.
        #expect(TunnelServicePath(parsing: "/cable/listen/-_8") == nil)
    }
}
