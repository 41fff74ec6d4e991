import Foundation
import LifecycleControl
import Testing

/// The control request read by hand (LifecycleControl/RequestJSON.swift):
/// what supervisorctl sends it reads as JSONDecoder does; anything past its
/// plain shape it leaves to JSONDecoder. (The control-request fuzzer holds
/// the two to the same answer on every input it takes.)
@Suite struct RequestJSONTests {
    func plain(_ line: String) -> ControlRequest? { ControlRequest.readPlain(Array(line.utf8)) }
    func decoded(_ line: String) -> ControlRequest? {
        try? JSONDecoder().decode(ControlRequest.self, from: Data(line.utf8))
    }

    @Test func whatSupervisorctlSendsIsReadAsJSONDecoderReadsIt() throws {
        var requests = ControlRequest.Command.allCases.filter { $0 != .shown }.map { ControlRequest($0, app: "app-1") }
        var every = ControlRequest(.reload, apps: ["a", "b"], background: true, follow: false, level: "critical")
        every.limit = -3
        every.dryRun = true
        every.restartChanged = false
        every.signal = "RTMIN+3"
        every.offset = UInt64.max
        every.payload = "{}"
        every.url = "myapp:open?id=1"
        every.display = "tv"
        every.scene = "main"
        requests.append(every)
        requests.append(ControlRequest(.events, follow: true, limit: 0))
        for request in requests {
            let line = String(decoding: try JSONEncoder().encode(request), as: UTF8.self)
            #expect(plain(line) == request, "\(line)")
        }
        #expect(
            plain(#" { "command" : "launch" , "app" : null , "apps" : [ ] } "#) == ControlRequest(.launch, apps: []))
    }

    /// Past the plain shape it gives up; JSONDecoder decides.
    @Test func anythingElseIsLeftToJSONDecoder() {
        for line in [
            #"{"command":"launch","app":"a\u0041"}"#,  // an escape
            #"{"command":"launch","app":"é"}"#,  // not ASCII
            #"{"command":"launch","app":"a","colour":"red"}"#,  // a key it does not know
            #"{"command":"status","command":"launch"}"#,  // a key twice
            #"{"command":"jetsam","limit":1.0}"#,  // a fraction
            #"{"command":"shown","shown":{"sequence":1,"displays":[]}}"#,
        ] {
            #expect(plain(line) == nil, "\(line)")
        }
        #expect(decoded(#"{"command":"launch","app":"a\u0041"}"#)?.app == "aA", "JSONDecoder still reads it")
        for line in [
            #"{"command":"jetsam","limit":01}"#, #"{"app":"a"}"#, #"{"command":null}"#, #"{"command":"launch"} x"#,
            #"{"command":"nonsense"}"#, #"{"command":"launch","background":1}"#, #"["launch"]"#, "",
            #"{"command":"launch","offset":-1}"#,
        ] {
            #expect(plain(line) == nil, "\(line)")
            #expect(decoded(line) == nil, "\(line)")
        }
    }
}
