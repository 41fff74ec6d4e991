import LifecycleCore
import LifecycleOS

// Nothing leaves before it is durable. Every effect that reaches outside the
// daemon (an event or a reply written to an app, a signal, a freeze, a thaw,
// a kill, a group's kernel settings, an answer or a record to a client) is
// held here until the state that caused it is saved, then performed in the
// order decided. A kill -9 at any instant therefore leaves the next daemon a
// state at least as new as anything an app or a client was told: it may
// carry on from a decision nobody heard of yet (it re-sends the owed event
// on the resumed channel, with its sequence number, and the app runs the
// callback once), never from one older than what they heard. The save is
// the loop's one per turn (a burst of commands or launches shares it); a
// spawn is saved before its step returns, since a process the saved state
// does not name would be a leftover to the next daemon. When the save fails
// (a full disk), what was held goes out all the same: the daemon keeps
// serving its apps, and says that a crash now would lose what changed.
//
// And deadlines are judged on what the app did: before a step fires
// deadlines that have passed since the last one, what was decided leaves
// (after its save), then what the apps concerned sent is read, and those
// facts go first (a daemon stalled by SIGSTOP, swap or a debugger, or late
// to its timer, does not kill an app that answered in time); a fact an app
// reported is judged before deadlines that passed while it waited to be
// read; and an event that left more than 50 ms after its decision (a stall
// between the decision and the save) moves its deadline by as much, in the
// core and in the message, since the app could not see it before.

extension Daemon {
    /// An input waiting in `queue`. `origin`: the one `submit` was called
    /// with, whose effects it returns.
    struct Queued {
        var input: Input
        var found = false
        var origin = false
        init(_ input: Input, found: Bool = false, origin: Bool = false) {
            self.input = input
            self.found = found
            self.origin = origin
        }
    }

    /// Performs `action` once the state that decided it is saved: at once
    /// when nothing waits for a save, else right after the next one. For an
    /// app's run, `run` is the run it was meant for: a run that has ended
    /// or been replaced by then is not touched.
    func outward(_ action: @escaping () -> Void) {
        guard holding else { return action() }
        let decided = decidedAt
        outbox.append { [unowned self] in
            let outer = self.decidedAt
            self.decidedAt = decided  // records keep the time of the decision
            action()
            self.decidedAt = outer
        }
    }

    /// The same for one app's current run.
    func outward(_ id: AppID, _ action: @escaping (Run) -> Void) {
        guard let run = runs[id] else { return }
        outward { [unowned self] in
            guard self.runs[id] === run else { return }
            action(run)
        }
    }

    /// Something changed that the next daemon must see: saved at the end
    /// of this turn of the loop. Never `unsaved = true` alone: what is held
    /// for the save would wait for one that never comes (a daemon with the
    /// memory monitor off, whose first turn nothing else saves).
    func markUnsaved() {
        unsaved = true
        saveTimer?.arm(at: loop.now)
    }

    /// Something waits for a save before it may leave.
    var holding: Bool { unsaved || spawnedUnsaved || !outbox.isEmpty }

    /// After a save (or a save that could not be made): what it held goes
    /// out, in order. What those actions cause waits for the next save.
    func release(changed: Set<AppID>) {
        let held = outbox
        outbox = []
        for action in held { action() }
        control?.release()
        publishToBus(changed: changed)
    }

    /// Reads what the apps with a deadline due at `at` have sent, every
    /// ended child and the end of each adopted one with a deadline due,
    /// before the step that would fire those deadlines: the facts found go
    /// first, judged before the deadlines.
    func readBeforeDeadlines(_ at: Instant) {
        sweeping = true
        if !outbox.isEmpty { saveState() }  // what was decided leaves before anything is judged
        reapChildren()
        let due = supervisor.appsWithDeadlinesDue(at: at)
        // An app taking its channel back after a restart: its resume first.
        if resume.listener >= 0, due.contains(where: { runs[$0].map { $0.channel < 0 } ?? false }) {
            takeWaitingResumes()
        }
        for id in due {
            guard let run = runs[id] else { continue }
            // An adopted app is not our child: its end comes through its
            // pidfd, not the reaping above, and also goes first (a stall
            // can leave its death and its deadline due together).
            if run.adopted, run.pidfd >= 0, Posix.hasEnded(pidfd: run.pidfd) {
                adoptedExited(id, run, tries: Self.adoptedExitTries)
                continue
            }
            if run.channel >= 0 { readChannel(id, run) }
            if run.notify >= 0, runs[id] === run { readNotifications(id, run) }
        }
        sweeping = false
        let found = sweepFound
        sweepFound = []
        queue.insert(contentsOf: found.map { Queued($0, found: true) }, at: 0)
    }
}
