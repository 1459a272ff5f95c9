import CTAP2

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why the passkey store or the relying-party store could not be read or written.
///
/// Every error names the file and the problem in one line (``description``), for example
/// `/home/a/.hybrid-sim/passkeys.json: not JSON: Unexpected character 'x' around line 1, column 1`.
/// A store that fails to load is never modified: nothing is written unless a load succeeded or the
/// file was absent. Two errors are equal when their ``code`` is.
public struct StoreError: CodedError {
    /// The family of failure.
    public enum Code: String, Hashable, Sendable, CaseIterable {
        /// The file exists but cannot be read (permissions, a directory, an I/O error, too large).
        case unreadable
        /// The file is not UTF-8 JSON.
        case notJSON
        /// The JSON is not a store document (not an object, or the entries array is missing).
        case invalidDocument
        /// `version` is absent, not an integer, or not a version this build reads.
        case unsupportedVersion
        /// One entry is malformed (bad base64url, wrong type, missing member, duplicate ID).
        case invalidEntry
        /// The directory could not be created.
        case directoryFailed
        /// Writing, syncing or renaming the file failed; the previous file is intact.
        case writeFailed
        /// The store's lock file could not be opened, or another process held it for too long.
        case locked
    }

    /// The family of failure.
    public let code: Code
    /// The store file.
    public let path: String
    /// What is wrong. Never contains key material.
    public let reason: String
    /// The `errno` of the system call that failed, when one did (`nil` for a file whose content
    /// is wrong): it tells ``isEnvironmentFailure``.
    public let systemError: Int32?

    /// An error of `code` with no path or reason, the value tests match thrown errors against.
    public init(_ code: Code) { self.init(code, path: "", "") }

    /// Creates an error; `systemError` is the `errno` of the system call that failed, if one did.
    public init(_ code: Code, path: String, _ reason: String, systemError: Int32? = nil) {
        self.code = code
        self.path = path
        self.reason = reason
        self.systemError = systemError
    }

    /// The `errno` values that say the machine failed, not the file or the path: no space or quota
    /// left, too many open files (the process's or the system's), an I/O error, no memory, no lock
    /// available, a stale network file handle.
    public static let environmentErrors: Set<Int32> = [ENOSPC, EDQUOT, EMFILE, ENFILE, EIO, ENOMEM, ENOBUFS, ENOLCK, ESTALE]

    /// Whether the failure is the machine's (a full disk, the open-file limit, an I/O error: one of
    /// ``environmentErrors``), which the same command may not meet again, rather than the file's
    /// content or a path this user cannot use. The programs exit 1 for it, not 2 (bad input).
    public var isEnvironmentFailure: Bool {
        systemError.map(Self.environmentErrors.contains) ?? false
    }

    /// One line: `<path>: <summary>: <reason>`.
    public var description: String { "\(path): \(summary): \(reason)" }

    /// What a person can do about a file whose content cannot be used (not JSON, not a store, an
    /// unknown version, a bad entry), to follow ``description`` in a program's error line; empty
    /// for the other codes, whose reason says it.
    package var advice: String {
        switch code {
        case .notJSON, .invalidDocument, .invalidEntry:
            return " (the file is left as it is: fix it, or move it aside to start a new one)"
        case .unsupportedVersion:
            // Most likely a newer build's file: moving it aside would lose what it holds.
            return " (the file is left as it is: use the hybrid-sim that wrote it, or move it aside to start a new one)"
        case .unreadable, .directoryFailed, .writeFailed, .locked:
            return ""
        }
    }

    private var summary: String {
        switch code {
        case .unreadable: return "cannot read the store"
        case .notJSON: return "not JSON"
        case .invalidDocument: return "not a store document"
        case .unsupportedVersion: return "unsupported store version"
        case .invalidEntry: return "invalid entry"
        case .directoryFailed: return "cannot create the store directory"
        case .writeFailed: return "cannot write the store"
        case .locked: return "cannot lock the store"
        }
    }
}
