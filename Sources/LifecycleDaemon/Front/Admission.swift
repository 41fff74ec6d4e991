// Who may connect to the control socket and how often they may ask: the
// socket's admission, as a value. Every rule here is about a peer's uid and
// the time, which are given: ControlServer asks it at each accept, request,
// strike and close, and AdmissionTests drive it on a hand-fed clock. Root is
// never limited (its commands also have a private socket of their own).

struct Admission {
    /// Open connections per peer uid other than root, and in all for them:
    /// each is a descriptor. Beyond, a connection is answered with the
    /// reason and closed.
    static let connectionsPerUID = 32
    /// Requests a user other than root may send, over all its connections:
    /// this many a second, in bursts of up to twice as many. A `status` of
    /// 1,000 apps costs milliseconds; without a rate, 32 connections of one
    /// user asking for it without pause would hold the loop for seconds.
    static let requestsPerSecond = 32.0
    /// How long a user whose connection was closed for its strikes has its
    /// new connections closed unanswered (a flooder that reconnects costs
    /// an accept and a close, nothing more). Nanoseconds.
    static let penalty: Int64 = 1_000_000_000
    /// Users remembered at most, for allowances and penalties: beyond,
    /// they are all forgotten and start afresh.
    static let remembered = 1024

    /// Connections of other users than root, at most this many in all.
    let othersLimit: Int
    /// Open connections by peer uid (root's counted, never bounded).
    private(set) var perUID: [UInt32: Int] = [:]
    /// Each user's allowance of requests: tokens, as of when.
    private var allowance: [UInt32: (tokens: Double, at: Int64)] = [:]
    /// Penalised users, until when.
    private var penalized: [UInt32: Int64] = [:]

    enum Verdict: Equatable {
        case admitted
        /// Closed without an answer: the user is penalised.
        case turnedAway
        /// Answered with the reason, then closed.
        case refused(refusal: String, message: String)
    }

    /// `descriptorLimit`: the daemon's RLIMIT_NOFILE; other users may hold
    /// an eighth of it (at least one user's worth, at most 1,024).
    init(descriptorLimit: UInt64) {
        othersLimit = max(Self.connectionsPerUID, min(1024, Int(clamping: descriptorLimit / 8)))
    }

    /// A connection from `uid` (nil: its credentials could not be read).
    mutating func connect(uid: UInt32, now: Int64) -> Verdict {
        if uid != 0, let until = penalized[uid] {
            if now < until { return .turnedAway }
            penalized[uid] = nil
        }
        if uid != 0 {
            let others = perUID.lazy.filter { $0.key != 0 }.map(\.value).reduce(0, +)
            if perUID[uid, default: 0] >= Self.connectionsPerUID {
                return .refused(
                    refusal: "too-many-connections",
                    message: "too many connections from uid \(uid) (at most \(Self.connectionsPerUID) at once)")
            }
            if others >= othersLimit {
                return .refused(
                    refusal: "too-many-connections",
                    message: "too many connections (at most \(othersLimit) from users other than root)")
            }
        }
        perUID[uid, default: 0] += 1
        return .admitted
    }

    /// An admitted connection closed.
    mutating func disconnected(uid: UInt32) {
        perUID[uid, default: 1] -= 1
        if perUID[uid] == 0 { perUID[uid] = nil }
    }

    /// Takes one request from the user's allowance; false when it is spent.
    mutating func request(uid: UInt32, now: Int64) -> Bool {
        guard uid != 0 else { return true }
        if allowance.count > Self.remembered { allowance = [:] }
        var a = allowance[uid] ?? (tokens: 2 * Self.requestsPerSecond, at: now)
        a.tokens = min(2 * Self.requestsPerSecond, a.tokens + Double(max(0, now - a.at)) / 1e9 * Self.requestsPerSecond)
        a.at = now
        let ok = a.tokens >= 1
        if ok { a.tokens -= 1 }
        allowance[uid] = a
        return ok
    }

    /// The user's connection was closed for its strikes: its new ones are
    /// turned away for the penalty.
    mutating func struckOut(uid: UInt32, now: Int64) {
        guard uid != 0 else { return }
        if penalized.count > Self.remembered { penalized = [:] }
        penalized[uid] = now + Self.penalty
    }
}
