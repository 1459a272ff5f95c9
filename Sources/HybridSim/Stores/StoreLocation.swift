import Foundation

/// Where the stores live by default: the directory `$HYBRID_SIM_HOME`, or `~/.hybrid-sim` when that
/// variable is unset or empty. The directory is created with mode 0700 on the first save.
public enum StoreLocation {
    /// The environment variable naming the store directory.
    public static let homeVariable = "HYBRID_SIM_HOME"
    /// The directory under the user's home used when ``homeVariable`` is unset.
    public static let defaultDirectoryName = ".hybrid-sim"

    /// The store directory for `environment`.
    public static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let home = environment[homeVariable], !home.isEmpty { return home }
        let userHome =
            environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? FileManager.default.homeDirectoryForCurrentUser.path
        return URL(fileURLWithPath: userHome).appendingPathComponent(defaultDirectoryName).path
    }
}
