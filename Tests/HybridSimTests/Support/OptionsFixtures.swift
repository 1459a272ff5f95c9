import Foundation

/// The options JSON files in `Fixtures/`, read relative to this source file (the test target
/// declares no resources). Each is in the exact shape its library emits:
///
/// - `py_webauthn-*.json`: py_webauthn 2.x `options_to_json(generate_registration_options(…))` /
///   `generate_authentication_options(…)` (`json.dumps`, insertion order, `", "` separators,
///   64-byte challenge and user handle, the library's default nine algorithms).
/// - `simplewebauthn-*.json`: `@simplewebauthn/server` v13 `generateRegistrationOptions` /
///   `generateAuthenticationOptions` output after `JSON.stringify` (32-byte challenge and user ID,
///   `credProps` extension, `hints`, default algorithms `[-8, -7, -257]`).
///
/// The random values were generated for this project; the shapes follow the libraries' source
/// (`webauthn/helpers/options_to_json_dict.py`, `packages/server/src/registration/generateRegistrationOptions.ts`).
enum OptionsFixtures {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")

    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }
}
