import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Reads the CPU time, resident memory, open descriptors and threads of one process, or the sum over
/// several (the instances of a relay cluster), from `/proc` (Linux).
///
/// The relay load benchmark uses it on the relay processes, so its figures are the relay's own cost
/// and not the load generator's. Every reading is one pass over small text files; nothing is cached.
public struct ProcessProbe: Sendable {
    /// One reading of the process (of all of them, added up).
    public struct Sample: Sendable, Hashable, Codable {
        /// User plus system CPU time since the process started, in seconds.
        public var cpuSeconds: Double
        /// The system (kernel) part of ``cpuSeconds``: the system calls and what the kernel does in
        /// them (for a relay, most of it is the TCP path of each read and write).
        public var systemCPUSeconds: Double = 0
        /// Resident set size (`VmRSS`), in bytes.
        public var residentBytes: Int
        /// Entries of `/proc/PID/fd`.
        public var openFiles: Int
        /// Threads of the process.
        public var threads: Int
    }

    /// Why a process could not be read.
    public struct ProbeError: Error, CustomStringConvertible {
        /// What failed, with the path.
        public let description: String
    }

    /// The resolution of the CPU times `/proc` reports: one clock tick (`_SC_CLK_TCK`, 10 ms on Linux).
    public static let cpuTickSeconds = 1 / Double(sysconf(Int32(_SC_CLK_TCK)))

    /// The processes read.
    public let pids: [Int32]

    /// A probe of process `pid`.
    public init(pid: Int32) {
        self.pids = [pid]
    }

    /// A probe of the sum over `pids` (at least one).
    public init(pids: [Int32]) {
        precondition(!pids.isEmpty, "a probe needs a process")
        self.pids = pids
    }

    /// A probe of this process.
    public static var current: ProcessProbe { ProcessProbe(pid: getpid()) }

    /// Reads the processes now and adds their figures up.
    ///
    /// - Throws: ``ProbeError`` when a `/proc/PID` is missing (the process ended) or unreadable.
    public func sample() throws -> Sample {
        var total = Sample(cpuSeconds: 0, residentBytes: 0, openFiles: 0, threads: 0)
        for pid in pids {
            let one = try Self.sample(pid)
            total.cpuSeconds += one.cpuSeconds
            total.systemCPUSeconds += one.systemCPUSeconds
            total.residentBytes += one.residentBytes
            total.openFiles += one.openFiles
            total.threads += one.threads
        }
        return total
    }

    private static func sample(_ pid: Int32) throws -> Sample {
        let stat = try read("/proc/\(pid)/stat", pid)
        // The command name (field 2) is in parentheses and may hold spaces: split after the last ')'.
        guard let close = stat.lastIndex(of: ")") else { throw ProbeError(description: "/proc/\(pid)/stat: no ')'") }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After ')' the fields start at field 3 (state): utime is field 14, stime 15, num_threads 20.
        guard fields.count > 17, let user = Double(fields[11]), let system = Double(fields[12]),
            let threads = Int(fields[17])
        else { throw ProbeError(description: "/proc/\(pid)/stat: unexpected layout") }
        // A killed process stays readable as a zombie until its parent reaps it: it has ended all the same.
        if fields[0] == "Z" || fields[0] == "X" {
            throw ProbeError(description: "the measured process \(pid) ended during the run (it is a zombie, not yet reaped)")
        }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))

        var resident = 0
        for line in try read("/proc/\(pid)/status", pid).split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kibibytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            resident = kibibytes * 1024
        }
        let files = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
        return Sample(
            cpuSeconds: (user + system) / ticks, systemCPUSeconds: system / ticks, residentBytes: resident, openFiles: files,
            threads: threads)
    }

    /// The process on this machine that listens on TCP `port` (IPv4 or IPv6), if there is exactly one
    /// and it can be read: the listening socket's inode from `/proc/net/tcp{,6}`, then the process whose
    /// descriptor table holds `socket:[inode]`.
    public static func listening(onPort port: Int) -> ProcessProbe? {
        var inodes: Set<String> = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let columns = line.split(separator: " ")
                guard columns.count > 9, columns[3] == "0A",  // 0A: TCP_LISTEN
                    let portHex = columns[1].split(separator: ":").last, Int(portHex, radix: 16) == port
                else { continue }
                inodes.insert(String(columns[9]))
            }
        }
        guard !inodes.isEmpty else { return nil }
        let targets = Set(inodes.map { "socket:[\($0)]" })
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var owners: Set<Int32> = []
        for name in processes {
            guard let pid = Int32(name) else { continue }
            let directory = "/proc/\(name)/fd"
            for fd in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
                if let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(fd)"),
                    targets.contains(link)
                {
                    owners.insert(pid)
                    break
                }
            }
        }
        return owners.count == 1 ? owners.first.map(ProcessProbe.init(pid:)) : nil
    }

    private static func read(_ path: String, _ pid: Int32) throws -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            if kill(pid, 0) != 0, errno == ESRCH {
                throw ProbeError(description: "the measured process \(pid) ended during the run (cannot read \(path))")
            }
            throw ProbeError(description: "cannot read \(path) (has process \(pid) ended?)")
        }
    }
}
