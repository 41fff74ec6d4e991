import Foundation

// The status answer written by hand: with 1,000 apps, JSONEncoder's generic
// path cost the daemon 5 ms of a 7 ms answer (docs/performance.md). The
// same keys as the Codable conformance, optionals left out when nil; a
// test decodes both and requires the same value. Anything else still goes
// through JSONEncoder.

/// Appends JSON values to a byte buffer.
public struct JSONBytes {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    mutating func raw(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func raw(_ data: Data) { bytes.append(contentsOf: data) }

    mutating func string(_ s: String) {
        bytes.append(0x22)
        for b in s.utf8 {
            switch b {
            case 0x22: bytes += [0x5C, 0x22]
            case 0x5C: bytes += [0x5C, 0x5C]
            case 0x0A: bytes += [0x5C, 0x6E]
            case 0x0D: bytes += [0x5C, 0x72]
            case 0x09: bytes += [0x5C, 0x74]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += [0x5C, 0x75, 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 15)]]
            default: bytes.append(b)
            }
        }
        bytes.append(0x22)
    }

    mutating func number<T: BinaryInteger>(_ n: T) { bytes += Array(String(n).utf8) }

    mutating func number(_ d: Double) {
        bytes += Array((d.isFinite ? (d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : "\(d)") : "0").utf8)
    }

    mutating func bool(_ b: Bool) { b ? raw("true") : raw("false") }

    /// `[{...},{...}]`: one object per item, its keys written by `body`
    /// (the first with `first: true`).
    mutating func objects<T>(_ items: [T], _ body: (inout JSONBytes, T) -> Void) {
        raw("[")
        for (i, item) in items.enumerated() {
            raw(i > 0 ? ",{" : "{")
            body(&self, item)
            raw("}")
        }
        raw("]")
    }

    /// `,"key":` (without the comma for the first key of an object).
    mutating func key(_ k: StaticString, first: Bool = false) {
        if !first { bytes.append(0x2C) }
        bytes.append(0x22)
        k.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes += [0x22, 0x3A]
    }
}

extension AppStatus {
    func write(to j: inout JSONBytes) {
        j.raw("{")
        j.key("name", first: true)
        j.string(name)
        j.key("state")
        j.string(state.rawValue)
        if let pid { j.key("pid"); j.number(pid) }
        j.key("secondsInState")
        j.number(secondsInState)
        j.key("delivery")
        j.string(delivery.rawValue)
        j.key("backgroundTasks")
        j.objects(backgroundTasks) { j, t in
            j.key("id", first: true)
            j.number(t.id)
            j.key("name")
            j.string(t.name)
        }
        if let backgroundTimeRemaining { j.key("backgroundTimeRemaining"); j.number(backgroundTimeRemaining) }
        if let awaiting { j.key("awaiting"); j.string(awaiting.rawValue) }
        if let t = lastTermination {
            j.key("lastTermination")
            j.raw("{")
            j.key("reason", first: true)
            j.string(t.reason.rawValue)
            j.key("description")
            j.string(t.description)
            j.key("time")
            j.number(t.time)
            if let pid = t.pid { j.key("pid"); j.number(pid) }
            j.raw("}")
        }
        if let footprint { j.key("footprint"); j.number(footprint) }
        if let band { j.key("band"); j.string(band.rawValue) }
        if let memoryLimit { j.key("memoryLimit"); j.number(memoryLimit) }
        if let statusLine { j.key("statusLine"); j.string(statusLine) }
        if let launching { j.key("launching"); j.bool(launching) }
        if let frozen { j.key("frozen"); j.bool(frozen) }
        if let freezeProblem { j.key("freezeProblem"); j.string(freezeProblem) }
        if let changePending { j.key("changePending"); j.bool(changePending) }
        if let removing { j.key("removing"); j.bool(removing) }
        if let relaunchIn { j.key("relaunchIn"); j.number(relaunchIn) }
        if let recentEnds { j.key("recentEnds"); j.number(recentEnds) }
        if let f = failed {
            j.key("failed")
            j.raw("{")
            j.key("reason", first: true)
            j.string(f.reason)
            j.key("description")
            j.string(f.description)
            j.key("ends")
            j.number(f.ends)
            j.key("windowSeconds")
            j.number(f.windowSeconds)
            j.key("time")
            j.number(f.time)
            j.raw("}")
        }
        if let outputProblem { j.key("outputProblem"); j.string(outputProblem) }
        if let nextFetchIn { j.key("nextFetchIn"); j.number(nextFetchIn) }
        if let quit { j.key("quit"); j.bool(quit) }
        if let heldPush { j.key("heldPush"); j.bool(heldPush) }
        if let waking { j.key("waking"); j.string(waking.rawValue) }
        if let restorationBytes { j.key("restorationBytes"); j.number(restorationBytes) }
        if let scenes {
            j.key("scenes")
            j.objects(scenes) { j, s in
                j.key("name", first: true)
                j.string(s.name)
                j.key("display")
                j.string(s.display)
                j.key("state")
                j.string(s.state.rawValue)
                j.key("inFront")
                j.bool(s.inFront)
                if let d = s.discarding { j.key("discarding"); j.bool(d) }
                if let d = s.shed { j.key("shed"); j.bool(d) }
            }
        }
        j.raw("}")
    }
}

extension StatusReport {
    /// `{"ok":true,"status":{...}}` and a newline: the daemon's answer to `status`.
    public func responseLine(daemonEncoder: JSONEncoder) throws -> [UInt8] {
        var j = JSONBytes(capacity: 96 + apps.count * 320)
        j.raw("{\"ok\":true,\"status\":{\"daemon\":")
        j.raw(try daemonEncoder.encode(daemon))
        j.raw(",\"apps\":[")
        for (i, app) in apps.enumerated() {
            if i > 0 { j.raw(",") }
            app.write(to: &j)
        }
        j.raw("]}}\n")
        return j.bytes
    }
}

// And read by hand in supervisorctl, for the same reason (JSONDecoder took
// a third of a 40 ms `supervisorctl status` of 1,000 apps). Anything it
// does not expect makes it give up, and the caller decodes with JSONDecoder.

struct JSONReader {
    struct Unexpected: Error {}

    let b: [UInt8]
    var i = 0

    init(_ bytes: [UInt8]) { b = bytes }

    mutating func ws() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
    }

    mutating func take(_ c: UInt8) -> Bool {
        ws()
        guard i < b.count, b[i] == c else { return false }
        i += 1
        return true
    }

    mutating func expect(_ c: UInt8) throws { if !take(c) { throw Unexpected() } }

    mutating func null() -> Bool {
        ws()
        guard i + 4 <= b.count, b[i] == 0x6E, b[i + 1] == 0x75, b[i + 2] == 0x6C, b[i + 3] == 0x6C else { return false }
        i += 4
        return true
    }

    mutating func bool() throws -> Bool {
        ws()
        if i + 4 <= b.count, b[i] == 0x74 { i += 4; return true }  // true
        if i + 5 <= b.count, b[i] == 0x66 { i += 5; return false }  // false
        throw Unexpected()
    }

    mutating func string() throws -> String {
        try expect(0x22)
        let start = i
        while i < b.count, b[i] != 0x22, b[i] != 0x5C { i += 1 }
        guard i < b.count else { throw Unexpected() }
        if b[i] == 0x22 {  // no escapes: the common case
            defer { i += 1 }
            return String(decoding: b[start..<i], as: UTF8.self)
        }
        var out = Array(b[start..<i])
        var units: [UInt16] = []
        while i < b.count, b[i] != 0x22 {
            if b[i] != 0x5C {
                out.append(b[i])
                i += 1
                continue
            }
            guard i + 1 < b.count else { throw Unexpected() }
            let e = b[i + 1]
            i += 2
            switch e {
            case 0x6E: out.append(0x0A)
            case 0x72: out.append(0x0D)
            case 0x74: out.append(0x09)
            case 0x62: out.append(0x08)
            case 0x66: out.append(0x0C)
            case 0x75:
                guard i + 4 <= b.count, let u = UInt16(String(decoding: b[i..<(i + 4)], as: UTF8.self), radix: 16)
                else { throw Unexpected() }
                i += 4
                units = [u]
                if UTF16.isLeadSurrogate(u), i + 6 <= b.count, b[i] == 0x5C, b[i + 1] == 0x75,
                    let low = UInt16(String(decoding: b[(i + 2)..<(i + 6)], as: UTF8.self), radix: 16)
                {
                    units.append(low)
                    i += 6
                }
                out += Array(String(decoding: units, as: UTF16.self).utf8)
            default: out.append(e)  // \" \\ \/
            }
        }
        guard i < b.count else { throw Unexpected() }
        i += 1
        return String(decoding: out, as: UTF8.self)
    }

    mutating func double() throws -> Double {
        ws()
        let start = i
        while i < b.count,
            (0x30...0x39).contains(b[i]) || b[i] == 0x2D || b[i] == 0x2B || b[i] == 0x2E
                || b[i] == 0x65 || b[i] == 0x45
        {
            i += 1
        }
        guard let d = Double(String(decoding: b[start..<i], as: UTF8.self)) else { throw Unexpected() }
        return d
    }

    mutating func integer<T: FixedWidthInteger>(_: T.Type = T.self) throws -> T {
        ws()
        var negative = false
        if i < b.count, b[i] == 0x2D { negative = true; i += 1 }
        var n: T = 0
        let start = i
        while i < b.count, (0x30...0x39).contains(b[i]) {
            let (m, o1) = n.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(T(b[i] - 0x30))
            guard !o1, !o2 else { throw Unexpected() }
            n = s
            i += 1
        }
        guard i > start, i >= b.count || (b[i] != 0x2E && b[i] != 0x65 && b[i] != 0x45) else { throw Unexpected() }
        return negative ? 0 - n : n
    }

    /// `{ "key": value, ... }`, the body reading each value.
    mutating func object(_ body: (inout JSONReader, String) throws -> Void) throws {
        try expect(0x7B)
        if take(0x7D) { return }
        repeat {
            let key = try string()
            try expect(0x3A)
            try body(&self, key)
        } while take(0x2C)
        try expect(0x7D)
    }

    mutating func array(_ body: (inout JSONReader) throws -> Void) throws {
        try expect(0x5B)
        if take(0x5D) { return }
        repeat { try body(&self) } while take(0x2C)
        try expect(0x5D)
    }

    /// Any value, skipped; its bytes.
    mutating func skip() throws -> Range<Int> {
        ws()
        let start = i
        guard i < b.count else { throw Unexpected() }
        switch b[i] {
        case 0x7B: try object { r, _ in _ = try r.skip() }
        case 0x5B: try array { r in _ = try r.skip() }
        case 0x22: _ = try string()
        case 0x74, 0x66: _ = try bool()
        case 0x6E: if !null() { throw Unexpected() }
        default: _ = try double()
        }
        return start..<i
    }
}

extension StatusReport {
    /// The status in a `status` answer, read by hand; nil when the answer
    /// is anything else (an error, a shape this reader does not know).
    public static func fromResponseLine(_ bytes: [UInt8]) -> StatusReport? {
        var r = JSONReader(bytes)
        var daemon: DaemonStatus?
        var apps: [AppStatus]?
        var ok = false
        do {
            try r.object { r, key in
                switch key {
                case "ok": ok = try r.bool()
                case "status":
                    try r.object { r, key in
                        switch key {
                        case "daemon":
                            let range = try r.skip()
                            daemon = try JSONDecoder().decode(DaemonStatus.self, from: Data(bytes[range]))
                        case "apps":
                            var list: [AppStatus] = []
                            try r.array { r in list.append(try AppStatus.read(&r)) }
                            apps = list
                        default: throw JSONReader.Unexpected()
                        }
                    }
                default: throw JSONReader.Unexpected()
                }
            }
        } catch { return nil }
        guard ok, let daemon, let apps else { return nil }
        return StatusReport(daemon: daemon, apps: apps)
    }
}

extension AppStatus {
    static func read(_ r: inout JSONReader) throws -> AppStatus {
        var a = AppStatus(
            name: "", state: .notRunning, pid: nil, secondsInState: 0, delivery: .library, backgroundTasks: [],
            backgroundTimeRemaining: nil, awaiting: nil, lastTermination: nil)
        func raw<T: RawRepresentable>(_ r: inout JSONReader) throws -> T where T.RawValue == String {
            guard let v = T(rawValue: try r.string()) else { throw JSONReader.Unexpected() }
            return v
        }
        try r.object { r, key in
            if r.null() { return }
            switch key {
            case "name": a.name = try r.string()
            case "state": a.state = try raw(&r)
            case "pid": a.pid = try r.integer()
            case "secondsInState": a.secondsInState = try r.double()
            case "delivery": a.delivery = try raw(&r)
            case "backgroundTasks":
                try r.array { r in
                    var t = BackgroundTask(id: 0, name: "")
                    try r.object { r, key in
                        switch key {
                        case "id": t.id = try r.integer()
                        case "name": t.name = try r.string()
                        default: throw JSONReader.Unexpected()
                        }
                    }
                    a.backgroundTasks.append(t)
                }
            case "backgroundTimeRemaining": a.backgroundTimeRemaining = try r.double()
            case "awaiting": a.awaiting = try raw(&r)
            case "lastTermination":
                var t = TerminationInfo(reason: .exited, description: "", time: 0, pid: nil)
                try r.object { r, key in
                    switch key {
                    case "reason": t.reason = try raw(&r)
                    case "description": t.description = try r.string()
                    case "time": t.time = try r.double()
                    case "pid": t.pid = try r.integer()
                    default: throw JSONReader.Unexpected()
                    }
                }
                a.lastTermination = t
            case "footprint": a.footprint = try r.integer()
            case "band": a.band = try raw(&r)
            case "memoryLimit": a.memoryLimit = try r.integer()
            case "statusLine": a.statusLine = try r.string()
            case "launching": a.launching = try r.bool()
            case "frozen": a.frozen = try r.bool()
            case "freezeProblem": a.freezeProblem = try r.string()
            case "changePending": a.changePending = try r.bool()
            case "removing": a.removing = try r.bool()
            case "relaunchIn": a.relaunchIn = try r.double()
            case "recentEnds": a.recentEnds = try r.integer()
            case "failed":
                var f = FailureInfo(reason: "", description: "", ends: 0, windowSeconds: 0, time: 0)
                try r.object { r, key in
                    switch key {
                    case "reason": f.reason = try r.string()
                    case "description": f.description = try r.string()
                    case "ends": f.ends = try r.integer()
                    case "windowSeconds": f.windowSeconds = try r.double()
                    case "time": f.time = try r.double()
                    default: throw JSONReader.Unexpected()
                    }
                }
                a.failed = f
            case "outputProblem": a.outputProblem = try r.string()
            case "nextFetchIn": a.nextFetchIn = try r.double()
            case "quit": a.quit = try r.bool()
            case "heldPush": a.heldPush = try r.bool()
            case "waking": a.waking = try raw(&r)
            case "restorationBytes": a.restorationBytes = try r.integer()
            case "scenes":
                var list: [SceneStatus] = []
                try r.array { r in
                    var s = SceneStatus(
                        name: "", display: "", state: .unattached, inFront: false, discarding: nil, shed: nil)
                    try r.object { r, key in
                        switch key {
                        case "name": s.name = try r.string()
                        case "display": s.display = try r.string()
                        case "state": s.state = try raw(&r)
                        case "inFront": s.inFront = try r.bool()
                        case "discarding": s.discarding = try r.bool()
                        case "shed": s.shed = try r.bool()
                        default: throw JSONReader.Unexpected()
                        }
                    }
                    list.append(s)
                }
                a.scenes = list
            default: throw JSONReader.Unexpected()
            }
        }
        return a
    }
}
