import HybridRuntime
import Testing

/// The pure part of relay fault injection: the `--fault` grammar and the seeded decisions.
@Suite("Fault injection: rules and decisions")
struct FaultInjectionTests {
    @Test(
        "rules parse to their parts and print back in canonical form",
        arguments: [
            ("drop", "drop"),
            ("drop:0.5@to-phone", "drop:0.5@to-phone"),
            ("delay=200ms", "delay"),
            ("delay=1.5s:0.25@to-desktop", "delay=1500ms:0.25@to-desktop"),
            ("delay=2s", "delay=2s"),
            ("reorder@both", "reorder"),
            ("reorder=1s#2", "reorder=1s#2"),
            ("truncate=10@to-desktop#1", "truncate=10@to-desktop#1"),
            ("close", "close"),
            ("close=4000:1#3", "close=4000#3"),
            ("corrupt:0", "corrupt:0.0"),
            ("duplicate:.5", "duplicate:0.5"),
        ])
    func canonical(written: String, canonical: String) throws {
        #expect(try RelayFault(parsing: written).description == canonical)
        #expect(try RelayFault(parsing: canonical) == RelayFault(parsing: written))
    }

    @Test("the parts of one rule")
    func parts() throws {
        let rule = try RelayFault(parsing: "delay=300ms:0.5@to-phone#2")
        #expect(rule.mode == .delay)
        #expect(rule.duration == .milliseconds(300))
        #expect(rule.rate == 0.5)
        #expect(rule.direction == .toPhone)
        #expect(rule.messageNumber == 2)
        let close = try RelayFault(parsing: "close")
        #expect(close.closeCode == 1011)
        #expect(close.rate == 1 && close.direction == .both && close.messageNumber == nil)
        #expect(try RelayFault(parsing: "reorder").duration == .milliseconds(500))
        #expect(try RelayFault(parsing: "truncate").keptBytes == nil)
    }

    @Test(
        "bad rules are refused with the reason",
        arguments: [
            ("explode", "unknown fault 'explode'; one of drop, delay, duplicate, corrupt, reorder, truncate, close"),
            ("", "unknown fault ''"),
            ("drop:1.5", "rate must be a probability from 0 to 1 such as 0.25, not '1.5'"),
            ("drop:-0.1", "rate must be a probability from 0 to 1 such as 0.25, not '-0.1'"),
            ("drop:nan", "rate must be a probability from 0 to 1 such as 0.25, not 'nan'"),
            ("drop:1e-1", "rate must be a probability from 0 to 1 such as 0.25, not '1e-1'"),
            ("drop@phone", "direction must be to-phone, to-desktop or both, not 'phone'"),
            ("drop#0", "#N must be a message number of at least 1, not '0'"),
            ("drop#x", "#N must be a message number of at least 1, not 'x'"),
            ("drop=3", "drop takes no value"),
            ("corrupt=1", "corrupt takes no value"),
            ("delay=200", "delay=DURATION takes a duration such as 200ms or 1.5s, at most 60s, not '200'"),
            ("delay=0ms", "delay=DURATION takes a duration such as 200ms or 1.5s, at most 60s, not '0ms'"),
            ("delay=61s", "delay=DURATION takes a duration such as 200ms or 1.5s, at most 60s, not '61s'"),
            ("reorder=fast", "reorder=DURATION takes a duration such as 200ms or 1.5s, at most 60s, not 'fast'"),
            ("truncate=-1", "truncate=BYTES takes the number of bytes kept (0 or more), not '-1'"),
            ("truncate=99999999999999999999", "truncate=BYTES is too large: '99999999999999999999' (at most 9223372036854775807;"),
            ("drop#99999999999999999999", "#N is too large: '99999999999999999999' is beyond any message number"),
            ("close=1005", "close=CODE takes a WebSocket close code an endpoint may send"),
            ("close=999", "close=CODE takes a WebSocket close code an endpoint may send"),
            ("close=5000", "close=CODE takes a WebSocket close code an endpoint may send"),
        ])
    func refused(written: String, reason: String) {
        #expect {
            try RelayFault(parsing: written)
        } throws: { error in
            let text = "\(error)"
            return text.hasPrefix("invalid fault '\(written)': \(reason)") && text.hasSuffix("[#N])")
        }
    }

    @Test("a decision is a pure function of seed, recipient, message number and length")
    func pure() throws {
        let faults = try RelayFaults(parsing: ["drop:0.5", "corrupt:0.5", "delay:0.3", "duplicate:0.2"])
        for number in 1...200 {
            for recipient in FaultRecipient.allCases {
                let first = faults.decide(seed: 42, recipient: recipient, number: number, length: 100)
                #expect(first == faults.decide(seed: 42, recipient: recipient, number: number, length: 100))
            }
        }
        let a = (1...200).map { faults.decide(seed: 1, recipient: .phone, number: $0, length: 100) }
        let b = (1...200).map { faults.decide(seed: 2, recipient: .phone, number: $0, length: 100) }
        #expect(a != b, "another seed hits other messages")
    }

    @Test("rate 1 hits every matching message, rate 0 none, rate 0.3 about 30 % (fixed seed)")
    func rates() throws {
        let always = try RelayFaults(parsing: ["drop"])
        let never = try RelayFaults(parsing: ["drop:0"])
        let some = try RelayFaults(parsing: ["drop:0.3"])
        var hits = 0
        for number in 1...10_000 {
            #expect(always.decide(seed: 7, recipient: .desktop, number: number, length: 10).drop)
            #expect(never.decide(seed: 7, recipient: .desktop, number: number, length: 10).isEmpty)
            if some.decide(seed: 7, recipient: .desktop, number: number, length: 10).drop { hits += 1 }
        }
        #expect((2_800...3_200).contains(hits), "\(hits) of 10000")
    }

    @Test("direction and message number select the messages a rule applies to")
    func selection() throws {
        let faults = try RelayFaults(parsing: ["close=4000@to-phone#2", "duplicate@to-desktop"])
        #expect(faults.decide(seed: 0, recipient: .phone, number: 1, length: 8).isEmpty)
        #expect(faults.decide(seed: 0, recipient: .phone, number: 2, length: 8).closeCode == 4000)
        #expect(faults.decide(seed: 0, recipient: .phone, number: 3, length: 8).isEmpty)
        for number in 1...5 {
            let decision = faults.decide(seed: 0, recipient: .desktop, number: number, length: 8)
            #expect(decision.duplicate && decision.hits == [.duplicate])
        }
    }

    @Test("truncate then corrupt: the flipped bit lies inside what is kept")
    func transform() throws {
        let message = [UInt8](0..<100)
        let faults = try RelayFaults(parsing: ["truncate=10", "corrupt"])
        for number in 1...50 {
            let decision = faults.decide(seed: 3, recipient: .phone, number: number, length: message.count)
            #expect(decision.truncatedLength == 10)
            let corruption = try #require(decision.corruptions.first)
            #expect(corruption.offset < 10 && corruption.mask.nonzeroBitCount == 1)
            let out = decision.transform(message)
            #expect(out.count == 10)
            #expect(zip(out, message).filter { $0 != $1 }.count == 1)
        }
        // Default truncation keeps half; a longer "kept" than the message changes nothing.
        #expect(try RelayFaults(parsing: ["truncate"]).decide(seed: 0, recipient: .phone, number: 1, length: 81).truncatedLength == 40)
        let long = try RelayFaults(parsing: ["truncate=500"]).decide(seed: 0, recipient: .phone, number: 1, length: 100)
        #expect(long.transform(message) == message)
    }

    @Test("--fault-seed fixes every tunnel's seed; without it each tunnel's comes from its ID")
    func tunnelSeeds() throws {
        let fixed = try RelayFaults(parsing: ["drop"], seed: 99)
        #expect(fixed.seed(forTunnel: [1, 2, 3]) == 99 && fixed.seed(forTunnel: [4, 5, 6]) == 99)
        let free = try RelayFaults(parsing: ["drop"])
        #expect(free.seed(forTunnel: [1, 2, 3]) == free.seed(forTunnel: [1, 2, 3]))
        #expect(free.seed(forTunnel: [1, 2, 3]) != free.seed(forTunnel: [1, 2, 4]))
        #expect(!RelayFaults().isEnabled && free.isEnabled)
    }
}
