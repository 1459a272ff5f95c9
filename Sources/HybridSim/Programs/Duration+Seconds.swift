/// Durations in messages and configuration.
extension Duration {
    /// "3 s", "2.5 s", "120 s".
    var seconds: String {
        let (whole, attoseconds) = components
        if attoseconds == 0 { return "\(whole) s" }
        let value = Double(whole) + Double(attoseconds) / 1e18
        return "\((value * 10).rounded() / 10) s"
    }

    /// The duration in (possibly fractional) seconds.
    var secondsValue: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}
