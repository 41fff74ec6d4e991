@preconcurrency import Glibc

/// Signals by name, as `kill -l` spells them, for `supervisorctl signal`:
/// "TERM", "SIGTERM", "term", "15", "RTMIN+3". One table for the client (to
/// say a name is wrong before asking) and the daemon (to check again).
public enum SignalNames {
    static let table: [(String, Int32)] = [
        ("HUP", SIGHUP), ("INT", SIGINT), ("QUIT", SIGQUIT), ("ILL", SIGILL), ("TRAP", SIGTRAP),
        ("ABRT", SIGABRT), ("BUS", SIGBUS), ("FPE", SIGFPE), ("KILL", SIGKILL), ("USR1", SIGUSR1),
        ("SEGV", SIGSEGV), ("USR2", SIGUSR2), ("PIPE", SIGPIPE), ("ALRM", SIGALRM), ("TERM", SIGTERM),
        ("STKFLT", SIGSTKFLT), ("CHLD", SIGCHLD), ("CONT", SIGCONT), ("STOP", SIGSTOP), ("TSTP", SIGTSTP),
        ("TTIN", SIGTTIN), ("TTOU", SIGTTOU), ("URG", SIGURG), ("XCPU", SIGXCPU), ("XFSZ", SIGXFSZ),
        ("VTALRM", SIGVTALRM), ("PROF", SIGPROF), ("WINCH", SIGWINCH), ("IO", SIGIO), ("PWR", SIGPWR),
        ("SYS", SIGSYS),
    ]

    /// Signals that stop or continue a process: the daemon's own to send
    /// (it freezes and thaws apps), never an operator's.
    public static let reserved: Set<Int32> = [SIGSTOP, SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU]

    /// The number of a signal name or number; nil when there is none.
    public static func number(_ text: String) -> Int32? {
        if let n = Int32(text) { return n > 0 && n <= __libc_current_sigrtmax() ? n : nil }
        var name = text.uppercased()
        if name.hasPrefix("SIG") { name.removeFirst(3) }
        if let (_, n) = table.first(where: { $0.0 == name }) { return n }
        let min = __libc_current_sigrtmin(), max = __libc_current_sigrtmax()
        if name == "RTMIN" { return min }
        if name == "RTMAX" { return max }
        if name.hasPrefix("RTMIN+"), let k = Int32(name.dropFirst(6)), k >= 0, min + k <= max { return min + k }
        if name.hasPrefix("RTMAX-"), let k = Int32(name.dropFirst(6)), k >= 0, max - k >= min { return max - k }
        return nil
    }

    /// "SIGTERM", "SIGRTMIN+3", or the number.
    public static func name(_ number: Int32) -> String {
        if let (name, _) = table.first(where: { $0.1 == number }) { return "SIG" + name }
        let min = __libc_current_sigrtmin()
        if number >= min && number <= __libc_current_sigrtmax() { return "SIGRTMIN+\(number - min)" }
        return "\(number)"
    }

    /// Why `text` cannot be sent to an app, or nil with its number.
    public static func check(_ text: String) -> Result<Int32, SignalProblem> {
        guard let n = number(text) else { return .failure(.unknown(text)) }
        if reserved.contains(n) { return .failure(.reserved(name(n))) }
        return .success(n)
    }
}

public enum SignalProblem: Error, CustomStringConvertible, Equatable {
    case unknown(String)
    case reserved(String)

    public var description: String {
        switch self {
        case .unknown(let s):
            "unknown signal '\(s)' (a name as kill -l gives it, like TERM, SIGUSR1 or RTMIN+3, or a number)"
        case .reserved(let s):
            "\(s) stops or continues a process: lifecycled freezes and thaws apps itself (use stop, kill or launch)"
        }
    }
}
