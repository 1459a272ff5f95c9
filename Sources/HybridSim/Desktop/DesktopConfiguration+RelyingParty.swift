import Foundation

extension DesktopConfiguration {
    /// Checks `--rp-url`, `--rp-profile`, `--rp-header`, `--rp-ca` and `--debug-tamper-result` together;
    /// for https, the CA file (or `SSL_CERT_FILE`) is read now, not at the first call.
    func validateRelyingPartyLink() throws(ProgramFailure) {
        func bad(_ message: String) -> ProgramFailure { ProgramFailure(.badInput, message) }
        guard let rpURL else {
            if rpProfile != nil { throw bad("--rp-profile needs --rp-url") }
            if !rpHeaders.isEmpty { throw bad("--rp-header needs --rp-url") }
            if rpCA != nil { throw bad("--rp-ca needs --rp-url") }
            if tamperWithResult { throw bad("--debug-tamper-result needs --rp-url") }
            return
        }
        if optionsFile != nil { throw bad("--rp-url fetches the options: it cannot be combined with --options") }
        if rpProfile == nil { throw bad("--rp-url needs --rp-profile (\(RelyingPartyProfile.builtInNames.joined(separator: ", ")) or a file)") }
        guard let components = URLComponents(string: rpURL), let scheme = components.scheme,
            ["http", "https"].contains(scheme), components.host?.isEmpty == false
        else {
            throw bad("--rp-url \(rpURL) is not an http:// or https:// URL")
        }
        if let problem = RelyingPartyClient.problem(with: components) { throw bad("--rp-url \(RelyingPartyClient.redacted(components)) \(problem)") }
        if scheme == "https" || rpCA != nil { _ = try RelyingPartyTLS.configuration(caFile: rpCA, environment: environment) }
    }
}
