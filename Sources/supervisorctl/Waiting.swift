import ArgumentParser
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import LifecycleControl

// Commands that wait for their outcome, as systemctl does: `launch`,
// `activate`, `stop`, `home`, `lock` and `unlock` return once the change has
// happened (exit 0) or failed (exit 6, with the reason: the app ended
// instead), or after --timeout (exit 7). --no-block returns once the daemon
// accepted the command. How: follow the events of the apps concerned
// first, then send the command, then look at their status; each record
// about them is a reason to look again. Nothing is polled.

/// What waiting commands share.
struct Waiting: ParsableArguments {
    @Flag(help: "Return once the daemon accepted the command; do not wait for the outcome.")
    var noBlock = false
    @Option(help: "Seconds to wait for the outcome (exit 7 after).")
    var timeout: Double = 60
}

extension Connection {
    /// Sends `request` and waits for its goal (LifecycleControl's `Goal`,
    /// the daemon's D-Bus operations' too; computed from the status before
    /// the command, for home, lock and unlock).
    func requestAndWait(_ request: ControlRequest, _ waiting: Waiting) throws {
        guard !waiting.noBlock else {
            _ = try self.request(request)
            return
        }
        // An app that ended before this command was sent has not failed it.
        let sentAt = Date().timeIntervalSince1970
        let before = try status()
        guard let goal = Goal.of(request, before: before) else {
            _ = try self.request(request)
            return
        }
        let follower = try client()
        follower.setReadTimeout(seconds: waiting.timeout)
        let following: ControlResponse
        do { following = try follower.send(ControlRequest(.events, apps: goal.apps, follow: true)) } catch {
            printError("cannot follow the daemon's events: \(error)")
            throw ExitCode(Exit.badResponse)
        }
        guard following.ok else { try fail(following.error) }  // an unknown app, say
        _ = try self.request(request)
        let giveUp = Date().addingTimeInterval(waiting.timeout)
        while true {
            switch goal.outcome(try status(), since: sentAt) {
            case .done?: return
            case .failed(let f)?, .superseded(let f)?:
                printError("\(f.app) ended instead: \(f.reason): \(f.description)")
                throw ExitCode(Exit.failed)
            case nil: break
            }
            // Wait for the next record about these apps, or the timeout.
            let left = giveUp.timeIntervalSinceNow
            guard left > 0 else { throw timedOut(request, waiting) }
            follower.setReadTimeout(seconds: left)
            do { _ = try follower.readResponse() } catch {
                guard giveUp.timeIntervalSinceNow <= 0 else {
                    printError(
                        "lifecycled went away while '\(request.command.rawValue)' was under way (a restart or "
                            + "a daemon-reexec?); supervisorctl status shows where it is")
                    throw ExitCode(Exit.noDaemon)
                }
                throw timedOut(request, waiting)
            }
        }
    }

    private func timedOut(_ request: ControlRequest, _ waiting: Waiting) -> ExitCode {
        printError(
            "'\(request.command.rawValue)' accepted, but not done within \(waiting.timeout) s (--timeout); "
                + "supervisorctl status shows where it is")
        return ExitCode(Exit.timedOut)
    }

    func status() throws -> StatusReport {
        guard let report = try request(ControlRequest(.status)).status else {
            printError("the daemon answered status without a report")
            throw ExitCode(Exit.badResponse)
        }
        return report
    }
}
