import HybridCore
import HybridRuntime
import Testing

@Suite("Tunnel service path parsing")
struct RelayPathTests {
    @Test("Vectors/tunnel.json loads with valid and invalid paths")
    func vectorsLoad() throws {
        let vectors = try TunnelPathVectors.loaded.get()
        #expect(TunnelPathVectors.valid.count == 3)
        #expect(TunnelPathVectors.invalid.count == vectors.count - 3)
        #expect(TunnelPathVectors.invalid.count >= 19)
    }

    @Test(
        "valid paths from Vectors/tunnel.json parse and re-serialise in upper case",
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
        case .contact:
            Issue.record("parsed as contact")
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
            "/cable/contact/",
            "/cable/contact/abc=",
            "/cable/contact/a",
            "/cable/contact/ab+/",
            "/cable/contact/AB",  // dangling non-zero bits: not canonical base64url
            "/cable/contact/QUJD/extra",
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
