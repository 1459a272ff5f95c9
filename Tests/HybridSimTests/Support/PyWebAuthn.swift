import Foundation
import Testing

/// py_webauthn (an independent relying-party library, `pip install webauthn==3.0.1`, installed by
/// Scripts/install-deps) run through `Fixtures/py_webauthn_verify.py`.
enum PyWebAuthn {
    static let script = OptionsFixtures.directory.appendingPathComponent("py_webauthn_verify.py").path

    /// Whether python3 with py_webauthn is available (tests skip with a message when not).
    static let available: Bool = {
        (try? run(["-c", "import webauthn"], input: Data()).status) == 0
    }()

    /// Why a test skips.
    static let missing = "python3 with py_webauthn is not installed here (Scripts/install-deps installs it; CI runs these tests)"

    /// Verifies with py_webauthn; returns its JSON answer, or throws with its error text.
    static func verify(_ request: [String: Any]) throws -> [String: Any] {
        let input = try JSONSerialization.data(withJSONObject: request)
        let (status, output, error) = try run([script], input: input)
        guard status == 0 else { throw PyWebAuthnError(status: status, message: error) }
        return try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
    }

    private static func run(_ arguments: [String], input: Data) throws -> (status: Int32, output: String, error: String) {
        let run = try ChildProcess.run("/usr/bin/env", ["python3"] + arguments, input: Array(input), timeout: .seconds(60))
        return (run.status, run.output, run.error)
    }
}

struct PyWebAuthnError: Error, CustomStringConvertible {
    let status: Int32
    let message: String
    var description: String { "py_webauthn exited \(status): \(message)" }
}
