import CTAP2
import Foundation
import HybridCore
import HybridRuntime

/// The phone's part of linking in a QR ceremony: when the QR code says the desktop can link (key 4
/// true), hand out a new pairing ID and save it (with the identity, created on first use) *before*
/// the linking information leaves the phone, so the first `--linked` contact finds it.
enum PhoneLinking {
    /// The linking identity to send, or `nil` when the QR code does not ask for linking.
    static func identityForQR(
        _ payload: QRPayload, passkeyStorePath: String, narrator: PhoneNarrator
    ) throws(ProgramFailure) -> AuthenticatorSession.LinkingIdentity? {
        guard payload.supportsLinking == true else { return nil }
        var store = try load(passkeyStorePath: passkeyStorePath) { narrator.say($0) }
        var identity = store.identity ?? PhoneLinkStore.Identity()
        let linking = identity.newLink()
        store.identity = identity
        do {
            try store.save()
        } catch {
            throw ProgramFailure(.failed, "cannot save the phone's link store: \(error)\(error.advice)")
        }
        narrator.say("the desktop can link: sending linking information as \"\(identity.name)\" (\(store.path))")
        return linking
    }

    /// The link store beside the passkey store; `note` is told when it was upgraded from version 1.
    static func load(passkeyStorePath: String, note: (String) -> Void) throws(ProgramFailure) -> PhoneLinkStore {
        let store: PhoneLinkStore
        do {
            store = try PhoneLinkStore.load(path: PhoneLinkStore.path(besidePasskeyStore: passkeyStorePath))
        } catch {
            throw ProgramFailure(error.failureKind, "cannot use the phone's link store: \(error)\(error.advice)")
        }
        if let from = store.upgradedFromVersion {
            note(
                "note: \(store.path) was version \(from), whose contact ID any linked desktop could listen on; it now has "
                    + "a secret listen token and a new contact ID, so desktops linked before must link again (by QR code): "
                    + "the relay answers them 410, or 504 if it saw this phone listen under the old contact ID")
        }
        return store
    }
}
