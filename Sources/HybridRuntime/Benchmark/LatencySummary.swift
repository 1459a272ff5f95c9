/// Order statistics of a set of wall times, in milliseconds.
///
/// Percentiles use the nearest-rank method: the p-th percentile of n sorted samples is the sample
/// at rank ⌈p/100 · n⌉ (1-based), so it is always one of the measured values. With 100 samples
/// the p99 is the second-largest; with 200, the third-largest.
public struct LatencySummary: Sendable, Hashable, Codable {
    /// Number of samples.
    public var count: Int
    /// Fastest sample.
    public var min: Double
    /// Median (nearest rank).
    public var p50: Double
    /// 90th percentile (nearest rank).
    public var p90: Double
    /// 99th percentile (nearest rank).
    public var p99: Double
    /// Slowest sample.
    public var max: Double
    /// Arithmetic mean.
    public var mean: Double

    /// Summarises `samples`; all fields are 0 for an empty set.
    public init(samples: [Duration]) {
        self.init(milliseconds: samples.map(\.benchmarkMilliseconds))
    }

    /// Summarises samples already in milliseconds.
    public init(milliseconds samples: [Double]) {
        let sorted = samples.sorted()
        count = sorted.count
        min = sorted.first ?? 0
        max = sorted.last ?? 0
        p50 = Self.percentile(50, ofSorted: sorted)
        p90 = Self.percentile(90, ofSorted: sorted)
        p99 = Self.percentile(99, ofSorted: sorted)
        mean = sorted.isEmpty ? 0 : sorted.reduce(0, +) / Double(sorted.count)
    }

    /// The nearest-rank `percent`-th percentile of ascending `sorted` values (0 when empty).
    public static func percentile(_ percent: Double, ofSorted sorted: [Double]) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((percent / 100 * Double(sorted.count)).rounded(.up))
        return sorted[Swift.min(Swift.max(rank, 1), sorted.count) - 1]
    }
}

extension Duration {
    /// The duration in milliseconds, as a floating-point number.
    var benchmarkMilliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1e3 + Double(attoseconds) / 1e15
    }

    /// The duration in nanoseconds, as a floating-point number.
    var benchmarkNanoseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1e9 + Double(attoseconds) / 1e9
    }
}
