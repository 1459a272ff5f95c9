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
        var store = try load(passkeyStorePath: passkeyStorePath)
        var identity = store.identity ?? PhoneLinkStore.Identity()
        let linking = identity.newLink()
        store.identity = identity
        do {
            try store.save()
        } catch {
            throw ProgramFailure(.failed, "cannot save the phone's link store: \(error)")
        }
        narrator.say("the desktop can link: sending linking information as \"\(identity.name)\" (\(store.path))")
        return linking
    }

    /// The link store beside the passkey store.
    static func load(passkeyStorePath: String) throws(ProgramFailure) -> PhoneLinkStore {
        do {
            return try PhoneLinkStore.load(path: PhoneLinkStore.path(besidePasskeyStore: passkeyStorePath))
        } catch {
            throw ProgramFailure(.badInput, "cannot use the phone's link store: \(error)")
        }
    }
}
