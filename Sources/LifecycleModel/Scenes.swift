// What `status` shows of a scene: one value for the core's snapshot and the
// control protocol alike.

/// One scene of an app, as `status` shows it (the core's snapshot, and
/// the control protocol's JSON).
public struct SceneStatus: Codable, Sendable, Equatable {
    public var name: String
    public var display: String
    public var state: SceneState
    /// In a foreground slot of its display.
    public var inFront: Bool
    /// Discarded by the user, being disconnected.
    public var discarding: Bool?
    /// Disconnected for memory: connects again when shown.
    public var shed: Bool?

    public init(name: String, display: String, state: SceneState, inFront: Bool, discarding: Bool?, shed: Bool?) {
        self.name = name
        self.display = display
        self.state = state
        self.inFront = inFront
        self.discarding = discarding
        self.shed = shed
    }
}
