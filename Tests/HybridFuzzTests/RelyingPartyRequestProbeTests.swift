import CTAP2
import HybridCore
import HybridSim
import Testing

/// The `rp-request` fuzz target's harness speaks to `rp`'s real pipeline and service: known
/// requests get their known answers, bodies past the budget are refused and given back, and
/// nothing stays open afterwards.
@Suite("Relying-party request probe")
struct RelyingPartyRequestProbeTests {
    static let host = "Host: 127.0.0.1:\(RelyingPartyRequestProbe.port)\r\n"

    static func run(_ text: String, split: Int = 0, halfClose: Bool = false) -> RelyingPartyRequestProbe.Outcome {
        let profile = try! RelyingPartyProfile.load("hanko")
        let service = RelyingPartyService(
            profile: profile, relyingParty: RelyingParty(id: "example.com", origin: "https://example.com"),
            store: RelyingPartyStore(path: "/nonexistent/rp-credentials.json"))
        return RelyingPartyRequestProbe.run(Array(text.utf8), split: split, halfClose: halfClose, service: service)
    }

    static func status(_ outcome: RelyingPartyRequestProbe.Outcome) -> String {
        String(decoding: outcome.response.prefix(12), as: UTF8.self)
    }

    @Test("an options request is answered 200 by the service, split anywhere, and the connection ends")
    func options() {
        let request = "GET /registration_initialize?user_name=zoe HTTP/1.1\r\n\(Self.host)\r\n"
        for split in [0, 5, request.utf8.count - 1] {
            let outcome = Self.run(request, split: split)
            #expect(Self.status(outcome) == "HTTP/1.1 200", "split at \(split)")
            #expect(!outcome.leftOpen && outcome.leftReserved == 0 && outcome.scanConsistent)
        }
    }

    @Test("a body past the budget is 503, one past the options limit 413, and no byte stays reserved")
    func bodies() {
        let overBudget = Self.run("POST /registration_finalize HTTP/1.1\r\n\(Self.host)Content-Length: 300000\r\n\r\n{")
        #expect(Self.status(overBudget) == "HTTP/1.1 503")
        #expect(overBudget.leftReserved == 0 && !overBudget.leftOpen)
        let options = Self.run("GET /registration_initialize?user_name=zoe HTTP/1.1\r\n\(Self.host)Content-Length: 20000\r\n\r\n{")
        #expect(Self.status(options) == "HTTP/1.1 413")
        // Cut short by a half-close: the parser's end-of-input error is answered 400 (or nothing).
        let cut = Self.run("POST /registration_finalize HTTP/1.1\r\n\(Self.host)Content-Length: 10\r\n\r\n{", halfClose: true)
        #expect(["", "HTTP/1.1 400"].contains(Self.status(cut)), "\(String(decoding: cut.response, as: UTF8.self))")
        #expect(cut.leftReserved == 0 && !cut.leftOpen)
    }

    @Test("a head cut short is 408 once the deadline passes; a bare LF is named")
    func heads() {
        #expect(Self.status(Self.run("GET /registration_initialize HTTP/1.1\r\nHost: 127")) == "HTTP/1.1 408")
        let bare = Self.run("GET / HTTP/1.1\n\(Self.host)\n")
        #expect(Self.status(bare) == "HTTP/1.1 400" && String(decoding: bare.response, as: UTF8.self).contains("bare LF"))
    }
}
