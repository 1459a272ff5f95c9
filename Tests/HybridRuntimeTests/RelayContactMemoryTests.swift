import CTAP2
import HybridCore
import HybridRuntime
import Synchronization
import Testing

/// ``RelayConfiguration/contactPersistence``: a relay that remembers the contact IDs phones listened
/// on and revoked across a restart, so a desktop linked to a phone that is not back yet keeps its
/// link (504) however late it comes, and a revoked ID stays 410.
@Suite("Relay: contact memory across restarts", .serialized, .timeLimit(.minutes(1)))
struct RelayContactMemoryTests {
    /// The saves a relay made, newest last.
    final class Saves: Sendable {
        let all = Mutex<[RelayContactMemory]>([])
        var last: RelayContactMemory? { all.withLock { $0.last } }
        func persistence(from initial: RelayContactMemory = RelayContactMemory()) -> RelayContactPersistence {
            RelayContactPersistence(initial: initial) { memory in self.all.withLock { $0.append(memory) } }
        }
    }

    /// No grace: a contact ID the relay does not remember is unknown (410) at once. `saveDelay`:
    /// how long a change waits for its save.
    static func configuration(_ persistence: RelayContactPersistence, saveDelay: Duration = .seconds(1)) -> RelayConfiguration {
        var configuration = LinkedRelayTests.configuration
        configuration.contactPersistence = persistence
        configuration.contactSaveDelay = saveDelay
        return configuration
    }

    @Test("a phone's listen and a revocation are saved within about a second; the next relay, started from that memory with no grace, answers the known ID 504 (link kept) and the revoked one 410; an ID in neither is 410 unknown")
    func rememberedAcrossRestart() async throws {
        let saves = Saves()
        let phone = LinkedRelayTests.token("memory-phone")
        let gone = LinkedRelayTests.token("memory-gone")
        // 3 s: the listen's revocation and its attach fall into one save however slow the machine.
        try await withRelay(Self.configuration(saves.persistence(), saveDelay: .seconds(3))) { _, endpoint in
            let listening = try await LinkedRelayTests.listen(endpoint, phone, revoked: [gone.base64URL])
            #expect(await eventually(timeout: .seconds(10)) { saves.last?.known == [phone.contactID] })
            #expect(saves.last?.revoked == [gone.contactID])
            #expect(saves.all.withLock { $0.count } == 1, "one save for the changes within the delay")
            await listening.close()
        }
        let memory = try #require(saves.last)

        let next = Saves()
        try await withRelay(Self.configuration(next.persistence(from: memory))) { relay, endpoint in
            let notBack = await expectRuntimeError(.upgradeRejected) {
                _ = try await LinkedRelayTests.contact(endpoint, phone.contactID, header: LinkedRelayTests.payload().headerValue)
            }
            #expect(notBack?.httpStatus == 504, "\(String(describing: notBack))")
            #expect(notBack?.description.contains("the linked phone is not listening") == true, "\(String(describing: notBack))")
            let revoked = await expectRuntimeError(.upgradeRejected) {
                _ = try await LinkedRelayTests.contact(endpoint, gone.contactID, header: LinkedRelayTests.payload().headerValue)
            }
            #expect(revoked?.httpStatus == 410 && revoked?.description.contains("contact ID revoked") == true, "\(String(describing: revoked))")
            let stranger = await expectRuntimeError(.upgradeRejected) {
                _ = try await LinkedRelayTests.contact(endpoint, LinkedRelayTests.token("stranger").contactID, header: LinkedRelayTests.payload().headerValue)
            }
            #expect(stranger?.httpStatus == 410 && stranger?.description.contains("contact ID unknown") == true, "\(String(describing: stranger))")
            #expect(relay.statistics.rejectedRequests == [504: 1, 410: 2], "\(relay.statistics.rejectedRequests)")
        }
        #expect(next.all.withLock { $0 }.isEmpty, "nothing changed while it ran: nothing saved, not even at its shutdown")
    }

    @Test("a phone listening again with the same revocations changes nothing and is not saved again; another phone's listen is")
    func unchangedListenIsNotSaved() async throws {
        let saves = Saves()
        let phone = LinkedRelayTests.token("same-phone")
        let gone = [LinkedRelayTests.token("same-gone-1").base64URL, LinkedRelayTests.token("same-gone-2").base64URL]
        try await withRelay(Self.configuration(saves.persistence(), saveDelay: .milliseconds(50))) { _, endpoint in
            let first = try await LinkedRelayTests.listen(endpoint, phone, revoked: gone)
            #expect(await eventually(timeout: .seconds(10)) { saves.last?.known == [phone.contactID] })
            #expect(saves.last?.revoked.count == 2)
            let count = saves.all.withLock { $0.count }
            for _ in 0..<3 {
                let again = try await LinkedRelayTests.listen(endpoint, phone, revoked: gone)
                await again.close()
            }
            try await Task.sleep(for: .milliseconds(300))
            #expect(saves.all.withLock { $0.count } == count, "listening again with nothing new saved again")
            let other = try await LinkedRelayTests.listen(endpoint, LinkedRelayTests.token("same-other"))
            #expect(await eventually(timeout: .seconds(10)) { saves.last?.known.count == 2 })
            await other.close()
            await first.close()
        }
    }

    @Test("a change still waiting for its save when the relay shuts down is saved before shutdown returns; a save that throws is logged and the relay goes on")
    func savedAtShutdown() async throws {
        let saves = Saves()
        let phone = LinkedRelayTests.token("shutdown-phone")
        let gone = LinkedRelayTests.token("shutdown-gone")
        // A minute's delay: only the save at shutdown can write it.
        let relay = TunnelRelay(configuration: Self.configuration(saves.persistence(), saveDelay: .seconds(60)))
        let endpoint = try await relay.start()
        // The revocation is recorded when the listen request is decided, before its 101.
        let listening = try await LinkedRelayTests.listen(endpoint, phone, revoked: [gone.base64URL])
        await relay.shutdown()
        #expect(saves.all.withLock { $0.count } == 1)
        #expect(saves.last?.revoked == [gone.contactID])
        #expect(relay.contactSaveProblem == nil)
        await listening.close()

        struct Refused: Error {}
        let attempts = Atomic<Int>(0)
        let failing = RelayContactPersistence(initial: RelayContactMemory()) { _ in
            attempts.add(1, ordering: .relaxed)
            throw Refused()
        }
        let failingRelay = TunnelRelay(configuration: Self.configuration(failing))
        let failingEndpoint = try await failingRelay.start()
        let first = try await LinkedRelayTests.listen(failingEndpoint, LinkedRelayTests.token("failing-1"))
        #expect(await eventually(timeout: .seconds(5)) { attempts.load(ordering: .relaxed) == 1 })
        let second = try await LinkedRelayTests.listen(failingEndpoint, LinkedRelayTests.token("failing-2"))
        #expect(await eventually(timeout: .seconds(5)) { attempts.load(ordering: .relaxed) == 2 }, "the next change tries again")
        await failingRelay.shutdown()
        #expect(attempts.load(ordering: .relaxed) == 3, "the shutdown tries a failed save again")
        #expect(failingRelay.contactSaveProblem?.contains("Refused") == true, "\(String(describing: failingRelay.contactSaveProblem))")
        await first.close()
        await second.close()
    }

    @Test("at shutdown a memory saved already is not saved again (a full disk cannot fail it), unless its place no longer holds it (a file removed or replaced since)")
    func savedAtShutdownOnlyWhenNeeded() async throws {
        for placeLost in [false, true] {
            let saves = Saves()
            // What the place holds: the last save, or (placeLost) nothing once the first save is made.
            let persistence = RelayContactPersistence(
                initial: RelayContactMemory(), current: { placeLost ? nil : saves.last ?? RelayContactMemory() }
            ) { memory in saves.all.withLock { $0.append(memory) } }
            let relay = TunnelRelay(configuration: Self.configuration(persistence, saveDelay: .milliseconds(50)))
            let endpoint = try await relay.start()
            let phone = LinkedRelayTests.token("every-shutdown")
            let listening = try await LinkedRelayTests.listen(endpoint, phone)
            #expect(await eventually(timeout: .seconds(5)) { saves.all.withLock { $0.count } == 1 })
            await relay.shutdown()
            #expect(saves.all.withLock { $0.count } == (placeLost ? 2 : 1) && saves.last?.known == [phone.contactID], "\(placeLost)")
            #expect(relay.contactSaveProblem == nil)
            await listening.close()
        }
        // A relay that learned nothing: no save at all (its initial memory is what the place holds).
        let idle = Saves()
        let relay = TunnelRelay(configuration: Self.configuration(idle.persistence(from: RelayContactMemory(known: [[UInt8](repeating: 7, count: 32)]))))
        _ = try await relay.start()
        await relay.shutdown()
        #expect(idle.all.withLock { $0 }.isEmpty)
    }

    @Test("a save that failed with nothing changed since is made again at shutdown: the disk that had no room has it now, and the relay reports no problem")
    func failedSaveRetriedAtShutdown() async throws {
        struct Full: Error {}
        let saved = Mutex<[RelayContactMemory]>([])
        let attempts = Atomic<Int>(0)
        let flaky = RelayContactPersistence(initial: RelayContactMemory()) { memory in
            guard attempts.add(1, ordering: .relaxed).newValue > 1 else { throw Full() }
            saved.withLock { $0.append(memory) }
        }
        let relay = TunnelRelay(configuration: Self.configuration(flaky, saveDelay: .milliseconds(50)))
        let endpoint = try await relay.start()
        let phone = LinkedRelayTests.token("flaky-phone")
        let listening = try await LinkedRelayTests.listen(endpoint, phone)
        #expect(await eventually(timeout: .seconds(5)) { attempts.load(ordering: .relaxed) == 1 })
        await relay.shutdown()
        #expect(attempts.load(ordering: .relaxed) == 2)
        #expect(saved.withLock { $0.last?.known } == [phone.contactID])
        #expect(relay.contactSaveProblem == nil, "\(String(describing: relay.contactSaveProblem))")
        await listening.close()
    }

    @Test("a memory longer than the relay keeps: the newest IDs of it")
    func longMemoryKeepsNewest() async throws {
        let ids = (0..<(RelayContactMemory.capacity + 2)).map { index in
            LinkedRelayTests.token("long-\(index)").contactID
        }
        let saves = Saves()
        let phone = LinkedRelayTests.token("long-new")
        try await withRelay(Self.configuration(saves.persistence(from: RelayContactMemory(known: ids)))) { _, endpoint in
            let listening = try await LinkedRelayTests.listen(endpoint, phone)
            #expect(await eventually(timeout: .seconds(5)) { saves.last != nil })
            await listening.close()
        }
        let known = try #require(saves.last?.known)
        #expect(known.count == RelayContactMemory.capacity)
        #expect(known.last == phone.contactID)
        #expect(Array(known.dropLast()) == Array(ids.suffix(RelayContactMemory.capacity - 1)))
    }
}
