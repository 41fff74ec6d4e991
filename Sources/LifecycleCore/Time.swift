/// A point on the monotonic clock, in nanoseconds since an arbitrary origin.
///
/// The core never reads a clock: every input carries `now`. The daemon feeds it
/// `CLOCK_MONOTONIC`, tests feed it a manual clock. Because `CLOCK_MONOTONIC` is
/// system-wide on Linux, an `Instant` sent to an app means the same to the app.
public struct Instant: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static let zero = Instant(nanoseconds: 0)

    public static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }

    public static func + (a: Instant, d: Duration) -> Instant {
        Instant(nanoseconds: a.nanoseconds &+ d.nanoseconds)
    }

    public static func - (a: Instant, d: Duration) -> Instant {
        Instant(nanoseconds: a.nanoseconds &- d.nanoseconds)
    }

    public static func - (a: Instant, b: Instant) -> Duration {
        .nanoseconds(a.nanoseconds &- b.nanoseconds)
    }

    public var description: String { "t+\(Duration.nanoseconds(nanoseconds))" }
}

extension Duration {
    /// Whole nanoseconds, saturating at `Int64.max`.
    public var nanoseconds: Int64 {
        let (s, atto) = components
        let (ns, overflow) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return s < 0 ? .min : .max }
        return ns &+ atto / 1_000_000_000
    }
}

extension Instant: Codable {
    public init(from decoder: any Decoder) throws {
        nanoseconds = try decoder.singleValueContainer().decode(Int64.self)
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(nanoseconds)
    }
}

extension Instant: JSONWritable {
    public func write(json w: inout JSONWriter) { w.int(nanoseconds) }
}
