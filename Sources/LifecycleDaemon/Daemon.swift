import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleControl
import LifecycleCore
import LifecycleOS
import LifecycleWire
import Logging

/// The daemon shell: one sd-event loop that turns kernel and socket events
/// into inputs for the pure core, and performs the effects the core returns.
/// Every decision is the core's; this file only executes and reports.
public final class Daemon {
    public struct Options: Sendable {
        public var configPath: String
        /// Overrides the config's control socket.
        public var controlSocket: String?
        /// Overrides the config's cgroup root; "none" forces the fallback.
        public var cgroupRoot: String?
        public init(configPath: String, controlSocket: String? = nil, cgroupRoot: String? = nil) {
            self.configPath = configPath
            self.controlSocket = controlSocket
            self.cgroupRoot = cgroupRoot
        }
    }

    /// One running process of an app.
    final class Run {
        let generation: UInt64
        let pid: Int32
        let pidfd: Int32
        let group: AppGroup
        var channel: Int32
        var channelSource: EventLoop.Source?
        /// Sent events by sequence number, with when they were sent (for ack latency).
        var sent: [UInt32: (event: LifecycleEvent, at: Int64)] = [:]
        var freezeStarted: Int64?
        var freezeTimer: EventLoop.Source?
        /// Plain programs: their NOTIFY_SOCKET, and what they last said with STATUS=.
        var notify: Int32 = -1
        var notifySource: EventLoop.Source?
        var statusLine: String?
        /// Messages received in the current one-second window (flood limit).
        var windowStart: Int64 = 0
        var windowCount = 0

        init(generation: UInt64, pid: Int32, pidfd: Int32, group: AppGroup, channel: Int32) {
            self.generation = generation
            self.pid = pid
            self.pidfd = pidfd
            self.group = group
            self.channel = channel
        }
    }

    let options: Options
    let config: DaemonConfig
    let manifests: [AppID: AppManifest]
    var supervisor: Supervisor
    let loop: EventLoop
    var logger: Logger
    let cgroups: Cgroups?
    let confinement: String
    var control: ControlServer!
    var controlPath: String?
    var coreTimer: EventLoop.Source!
    var runs: [AppID: Run] = [:]
    var byPID: [Int32: AppID] = [:]
    var history: [EventRecord] = []
    var counts: [LifecycleState: Int] = [:]
    var lastStatus = ""
    var statusTimer: EventLoop.Source!
    var statusDue = false
    var queue: [Input] = []
    /// The `now` of the input being handled: records carry the time of the
    /// decision that caused them.
    var decidedAt: Instant?
    var draining = false
    let searchPath: String
    let selfDirectory: String
    var cleanupTimers: [String: EventLoop.Source] = [:]
    var memory: MemoryMonitor!
    var memoryWatch: MemoryWatch!
    var triggerSource: EventLoop.Source?
    var killLog: KillLog!
    /// Apps whose manifest sets memory.limit.
    var limits: [AppID: UInt64] = [:]

    /// Loads the configuration, takes the cgroup subtree and the control
    /// socket, and tells systemd READY=1 only once all of that is done.
    public init(options: Options, logger: Logger) throws {
        self.options = options
        self.logger = logger
        let (config, apps, problems) = try ConfigLoader.load(path: options.configPath)
        self.config = config
        for p in problems {
            logger.error("skipping app manifest: \(p)", metadata: ["file": "\(p.file)"])
        }
        manifests = Dictionary(uniqueKeysWithValues: apps.map { ($0.name, $0) })
        supervisor = Supervisor(foregroundSlots: config.foregroundSlots, apps: manifests.mapValues(\.policy),
                                memory: config.memory.thresholds(total: MemoryMonitor.memTotal()))
        counts[.notRunning] = manifests.count
        loop = try EventLoop()

        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        selfDirectory = (exe as NSString).deletingLastPathComponent
        searchPath = selfDirectory + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin")

        // Signals come through the loop (signalfd); children are reaped by us,
        // including orphaned grandchildren (child subreaper).
        Posix.blockSignals([SIGCHLD, SIGTERM, SIGINT, SIGHUP])
        signal(SIGPIPE, SIG_IGN)
        _ = lc_become_subreaper()

        let root = options.cgroupRoot ?? config.cgroupRoot
        var groups: Cgroups? = nil
        var why = "disabled by configuration (cgroup_root = \"none\")"
        if root != "none" {
            let (found, reason) = Cgroups.detect(root: root)
            why = reason
            if let found {
                do {
                    try found.enter()
                    groups = found
                } catch {
                    why = "cannot use cgroup subtree \(found.basePath): \(error)"
                }
            }
        }
        cgroups = groups
        if let groups {
            confinement = "cgroup-v2 \(groups.basePath)"
        } else {
            confinement = "process-groups (\(why))"
            logger.warning("""
                no usable cgroup v2 freezer (\(why)): falling back to process groups. \
                Suspension uses SIGSTOP (an app can see it and its children can escape \
                by changing process group), and memory is read from /proc.
                """)
        }

        limits = manifests.compactMapValues(\.policy.memory.limit)
        memory = MemoryMonitor(config: config.memory, cgroups: cgroups, logger: logger)
        killLog = KillLog(directory: config.stateDirectory, keep: config.memory.killHistory, logger: logger)
        memoryWatch = try MemoryWatch(loop: loop) { [unowned self] in self.sampleMemory() }
        if let trigger = memory.trigger {
            triggerSource = try loop.watch(fd: trigger.fd, events: IOEvents.priority) { [unowned self] _ in
                self.sampleMemory(triggered: true)
            }
        }

        coreTimer = try loop.timer { [unowned self] in self.submit(.tick) }
        statusTimer = try loop.timer { [unowned self] in
            self.statusDue = false
            self.sendStatus()
        }
        try loop.onSignal(SIGCHLD) { [unowned self] _ in self.reapChildren() }
        for s in [SIGTERM, SIGINT] {
            try loop.onSignal(s) { [unowned self] info in
                self.logger.notice("received \(Posix.signalName(Int32(info.ssi_signo))): stopping every app")
                self.beginShutdown()
            }
        }
        try loop.onSignal(SIGHUP) { [unowned self] _ in
            self.logger.notice("SIGHUP: configuration reload is not supported yet; restart the daemon to apply changes")
        }

        let listener: Int32
        if let fd = Systemd.listenFDs().first(where: UnixSocket.isListeningUnixStream) {
            try Posix.setNonBlocking(fd)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            listener = fd
            logger.info("control socket passed by socket activation")
        } else {
            let path = options.controlSocket ?? config.controlSocket
            let dir = (path as NSString).deletingLastPathComponent
            try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            listener = try UnixSocket.listen(path: path, mode: mode_t(config.controlSocketMode))
            controlPath = path
        }
        control = try ControlServer(loop: loop, listener: listener, controlGroup: config.controlGroup)
        control.execute = { [unowned self] request, connection in self.execute(request, connection) }

        if Systemd.watchdogInterval() != nil, loop.enableWatchdog() {
            logger.info("watchdog enabled")
        }
    }

    /// Runs until SIGTERM and every app has stopped.
    public func run() throws {
        logger.info("lifecycled ready", metadata: [
            "apps": "\(manifests.count)", "confinement": "\(confinement)",
            "control-socket": "\(controlPath ?? "socket-activated")",
            "memory-accounting": "\(cgroups?.memory.rawValue ?? MemoryAccounting.processPSS.rawValue)",
            "psi-trigger": "\(memory.triggerDescription)",
        ])
        if config.memory.monitor { memoryWatch.arm(at: Posix.monotonicNanoseconds()) }
        sendStatus()
        Systemd.notify("READY=1")
        for name in manifests.keys.sorted() {
            if let mode = manifests[name]!.autostart { submit(mode == .foreground ? .activate(name) : .launch(name, .background)) }
        }
        try loop.run()
        control.close()
        if let controlPath { unlink(controlPath) }
        cgroups?.leave()
        logger.info("lifecycled stopped")
    }

    func beginShutdown() {
        sendStatus()
        Systemd.notify("STOPPING=1")
        submit(.shutdown)
        if supervisor.allStopped { loop.exit() }
    }

    // MARK: - Feeding the core

    func now() -> Instant { Instant(nanoseconds: Posix.monotonicNanoseconds()) }

    /// Hands an input to the core and performs its effects. Inputs that
    /// arise while performing (a failed spawn) are queued, never nested.
    /// Returns the effects of this input.
    @discardableResult
    func submit(_ input: Input) -> [Effect] {
        queue.append(input)
        if draining { return [] }
        draining = true
        defer { draining = false }
        var first: [Effect]? = nil
        while !queue.isEmpty {
            let next = queue.removeFirst()
            let at = now()
            decidedAt = at
            let effects = supervisor.handle(next, now: at)
            if first == nil { first = effects }
            for e in effects { perform(e) }
        }
        decidedAt = nil
        coreTimer.arm(at: supervisor.nextDeadline()?.nanoseconds)
        updateStatus()
        if supervisor.shuttingDown && supervisor.allStopped { loop.exit() }
        return first ?? []
    }

    // MARK: - Performing effects

    func perform(_ effect: Effect) {
        switch effect {
        case .spawn(let id, let generation, let mode): spawn(id, generation, mode)
        case .deliver(let id, let d): deliver(id, d)
        case .backgroundTaskReply(let id, let request, let task, let budgetEnd):
            send(id, .backgroundTaskReply(request: request, task: task, budgetEnd: budgetEnd?.nanoseconds))
        case .expireBackgroundTasks(let id, let tasks):
            send(id, .backgroundTasksExpiring(tasks))
            record(id, .expiring, detail: "tasks \(tasks.map(String.init).joined(separator: ","))")
        case .freeze(let id): freeze(id)
        case .thaw(let id):
            guard let run = runs[id] else { return }
            run.freezeTimer?.cancel(); run.freezeTimer = nil; run.freezeStarted = nil
            do { try run.group.thaw() } catch { logger.error("thaw failed: \(error)", metadata: ["app": "\(id)"]) }
            record(id, .thawed)
        case .kill(let id, let reason):
            guard let run = runs[id] else { return }
            run.group.killAll()
            _ = lc_pidfd_send_signal(run.pidfd, SIGKILL)
            switch reason {
            case .memoryPressure, .memoryLimit:
                // Free its memory now, in our context, rather than when the
                // dying process is next scheduled (Linux 5.15+).
                let started = Posix.monotonicNanoseconds()
                if lc_process_mrelease(run.pidfd) == 0 {
                    let us = (Posix.monotonicNanoseconds() - started) / 1000
                    logger.debug("process_mrelease freed \(id)'s memory in \(us) µs", metadata: ["app": "\(id)"])
                } else {
                    logger.debug("process_mrelease \(id): \(String(cString: strerror(errno)))", metadata: ["app": "\(id)"])
                }
            default: break
            }
            logger.notice("killing \(id): \(reason)", metadata: ["app": "\(id)", "app-pid": "\(run.pid)", "reason": "\(reason.code.rawValue)"])
            record(id, .killed, reason: reason.code.rawValue, detail: reason.description)
        case .transition(let id, let from, let to):
            counts[from, default: 0] -= 1
            counts[to, default: 0] += 1
            let pid = runs[id]?.pid
            var meta: Logger.Metadata = ["app": "\(id)", "from-state": "\(from.rawValue)", "to-state": "\(to.rawValue)"]
            if let pid { meta["app-pid"] = "\(pid)" }
            logger.info("\(id): \(from.rawValue) -> \(to.rawValue)", metadata: meta)
            record(id, .transition, from: from.rawValue, to: to.rawValue)
        case .terminated(let id, let rec):
            let pid = runs[id]?.pid
            var meta: Logger.Metadata = ["app": "\(id)", "reason": "\(rec.reason.code.rawValue)"]
            if let pid { meta["app-pid"] = "\(pid)" }
            logger.notice("\(id) ended: \(rec.reason)", metadata: meta)
            record(id, .terminated, reason: rec.reason.code.rawValue, detail: rec.reason.description)
            terminations[id] = TerminationInfo(reason: rec.reason.code, description: rec.reason.description,
                                               time: wallTime(rec.at), pid: pid ?? lastPID[id])
        case .refused: break
        case .memoryKill(let k): recordKill(k)
        case .remeasure:
            memoryWatch.loud()
            memoryWatch.arm(at: Posix.monotonicNanoseconds())
        }
    }

    var terminations: [AppID: TerminationInfo] = [:]
    var lastPID: [AppID: Int32] = [:]

    func spawn(_ id: AppID, _ generation: UInt64, _ mode: LaunchMode) {
        let m = manifests[id]!
        let fail = { [unowned self] (message: String) in
            self.logger.error("cannot launch \(id): \(message)", metadata: ["app": "\(id)"])
            self.queue.append(.launchFailed(id, generation: generation, message: message))
        }
        let path = m.environment["PATH"].map { selfDirectory + ":" + $0 } ?? searchPath
        let base = (m.file as NSString).deletingLastPathComponent
        guard let executable = Spawner.resolve(m.command[0], searchPath: path, base: base) else {
            return fail("command '\(m.command[0])' not found or not executable (searched \(path))")
        }
        let group: AppGroup
        do { group = try cgroups?.makeAppGroup(name: id, generation: generation) ?? .processGroup() } catch {
            return fail("cannot create its cgroup: \(error)")
        }
        if let limit = m.policy.memory.limit { group.setMemoryLimit(limit) }
        var env = appEnvironment()
        for (k, v) in m.environment { env[k] = v }
        env[Wire.appNameEnvironmentKey] = id
        var channel: (daemon: Int32, app: Int32)? = nil
        if m.policy.delivery == .library {
            do { channel = try UnixSocket.channelPair() } catch {
                _ = group.remove()
                return fail("cannot create its channel: \(error)")
            }
            env[Wire.socketEnvironmentKey] = "3"
            env[Wire.protocolEnvironmentKey] = String(Wire.version)
        }
        var notify: Int32 = -1
        if m.policy.delivery == .signals {
            // The sd_notify protocol, as under systemd: READY=1, STATUS=, STOPPING=1.
            let name = "lifecycled/\(getpid())/\(id).\(generation)"
            notify = lc_notify_socket(name)
            if notify >= 0 {
                env["NOTIFY_SOCKET"] = "@" + name
            } else if m.policy.awaitsReadiness {
                _ = group.remove()
                return fail("cannot create its notification socket: \(String(cString: strerror(errno)))")
            }
        }
        let request = SpawnRequest(
            executable: executable, argv0: m.command[0], arguments: Array(m.command.dropFirst()),
            environment: env, workingDirectory: m.workingDirectory, group: group,
            inherit: channel.map { [(source: $0.app, target: Int32(3))] } ?? [])
        let process: SpawnedProcess
        do { process = try Spawner.spawn(request) } catch {
            if let channel { close(channel.daemon); close(channel.app) }
            if notify >= 0 { close(notify) }
            _ = group.remove()
            return fail("\(executable): \(error)")
        }
        if let channel { close(channel.app) }
        let run = Run(generation: generation, pid: process.pid, pidfd: process.pidfd, group: group,
                      channel: channel?.daemon ?? -1)
        runs[id] = run
        byPID[process.pid] = id
        lastPID[id] = process.pid
        if run.channel >= 0 {
            run.channelSource = try? loop.watch(fd: run.channel) { [unowned self, unowned run] _ in
                self.readChannel(id, run)
            }
        }
        if notify >= 0 {
            run.notify = notify
            run.notifySource = try? loop.watch(fd: notify) { [unowned self, unowned run] _ in
                self.readNotifications(id, run)
            }
        }
        if !process.placedAtomically {
            logger.warning("\(id) was moved into its cgroup after fork (no clone3)", metadata: ["app": "\(id)"])
        }
        record(id, .launched, detail: "\(mode.rawValue) \(executable)")
    }

    /// The daemon's environment minus what belongs to the daemon alone.
    func appEnvironment() -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        for k in ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID",
                  "JOURNAL_STREAM", "INVOCATION_ID", Wire.socketEnvironmentKey, ControlDefaults.socketEnvironmentKey] {
            env[k] = nil
        }
        return env
    }

    func deliver(_ id: AppID, _ d: Delivered) {
        guard let run = runs[id] else { return }
        let m = manifests[id]!
        if m.policy.delivery == .library {
            var options: [KeyValue] = []
            if d.event == .willFinishLaunching || d.event == .didFinishLaunching {
                options.append(KeyValue(LaunchOptionKey.launchMode.rawValue, d.mode.rawValue))
                if let p = d.previous {
                    options.append(KeyValue(LaunchOptionKey.previousReason.rawValue, p.reason.code.rawValue))
                    options.append(KeyValue(LaunchOptionKey.previousDescription.rawValue, p.reason.description))
                    options.append(KeyValue(LaunchOptionKey.previousTime.rawValue, String(wallTime(p.at))))
                }
            }
            let message = EventMessage(
                sequence: d.sequence, event: d.event,
                launchedInBackground: d.mode == .background, deadline: d.deadline?.nanoseconds,
                budgetEnd: d.budgetEnd?.nanoseconds, options: options)
            run.sent[d.sequence] = (d.event, Posix.monotonicNanoseconds())
            if !send(id, .event(message)) {
                logger.warning("\(id): cannot deliver \(d.event.rawValue) (channel full or closed); its deadline still applies",
                               metadata: ["app": "\(id)"])
            }
            record(id, .delivered, event: d.event, sequence: d.sequence)
        } else {
            let signal = m.signals[d.event]
            if let signal { _ = lc_pidfd_send_signal(run.pidfd, signal) }
            record(id, .delivered, event: d.event, sequence: d.sequence,
                   detail: signal.map { "signal \(Posix.signalName($0))" } ?? "no signal mapped")
        }
    }

    @discardableResult
    func send(_ id: AppID, _ message: DaemonMessage) -> Bool {
        guard let run = runs[id], run.channel >= 0 else { return false }
        return UnixSocket.send(run.channel, message.encoded())
    }

    /// More background-task requests than this in one second is a flood: no
    /// honest app needs it (it has at most 64 tasks open). Acknowledgements
    /// do not count: the daemon paces them, one event at a time.
    static let floodLimit = 2000
    /// Messages (or notifications) handled per wake-up: the rest wait for the
    /// next turn of the loop, so one chatty app cannot starve the others.
    static let messagesPerTurn = 64

    func readChannel(_ id: AppID, _ run: Run) {
        var buffer = [UInt8](repeating: 0, count: Wire.maxMessageSize)
        var turn = 0
        while runs[id] === run, turn < Self.messagesPerTurn {
            turn += 1
            switch UnixSocket.receive(run.channel, into: &buffer) {
            case .wouldBlock: return
            case .closed:
                // The process may be exiting; its exit is reported by SIGCHLD.
                // Should it live on without its channel, the deadline of the
                // next event it cannot acknowledge applies.
                run.channelSource?.cancel()
                run.channelSource = nil
                return
            case .oversized:
                submit(.protocolViolation(id, generation: run.generation,
                                          message: "message larger than \(Wire.maxMessageSize) bytes"))
            case .message(let bytes):
                do {
                    let message = try AppMessage.decode(bytes)
                    if case .acknowledge = message {} else if flooding(run) {
                        submit(.protocolViolation(id, generation: run.generation,
                                                  message: "flood: more than \(Self.floodLimit) background-task requests in one second"))
                        return
                    }
                    switch message {
                    case .acknowledge(let seq):
                        if let sent = run.sent.removeValue(forKey: seq) {
                            let latency = Double(Posix.monotonicNanoseconds() - sent.at) / 1000
                            record(id, .acknowledged, event: sent.event, sequence: seq, latency: latency)
                        }
                        submit(.acknowledged(id, generation: run.generation, sequence: seq))
                    case .beginBackgroundTask(let request, let name):
                        submit(.beginBackgroundTask(id, generation: run.generation, request: request, name: name))
                    case .endBackgroundTask(let task):
                        submit(.endBackgroundTask(id, generation: run.generation, task: task))
                    }
                } catch {
                    submit(.protocolViolation(id, generation: run.generation, message: error.description))
                }
            }
        }
    }

    /// sd_notify messages of a plain program. Accepted from any process of
    /// the app (systemd's NotifyAccess=all), checked by the sender's pid;
    /// passed fds (BARRIER=1) are closed by the shim at once.
    func readNotifications(_ id: AppID, _ run: Run) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var turn = 0
        while runs[id] === run, turn < Self.messagesPerTurn {
            turn += 1
            var pid: pid_t = 0
            let n = buffer.withUnsafeMutableBytes { lc_recv_notify(run.notify, $0.baseAddress, UInt($0.count), &pid) }
            guard n >= 0 else { return }      // EAGAIN: all read
            guard n <= buffer.count else {
                logger.warning("\(id): notification of \(n) bytes ignored (at most \(buffer.count))", metadata: ["app": "\(id)"])
                continue
            }
            guard pid > 0, run.group.contains(pid) else {
                logger.warning("\(id): notification from pid \(pid), not one of its processes, ignored", metadata: ["app": "\(id)"])
                continue
            }
            for line in String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n") {
                if line == "READY=1" {
                    record(id, .notified, detail: "READY=1")
                    submit(.ready(id, generation: run.generation))
                } else if line.hasPrefix("STATUS=") {
                    run.statusLine = String(line.dropFirst("STATUS=".count).prefix(256))
                    record(id, .notified, detail: "STATUS=" + (run.statusLine ?? ""))
                } else if line == "STOPPING=1" {
                    record(id, .notified, detail: "STOPPING=1")
                }
            }
        }
    }

    /// Counts one request in the current one-second window.
    func flooding(_ run: Run) -> Bool {
        let now = Posix.monotonicNanoseconds()
        if now - run.windowStart > 1_000_000_000 {
            run.windowStart = now
            run.windowCount = 0
        }
        run.windowCount += 1
        return run.windowCount > Self.floodLimit
    }

    func freeze(_ id: AppID) {
        guard let run = runs[id] else { return }
        let started = Posix.monotonicNanoseconds()
        do {
            if try run.group.freeze() {
                return record(id, .frozen, latency: Double(Posix.monotonicNanoseconds() - started) / 1000)
            }
        } catch {
            logger.error("freeze failed: \(error)", metadata: ["app": "\(id)"])
            return
        }
        // A busy process freezes at its next tick or two: look again, with
        // a short back-off (cgroup.events notifications are rate-limited).
        run.freezeStarted = started
        var delay: Int64 = 250_000
        run.freezeTimer = try? loop.timer { [unowned self, unowned run] in
            guard self.runs[id] === run, let started = run.freezeStarted else { return }
            let now = Posix.monotonicNanoseconds()
            if run.group.isFrozen() {
                run.freezeStarted = nil
                run.freezeTimer?.cancel(); run.freezeTimer = nil
                self.record(id, .frozen, latency: Double(now - started) / 1000)
                return
            }
            if now - started > 5_000_000_000 {
                self.logger.warning("\(id) has not frozen after 5 s; still trying", metadata: ["app": "\(id)"])
                delay = 1_000_000_000
            } else {
                delay = min(delay * 2, 16_000_000)
            }
            run.freezeTimer?.arm(at: now + delay)
        }
        run.freezeTimer?.arm(at: started + delay)
    }

    // MARK: - Children

    /// Reaps every ended child. App main processes are reported to the core;
    /// anything else (an orphaned grandchild, reparented to us as subreaper)
    /// is just reaped. Peeking first (WNOWAIT) keeps each app's exit status.
    func reapChildren() {
        while true {
            var st = lc_child_status()
            guard lc_peek_ended_child(&st) == 0, st.pid != 0 else { return }
            var reaped = lc_child_status()
            _ = lc_reap(st.pid, &reaped)
            guard let id = byPID.removeValue(forKey: st.pid), let run = runs[id], run.pid == st.pid else { continue }
            var status: ExitStatus = st.exited != 0 ? .exited(st.value) : .signaled(st.value)
            if status == .signaled(SIGKILL), run.group.oomKilled() {
                status = .outOfMemory     // the kernel's OOM killer, in its cgroup: the core says why
            }
            runs[id] = nil
            tearDown(id, run)
            submit(.exited(id, generation: run.generation, status))
        }
    }

    /// After the main process ended: kill whatever it left in its cgroup,
    /// close its channel, remove the cgroup once empty.
    func tearDown(_ id: AppID, _ run: Run) {
        run.channelSource?.cancel()
        run.notifySource?.cancel()
        if run.notify >= 0 { close(run.notify) }
        run.freezeTimer?.cancel()
        if run.channel >= 0 { close(run.channel) }
        close(run.pidfd)
        run.group.killAll()
        removeWhenEmpty(run.group)
    }

    func removeWhenEmpty(_ group: AppGroup) {
        if group.remove() { return }
        guard let path = group.path else { return }
        var delay: Int64 = 1_000_000
        let timer = try? loop.timer { [unowned self] in
            if group.remove() || delay > 8_000_000_000 {
                if delay > 8_000_000_000 { self.logger.warning("cgroup \(path) still busy; leaving it") }
                self.cleanupTimers[path]?.cancel()
                self.cleanupTimers[path] = nil
                return
            }
            group.killAll()
            delay *= 2
            self.cleanupTimers[path]?.arm(at: Posix.monotonicNanoseconds() + delay)
        }
        cleanupTimers[path] = timer
        timer?.arm(at: Posix.monotonicNanoseconds() + delay)
    }

    // MARK: - Records and status

    func wallTime(_ at: Instant) -> Double {
        Date().timeIntervalSince1970 - Double(Posix.monotonicNanoseconds() - at.nanoseconds) / 1e9
    }

    func record(_ id: AppID, _ kind: EventRecord.Kind, from: String? = nil, to: String? = nil,
                event: LifecycleEvent? = nil, sequence: UInt32? = nil, latency: Double? = nil,
                reason: String? = nil, detail: String? = nil, kill: KillRecord? = nil) {
        guard config.eventHistory > 0 || control.hasFollowers else { return }
        let at = decidedAt ?? now()
        let r = EventRecord(time: wallTime(at), monotonic: at.nanoseconds,
                            app: id, kind: kind, pid: runs[id]?.pid ?? lastPID[id], from: from, to: to,
                            event: event, sequence: sequence, latencyMicroseconds: latency,
                            reason: reason, detail: detail, kill: kill)
        if config.eventHistory > 0 {
            history.append(r)
            if history.count > config.eventHistory + config.eventHistory / 4 {
                history.removeFirst(history.count - config.eventHistory)
            }
        }
        control.broadcast(r)
    }

    /// STATUS= for systemctl status, at most every 250 ms: sd_notify blocks
    /// when the manager's queue is full, and a burst of transitions (a
    /// thousand apps launching) needs only the last status.
    func updateStatus() {
        guard !statusDue else { return }
        statusDue = true
        statusTimer.arm(at: Posix.monotonicNanoseconds() + 250_000_000)
    }

    func sendStatus() {
        let order: [LifecycleState] = [.active, .inactive, .background, .suspended, .notRunning]
        let parts = order.compactMap { s in counts[s, default: 0] > 0 ? "\(counts[s]!) \(s.rawValue)" : nil }
        var status = "\(manifests.count) apps" + (parts.isEmpty ? "" : ": " + parts.joined(separator: ", "))
        if supervisor.memoryLevel != .normal { status += "; memory \(supervisor.memoryLevel.rawValue)" }
        if status != lastStatus {
            lastStatus = status
            Systemd.notify("STATUS=\(status)")
        }
    }

    // MARK: - Control requests

    func execute(_ request: ControlRequest, _ connection: ControlServer.Connection) -> ControlResponse {
        func needApp() -> AppID? { request.app }
        switch request.command {
        case .status:
            if let unknown = (request.apps ?? []).first(where: { manifests[$0] == nil }) {
                return .failure(.unknownApp, "unknown app '\(unknown)'")
            }
            return ControlResponse(ok: true, status: statusReport(request.apps))
        case .events:
            if let unknown = (request.apps ?? []).first(where: { manifests[$0] == nil }) {
                return .failure(.unknownApp, "unknown app '\(unknown)'")
            }
            let filter = Set(request.apps ?? [])
            if request.follow == true {
                connection.following = filter
                return ControlResponse(ok: true)
            }
            let events = history.suffix(config.eventHistory).filter { filter.isEmpty || filter.contains($0.app) }
            return ControlResponse(ok: true, events: Array(events))
        case .launch, .activate, .stop, .kill:
            guard let app = request.app else { return .failure(.badRequest, "'\(request.command.rawValue)' needs an app") }
            guard manifests[app] != nil else { return .failure(.unknownApp, "unknown app '\(app)'") }
            let input: Input = switch request.command {
            case .launch: .launch(app, request.background == true ? .background : .foreground)
            case .activate: .activate(app)
            case .stop: .stop(app)
            default: .kill(app)
            }
            return outcome(submit(input))
        case .jetsam:
            if let limit = request.limit, limit < 0 { return .failure(.badRequest, "limit must not be negative") }
            return ControlResponse(ok: true, kills: killLog.records(limit: request.limit))
        case .pressure:
            guard let level = request.level.flatMap(MemoryLevel.init(rawValue:)) else {
                return .failure(.badRequest, "'pressure' needs a level: normal, warning or critical (got \(request.level.map { "'\($0)'" } ?? "none"))")
            }
            let report = memory.simulated(groups: runs.mapValues(\.group))
            memoryWatch.loud()     // the next sample, in Swift, ends the simulation as before
            noteLevelChange(to: level, simulated: true, report.measurements)
            return outcome(submit(.simulateMemoryLevel(level, report)))
        case .home: return outcome(submit(.home))
        case .lock: return outcome(submit(.lock))
        case .unlock: return outcome(submit(.unlock))
        case .interruptionBegin: return outcome(submit(.interruptionBegan))
        case .interruptionEnd: return outcome(submit(.interruptionEnded))
        }
    }

    func outcome(_ effects: [Effect]) -> ControlResponse {
        for case .refused(let why) in effects { return .failure(.refused, why.description) }
        return ControlResponse(ok: true)
    }

    func statusReport(_ names: [String]?) -> StatusReport {
        let now = now()
        let apps = (names ?? manifests.keys.sorted()).map { id -> AppStatus in
            let s = supervisor.snapshot(id)!
            return AppStatus(
                name: id, state: s.state, pid: runs[id]?.pid,
                secondsInState: s.state == .notRunning && s.since == .zero ? 0 : Double((now - s.since).nanoseconds) / 1e9,
                delivery: manifests[id]!.policy.delivery,
                backgroundTasks: s.tasks.map { TaskStatus(id: $0.id, name: $0.name) },
                backgroundTimeRemaining: s.budgetEnd.map { max(0, Double(($0 - now).nanoseconds) / 1e9) },
                awaiting: s.awaiting, lastTermination: terminations[id],
                footprint: runs[id]?.group.memoryFootprint(), band: s.band, memoryLimit: limits[id],
                statusLine: runs[id]?.statusLine)
        }
        let watch = memoryWatch.state
        let daemon = DaemonStatus(
            pid: getpid(), foregroundSlots: supervisor.foregroundSlots, foreground: supervisor.foreground,
            locked: supervisor.locked, interruptions: supervisor.interruptions, confinement: confinement,
            shuttingDown: supervisor.shuttingDown,
            memory: MemoryStatus(
                level: supervisor.memoryLevel, simulated: supervisor.memorySimulated,
                accounting: (cgroups?.memory ?? .processPSS).rawValue, trigger: memory.triggerDescription,
                reading: MemoryReading(memory.latest(watch)), quiet: watch.quiet, quietSamples: watch.quietSamples))
        return StatusReport(daemon: daemon, apps: apps)
    }
}

// MARK: - Memory

extension MemoryReading {
    init(_ m: MemoryMeasurements) {
        self.init(available: m.available, total: m.total, stallPercent: m.stallPercent,
                  appsTotal: m.appsTotal, budget: m.budget)
    }

    /// "available 2.1 GiB of 23 GiB (9.1 %), stall 0 %, apps 1 GiB of 2 GiB"
    var summary: String {
        var parts: [String] = []
        if let a = available, let t = total {
            parts.append("available \(formatBytes(a)) of \(formatBytes(t)) (\(String(format: "%.1f", Double(a) * 100 / Double(max(t, 1)))) %)")
        }
        if let s = stallPercent { parts.append("stall \(String(format: "%.1f", s)) %") }
        if let u = appsTotal, let b = budget { parts.append("apps \(formatBytes(u)) of a \(formatBytes(b)) budget") }
        return parts.isEmpty ? "no measurement" : parts.joined(separator: ", ")
    }
}

extension Daemon {
    /// One sample: measure, hand the core what it can act on, look again
    /// after the adaptive interval.
    func sampleMemory(triggered: Bool = false) {
        guard config.memory.monitor else { return }
        let now = Posix.monotonicNanoseconds()
        let report = memory.sample(groups: { self.runs.mapValues(\.group) }, limited: limits, now: now,
                                   triggered: triggered, measuredLevel: supervisor.gauge.level,
                                   preview: { self.supervisor.memoryLevel(previewing: $0) })
        noteLevelChange(to: supervisor.memoryLevel(previewing: report.measurements), simulated: false, report.measurements)
        submit(.memory(report))
        memory.schedule(memoryWatch, after: report, measuredLevel: supervisor.gauge.level,
                        coreLevel: supervisor.memoryLevel, limits: limits, now: now)
    }

    /// Records a change of level before the core acts on it, so the event
    /// stream shows the level first, then what it caused.
    func noteLevelChange(to level: MemoryLevel, simulated: Bool, _ measurements: MemoryMeasurements) {
        let before = supervisor.memoryLevel
        guard level != before else { return }
        let detail = (simulated ? "simulated; " : "") + MemoryReading(measurements).summary
        logger.notice("memory level \(before.rawValue) -> \(level.rawValue): \(detail)",
                      metadata: ["from-level": "\(before.rawValue)", "to-level": "\(level.rawValue)",
                                 "simulated": "\(simulated)"])
        record(EventRecord.daemonWide, .memoryLevel, from: before.rawValue, to: level.rawValue, detail: detail)
    }

    /// A kill for memory: the kill log, the journal, the event stream.
    func recordKill(_ k: MemoryKill) {
        let pid = runs[k.app]?.pid
        let reading = MemoryReading(k.measurements)
        let r = KillRecord(
            time: wallTime(decidedAt ?? now()), app: k.app, pid: pid, reason: k.cause.code,
            footprint: k.footprint, limit: k.limit, state: k.state, band: k.band,
            level: k.level, simulated: k.simulated, reading: reading,
            candidates: k.candidates.map {
                KillRecord.Candidate(app: $0.app, state: $0.state, band: $0.band, footprint: $0.footprint)
            },
            lastNotice: k.lastNotice)
        killLog.append(r, logger: logger)
        let footprint = k.footprint.map(formatBytes) ?? "unknown"
        var detail = "\(k.cause.rawValue): footprint \(footprint), \(k.state.rawValue), band \(k.band.rawValue)"
        if let limit = k.limit { detail += ", limit \(formatBytes(limit))" }
        detail += "; level \(k.level.rawValue)\(k.simulated ? " (simulated)" : ""); \(reading.summary)"
        if k.candidates.count > 1 { detail += "; next: " + k.candidates.dropFirst().prefix(5).map(\.app).joined(separator: ", ") }
        var meta: Logger.Metadata = [
            "app": "\(k.app)", "reason": "\(k.cause.rawValue)", "app-state": "\(k.state.rawValue)",
            "band": "\(k.band.rawValue)", "memory-level": "\(k.level.rawValue)", "simulated": "\(k.simulated)",
            "candidates": "\(k.candidates.map(\.app).joined(separator: ","))",
        ]
        if let pid { meta["app-pid"] = "\(pid)" }
        if let f = k.footprint { meta["footprint-bytes"] = "\(f)" }
        if let a = k.measurements.available { meta["mem-available-bytes"] = "\(a)" }
        logger.notice("jetsam: \(k.app): \(detail)", metadata: meta)
        record(k.app, .jetsam, reason: k.cause.rawValue, detail: detail, kill: r)
    }
}
