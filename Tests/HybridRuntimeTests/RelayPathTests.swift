import Foundation
import HybridRuntime
import Testing

@Suite("Tunnel service path parsing")
struct RelayPathTests {
    @Test("valid paths from tunnel.json parse", arguments: TunnelPathVectors.valid.map(\.path))
    func validPaths(path: String) throws {
        let vector = try #require(TunnelPathVectors.valid.first { $0.path == path })
        let parsed = try #require(TunnelServicePath(parsing: path))
        switch parsed {
        case .new(let tunnelID):
            #expect(vector.method == "new")
            #expect(tunnelID == Array("hello, webauthn!".utf8))
            // Lower case is accepted and re-serialised in upper case.
            #expect(parsed.path == path.uppercased().replacingOccurrences(of: "/CABLE/NEW/", with: "/cable/new/"))
        case .connect(let routingID, let tunnelID):
            #expect(vector.method == "connect")
            #expect(routingID == Array((vector.routingASCII ?? "").utf8))
            #expect(tunnelID == Array((vector.tunnelASCII ?? "").utf8))
            #expect(parsed.path == path)
        case .contact:
            Issue.record("parsed as contact")
        }
    }

    @Test("invalid paths from tunnel.json are rejected", arguments: TunnelPathVectors.invalid)
    func invalidPaths(path: String) {
        #expect(TunnelServicePath(parsing: path) == nil)
    }

    @Test("more malformed paths are rejected", arguments: [
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
    ])
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

    @Test("contact IDs are unpadded base64url", arguments: [
        ([UInt8]([0xFB, 0xFF]), "-_8"),
        ([UInt8]("ABC".utf8), "QUJD"),
        ([UInt8]([0]), "AA"),
        ([UInt8](0..<20), "AAECAwQFBgcICQoLDA0ODxAREhM"),
    ])
    func contactPaths(id: [UInt8], encoded: String) throws {
        let path = TunnelServicePath.contact(contactID: id)
        #expect(path.path == "/cable/contact/\(encoded)")
        #expect(TunnelServicePath(parsing: path.path) == path)
    }

    @Test("the literal lists match shared/vectors/tunnel.json when it is reachable")
    func literalsMatchSharedFile() throws {
        guard let url = TunnelPathVectors.sharedFile else { return }
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any]
        let section = try #require(json?["webauthn_rs_server_path_parsing"] as? [String: Any])
        let invalid = try #require(section["invalid"] as? [String])
        let valid = try #require(section["valid"] as? [[String: Any]])
        #expect(invalid == TunnelPathVectors.invalid)
        #expect(valid.compactMap { $0["path"] as? String } == TunnelPathVectors.valid.map(\.path))
        #expect(valid.compactMap { $0["method"] as? String } == TunnelPathVectors.valid.map(\.method))
    }
}
