/// The error-correction level of a QR symbol (ISO/IEC 18004 §7.5.1).
///
/// Higher levels survive more damage (glare, moiré, a finger over the screen) but need a bigger
/// symbol for the same data. See ``QREncoder/defaultErrorCorrection`` for the level this
/// simulator uses and why.
public enum QRErrorCorrection: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Level L: about 7 % of the codewords can be restored.
    case low = "L"
    /// Level M: about 15 % of the codewords can be restored.
    case medium = "M"
    /// Level Q: about 25 % of the codewords can be restored.
    case quartile = "Q"
    /// Level H: about 30 % of the codewords can be restored.
    case high = "H"

    /// The one-letter name used by the standard: `L`, `M`, `Q` or `H`.
    public var description: String { rawValue }
}

/// The modules of one QR symbol: a square of dark and light cells, without quiet zone.
///
/// Produced by ``QREncoder``; consumed by the renderers (``TerminalArt``, ``GrayImage``,
/// ``SVGRenderer``). Coordinates start at the top-left corner; `x` is the column, `y` the row.
public struct QRMatrix: Sendable, Hashable {
    /// The number of modules along one side (`17 + 4 × version`).
    public let size: Int
    /// The QR version, 1 … 40.
    public let version: Int
    /// The error-correction level the symbol was encoded with.
    public let errorCorrection: QRErrorCorrection
    /// Row-major modules, `true` = dark; `size × size` entries.
    private let modules: [Bool]

    /// Creates a matrix from row-major modules (`true` = dark).
    ///
    /// - Throws: ``QRError/Code/invalidInput`` unless `modules.count == size * size` and
    ///   `size == 17 + 4 * version` with `version` in 1 … 40.
    public init(version: Int, errorCorrection: QRErrorCorrection, modules: [Bool]) throws(QRError) {
        guard (1...40).contains(version) else {
            throw QRError(.invalidInput, "QR version \(version) is outside 1…40")
        }
        let size = 17 + 4 * version
        guard modules.count == size * size else {
            throw QRError(.invalidInput, "a version \(version) matrix needs \(size * size) modules, got \(modules.count)")
        }
        self.size = size
        self.version = version
        self.errorCorrection = errorCorrection
        self.modules = modules
    }

    /// Whether the module at column `x`, row `y` is dark. Coordinates outside the symbol are
    /// light (they belong to the quiet zone), so renderers can read a margin without checks.
    public subscript(x: Int, y: Int) -> Bool {
        guard x >= 0, y >= 0, x < size, y < size else { return false }
        return modules[y * size + x]
    }

    /// The number of dark modules (handy for sanity checks; a real symbol is roughly half dark).
    public var darkModuleCount: Int { modules.reduce(0) { $0 + ($1 ? 1 : 0) } }
}
