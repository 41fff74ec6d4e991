// The one byte formatter, in the two spellings people see: the long one in
// logs, kill records and termination descriptions, the compact one in
// supervisorctl's tables. And the few text helpers the CLI took from full
// Foundation (String(format:), trimming), which brings ICU
// into a static binary (docs/performance.md, small binaries).

/// "512 B", "3.2 MiB", "1.5 GiB".
public func formatBytes(_ bytes: UInt64) -> String {
    let (value, unit) = scaled(bytes)
    if unit == 0 { return "\(bytes) B" }
    let rounded = (value * 10).rounded() / 10
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    return rounded == rounded.rounded() ? "\(Int(rounded)) \(units[unit])" : "\(rounded) \(units[unit])"
}

/// "512B", "3.2M", "15G": for table columns.
public func formatBytesCompact(_ bytes: UInt64) -> String {
    let (value, unit) = scaled(bytes)
    if unit == 0 { return "\(bytes)B" }
    let units = ["B", "K", "M", "G", "T"]
    if value < 10 {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)\(units[unit])"
    }
    return "\(Int(value.rounded()))\(units[unit])"
}

/// The value in the largest power of 1024 that keeps it at least 1, and that power.
private func scaled(_ bytes: UInt64) -> (Double, Int) {
    var value = Double(bytes)
    var unit = 0
    while value >= 1024 && unit < 4 {
        value /= 1024
        unit += 1
    }
    return (value, unit)
}

extension Duration {
    /// "1.5 s", "10 min": how the docs and status say durations.
    public var formattedSeconds: String {
        let s = Double(components.seconds) + Double(components.attoseconds) / 1e18
        if s >= 60, s.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(s / 60)) min" }
        return s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
    }
}

/// `x` with `digits` digits after the point, rounded ("12", "3.5"): what
/// String(format: "%.Nf") wrote, without Foundation's formatter.
public func fixed(_ x: Double, _ digits: Int = 0) -> String {
    guard x.isFinite else { return "\(x)" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let scaled = (x * scale).rounded()
    guard abs(scaled) < 9e18 else { return "\(x.rounded())" }
    let n = Int64(scaled)
    let sign = n < 0 ? "-" : ""
    let m = n.magnitude
    let unit = UInt64(scale)
    guard digits > 0 else { return sign + "\(m)" }
    let fraction = String(m % unit)
    return sign + "\(m / unit)." + String(repeating: "0", count: digits - fraction.count) + fraction
}

extension StringProtocol {
    /// Without whitespace, newlines included, at either end.
    public var trimmed: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }
}
