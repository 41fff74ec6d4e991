// What a compositor shows, as its follower (lifecycled-follow) reports it
// over the control socket: the `shown` command (docs/focus.md,
// docs/protocol.md). Always a whole snapshot, never a change: the daemon
// compares it with what it has, so a follower that reconnects, or a daemon
// that restarted, needs nothing but the next one.

public struct ShownReport: Codable, Sendable, Equatable {
    /// Which source saw it: "sway", "wlr-foreign-toplevel".
    public var source: String
    /// Every output the compositor has, by connector name (HDMI-A-1, HEADLESS-1).
    public var outputs: [String]
    public var windows: [ShownWindow]
    /// The follower's promise: the next report comes within this many
    /// seconds (a heartbeat when nothing changes); past it, and a grace,
    /// the daemon calls the follower lost.
    public var interval: Double?
    /// The last request from the daemon (a raise, a home command: their
    /// `sequence`) the follower had carried out before it looked: a
    /// report that predates the daemon's latest request says nothing of
    /// its outcome, and changes no front. Absent: a follower that does not
    /// count (every report counts).
    public var carriedOut: UInt64?
    /// Outputs where something that is not a window has the keyboard focus
    /// (a launcher, an on-screen keyboard, a lock screen: a layer surface),
    /// so no window has it. Absent: none, or a source that cannot tell.
    public var overlaid: [String]?
    /// The session is locked (logind's LockedHint, which the screen locker
    /// sets): every followed display is locked until it says otherwise.
    /// Absent: the follower cannot tell (no logind, no session).
    public var locked: Bool?
    /// The processes that play audio through the session's sound server
    /// (PipeWire: an output stream running), which hold no sound device of
    /// their own. Absent: the follower cannot tell.
    public var playing: [Int32]?

    public init(
        source: String, outputs: [String], windows: [ShownWindow], interval: Double? = nil, carriedOut: UInt64? = nil,
        overlaid: [String]? = nil, locked: Bool? = nil
    ) {
        self.locked = locked
        self.source = source
        self.outputs = outputs
        self.windows = windows
        self.interval = interval
        self.carriedOut = carriedOut
        self.overlaid = overlaid
    }
}

public struct ShownWindow: Codable, Sendable, Equatable {
    /// The source's key for it (sway's con id), for raising it.
    public var id: String
    /// Its client's process, when the source knows it (sway does; the
    /// wlr-foreign-toplevel protocol does not).
    public var pid: Int32?
    /// The Wayland app_id (or X11 class).
    public var appID: String?
    /// Its output; nil when it is on none (sway's scratchpad).
    public var output: String?
    /// It has the seat's keyboard focus.
    public var focused: Bool
    /// The compositor shows it (sway computes this: its workspace shown, not
    /// under a fullscreen window, not in the scratchpad).
    public var visible: Bool
    /// How recently it had the focus on its output: 0 the most recent.
    public var rank: Int

    public init(
        id: String, pid: Int32? = nil, appID: String? = nil, output: String?, focused: Bool, visible: Bool,
        rank: Int
    ) {
        self.id = id
        self.pid = pid
        self.appID = appID
        self.output = output
        self.focused = focused
        self.visible = visible
        self.rank = rank
    }
}

/// The follower as `status` shows it.
public struct FollowerStatus: Codable, Sendable, Equatable {
    /// "following", or "lost" when no report came in time.
    public var state: String
    public var source: String
    /// Windows in the last report, and how many of them belong to no app.
    public var windows: Int
    public var unmanaged: Int
    /// When the last report came (seconds since the epoch).
    public var lastReport: Double
    /// The processes it last said play audio through the session's sound
    /// server (absent: none, or it cannot tell).
    public var playing: [Int32]?

    public init(state: String, source: String, windows: Int, unmanaged: Int, lastReport: Double) {
        self.state = state
        self.source = source
        self.windows = windows
        self.unmanaged = unmanaged
        self.lastReport = lastReport
    }
}

/// What the daemon asks of the follower, on the follower's own connection
/// (a line `{"ok":true,"raise":{...}}` at any time after its first
/// report): show this window, focused, on `output` when given (moved
/// there when it is on another).
public struct RaiseRequest: Codable, Sendable, Equatable {
    public var window: String
    public var output: String?
    /// Counts the daemon's requests to this follower (raises and home commands).
    public var sequence: UInt64
    /// The window is on no output (sway's scratchpad): shown from there first.
    public var offscreen: Bool?
    public init(window: String, output: String? = nil, sequence: UInt64, offscreen: Bool? = nil) {
        self.window = window
        self.output = output
        self.sequence = sequence
        self.offscreen = offscreen
    }
}

/// What the daemon asks of the follower on `home`: run the display's
/// configured compositor command (`home_command`).
public struct CompositorCommand: Codable, Sendable, Equatable {
    public var command: String
    public var display: String
    public var sequence: UInt64
    public init(command: String, display: String, sequence: UInt64) {
        self.command = command
        self.display = display
        self.sequence = sequence
    }
}
