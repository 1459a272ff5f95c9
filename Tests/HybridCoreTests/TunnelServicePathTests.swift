import CTAP2
import HybridCore
import HybridTestSupport
import Testing

/// `TunnelServicePath`, `TunnelDomainID.baseURL` and `ClientPayload.headerValue` (Chromium `GetNewTunnelURL`, `GetConnectURL`, `GetContactURL`, PROTOCOL.md §4.2, §4.4).
@Suite struct TunnelServicePathTests {
    @Test func bases() {
        #expect(TunnelDomainID.google.baseURL == "wss://cable.ua5v.com")
        #expect(TunnelDomainID.apple.baseURL == "wss://cable.auth.com")
        #expect(TunnelDomainID(rawValue: 266).baseURL == "wss://cable.wufkweyy3uaxb.com")
        #expect(TunnelDomainID(rawValue: 0xF980).baseURL == "wss://cable.my4kstlhndi4c.net")
        for id in UInt16(2)...255 {
            #expect(TunnelDomainID(rawValue: id).baseURL == nil, "id \(id)")
        }
    }

    @Test("paths use upper-case hex")
    func paths() {
        let tunnelID = hex("367cbbf5f5085df4098476afe4b9b1d2")
        #expect(TunnelServicePath.new(tunnelID: tunnelID).path == "/cable/new/367CBBF5F5085DF4098476AFE4B9B1D2")
        #expect(TunnelServicePath.connect(routingID: hex("026555"), tunnelID: tunnelID).path
            == "/cable/connect/026555/367CBBF5F5085DF4098476AFE4B9B1D2")
        #expect(TunnelServicePath.connect(routingID: hex("abcdef"), tunnelID: [UInt8](repeating: 0xfe, count: 16)).path
            == "/cable/connect/ABCDEF/FEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFE")
    }

    @Test("transcript_qr_flow: new-tunnel and connect URLs")
    func transcriptQRURLs() throws {
        let t = try TranscriptQRInputs.load()
        let tunnelID = QRSecretKeys(qrSecret: hex(t.inputs.qr_secret)).tunnelID
        let base = try #require(TunnelDomainID(rawValue: t.inputs.tunnel_server_domain_id).baseURL)
        #expect(base + TunnelServicePath.new(tunnelID: tunnelID).path == t.derived.new_tunnel_url)
        #expect(base + TunnelServicePath.connect(routingID: hex(t.inputs.routing_id), tunnelID: tunnelID).path == t.derived.connect_url)
    }

    @Test("transcript_linked_flow: contact URL, phone's connect URL and client payload header")
    func transcriptLinkedURLs() throws {
        let t = try LinkedTranscriptInputs.load()
        let base = try #require(TunnelDomainID.google.baseURL)
        #expect(base + TunnelServicePath.contact(contactID: hex(t.inputs.contact_id)).path == t.derived.contact_url)
        #expect(base + TunnelServicePath.connect(
            routingID: hex(t.inputs.routing_id_from_service), tunnelID: hex(t.inputs.tunnel_id_from_service)).path
            == t.derived.phone_connect_url)
        let header = ClientPayload(
            pairingID: hex(t.inputs.pairing_id_8), clientNonce: hex(t.inputs.client_nonce_16), requestType: .getAssertion).headerValue
        #expect(header == t.derived.X_caBLE_Client_Payload_header_value)
        #expect(header == Hex.encode(hex(t.derived.client_payload_cbor), uppercase: true))
        let mc = ClientPayload(
            pairingID: hex(t.inputs.pairing_id_8), clientNonce: hex(t.inputs.client_nonce_16), requestType: .makeCredential).headerValue
        #expect(mc.hasSuffix("03626D63"))
    }

    @Test("contact IDs are base64url without padding", arguments: [
        ([UInt8](), "/cable/contact/"),
        ([0xFB], "/cable/contact/-w"),
        ([0xFB, 0xFF], "/cable/contact/-_8"),
        ([0xFB, 0xFF, 0xBF], "/cable/contact/-_-_"),
    ])
    func contactPath(contactID: [UInt8], path: String) {
        #expect(TunnelServicePath.contact(contactID: contactID).path == path)
    }

    @Test func constants() {
        #expect(HybridConstants.webSocketProtocol == "fido.cable")
        #expect(HybridConstants.routingIDHeader == "X-caBLE-Routing-ID")
        #expect(HybridConstants.clientPayloadHeader == "X-caBLE-Client-Payload")
    }
}
