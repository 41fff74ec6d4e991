import LifecycleCore
import LifecycleWire
import Testing

/// The daemon maps core events to wire events by name; every event must
/// have exactly one wire code, spelled as LIFECYCLE.md spells it.
@Test func everyLifecycleEventHasAWireCode() {
    #expect(Set(LifecycleEvent.allCases.map(\.rawValue)) == Set(WireEvent.allCases.map(\.name)))
    for e in LifecycleEvent.allCases { #expect(WireEvent(name: e.rawValue) != nil) }
}
