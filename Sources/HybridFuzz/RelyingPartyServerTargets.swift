import CTAP2
import Foundation
import HybridCore
import HybridSim

/// `hybrid-sim rp`'s own input: the raw bytes of a request to its HTTP server, and the result a
/// client posts for verification (Docs/RELYING_PARTY.md).
enum RelyingPartyServerTargets {
    static let all = [relyingPartyRequest, relyingPartyResult]

    static let rpId = "example.com"
    static let origin = "https://example.com"
    static let now: UInt64 = 1_767_225_600

    /// A fresh service for the built-in `profile` (hanko or okta), with a fixed clock, challenges
    /// from a fixed seed and `credentials` in a scratch store (saved there when a result verifies).
    static func service(_ profile: RelyingPartyProfile, credentials: [RegisteredCredential] = []) -> RelyingPartyService {
        RelyingPartyService(
            profile: profile, relyingParty: RelyingParty(id: rpId, origin: origin),
            store: RelyingPartyStore(path: scratch + "/rp-credentials.json", credentials: credentials),
            random: .deterministic(seed: Array("hybrid-fuzz rp".utf8)), now: { now })
    }

    /// This process's scratch directory for the stores the services save, removed when it exits
    /// (``FuzzScratch``).
    static let scratch = FuzzScratch.subdirectory("rp")

    static let hanko = try! RelyingPartyProfile.load("hanko")
    static let okta = try! RelyingPartyProfile.load("okta")

    // MARK: - rp-request

    /// The statuses of the responses in `bytes`, each a status line, header fields with a
    /// `Content-Length` and that many body bytes; `nil` when `bytes` is not such a sequence.
    static func statuses(_ bytes: [UInt8]) -> [Int]? {
        var statuses: [Int] = []
        var rest = bytes[...]
        while !rest.isEmpty {
            guard let end = rest.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
            let head = String(decoding: rest[..<end.lowerBound], as: UTF8.self)
            let lines = head.components(separatedBy: "\r\n")
            guard lines[0].hasPrefix("HTTP/1.1 "), let status = Int(lines[0].dropFirst(9).prefix(3)), (100...599).contains(status) else {
                return nil
            }
            let length = lines.dropFirst().compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
            rest = rest[end.upperBound...]
            guard rest.count >= length else { return nil }
            rest = rest.dropFirst(length)
            statuses.append(status)
        }
        return statuses
    }

    /// One connection's bytes through `rp`'s real pipeline (``RelyingPartyRequestProbe``). The first
    /// input byte picks where the rest is split into two reads (its low 7 bits, as a share of the
    /// length) and whether the client half-closes afterwards (its top bit).
    static let relyingPartyRequest = FuzzTarget(
        "rp-request",
        "rp's HTTP request handling (RequestHeadWatch, NIO's parser, deadline, body limits and budget; EmbeddedChannel, the hanko profile's service); at most one final response, each a status line and its Content-Length, nothing left open or reserved, RequestHeadScan the same however the bytes arrive",
        seeds: {
            let host = "Host: 127.0.0.1:\(RelyingPartyRequestProbe.port)\r\n"
            return [
                "GET /registration_initialize?user_name=alice HTTP/1.1\r\n\(host)\r\n",
                "GET /authentication_initialize HTTP/1.1\r\nHost: localhost:\(RelyingPartyRequestProbe.port)\r\nSec-Fetch-Site: same-origin\r\n\r\n",
                "POST /registration_finalize HTTP/1.1\r\n\(host)Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
                "POST /authentication_finalize HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\n\r\n2;x=y\r\n{}\r\n0\r\n\r\n",
                "POST /registration_finalize HTTP/1.1\r\n\(host)Expect: 100-continue\r\nContent-Length: 3\r\n\r\n[1]",
                "POST /registration_initialize HTTP/1.1\r\n\(host)Origin: http://127.0.0.1:\(RelyingPartyRequestProbe.port)\r\nContent-Length: 0\r\n\r\n",
                "GET https://example.com/ HTTP/1.1\r\n\(host)\r\n",
                "GET / HTTP/1.0\n\n",
                "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            ].enumerated().map { index, text in [UInt8(index * 37 % 256)] + Array(text.utf8) }
        }
    ) { input in
        guard let first = input.first else { return .rejected }
        let bytes = Array(input.dropFirst())
        let split = bytes.count * Int(first & 0x7F) / 127
        let service = service(hanko)
        let outcome = RelyingPartyRequestProbe.run(bytes, split: split, halfClose: first & 0x80 != 0, service: service)
        if outcome.leftOpen { return .violation("the connection was left open after \(input.fuzzHex)") }
        if outcome.leftReserved != 0 { return .violation("\(outcome.leftReserved) body bytes left reserved after \(input.fuzzHex)") }
        if !outcome.scanConsistent { return .violation("RequestHeadScan read \(bytes.fuzzHex) differently split at \(split)") }
        guard let statuses = statuses(outcome.response) else {
            return .violation("rp answered \(Array(outcome.response.prefix(96)).fuzzHex) to \(input.fuzzHex)")
        }
        let finals = statuses.filter { $0 >= 200 }
        guard finals.count <= 1, statuses.last.map({ $0 >= 200 }) ?? true else {
            return .violation("rp answered \(statuses) to \(input.fuzzHex)")
        }
        return finals.first.map { $0 < 300 } == true ? .accepted : .rejected
    }
}
