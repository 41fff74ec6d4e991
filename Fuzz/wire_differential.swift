// libFuzzer target: the app channel's two decoders against each other, the
// Swift one (Sources/LifecycleWire/Wire.swift) and the C client's
// (clib/src/wire.c, compiled by clang and imported through clib/src/wire.h),
// built by scripts/fuzz.sh with `swiftc -sanitize=fuzzer,address`.
// Property, for the daemon-to-app and the app-to-daemon decoder alike: the
// same bytes are accepted by both or rejected by both; rejected, with the
// same error text; accepted, as the same message, field by field.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWireDifferential(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    compare(
        "daemon", bytes, swift: { () throws(WireError) in try DaemonMessage.decode(bytes) },
        c: { lifecycle__decode_daemon(data, size, $0, $1) }, difference: difference)
    compare(
        "app", bytes, swift: { () throws(WireError) in try AppMessage.decode(bytes) },
        c: { lifecycle__decode_app(data, size, $0, $1) }, difference: difference)
    return 0
}

func compare<M>(
    _ side: String, _ bytes: [UInt8], swift: () throws(WireError) -> M,
    c: (UnsafeMutablePointer<lifecycle__message>, UnsafeMutablePointer<CChar>) -> Int32,
    difference: (M, lifecycle__message) -> String?
) {
    var message = lifecycle__message()
    var error = [CChar](repeating: 0, count: Int(LC_WIRE_ERROR_MAX))
    let status = error.withUnsafeMutableBufferPointer { c(&message, $0.baseAddress!) }
    let cError = error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    let hex = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    do {
        let decoded = try swift()
        guard status == 0 else { fatalError("\(side) \(hex): Swift accepts (\(decoded)), C rejects: \(cError)") }
        if let d = difference(decoded, message) { fatalError("\(side) \(hex): decoded differently: \(d)") }
    } catch {
        guard status != 0 else { fatalError("\(side) \(hex): C accepts, Swift rejects: \(error)") }
        guard error.description == cError else {
            fatalError("\(side) \(hex): rejected for other reasons: Swift \"\(error)\", C \"\(cError)\"")
        }
    }
}

func type(_ t: lifecycle__type) -> UInt8 { UInt8(t.rawValue) }

func string(_ s: lifecycle__str) -> [UInt8] { Array(UnsafeBufferPointer(start: s.bytes, count: Int(s.length))) }

/// Where the C decoding of a daemon message differs from Swift's, or nil.
func difference(_ s: DaemonMessage, _ c: lifecycle__message) -> String? {
    switch s {
    case .event(let e):
        guard c.type == type(LC_T_EVENT) else { return "Swift: event, C: type \(c.type)" }
        if c.id != e.sequence { return "sequence \(e.sequence), C \(c.id)" }
        if c.event != e.event.wireCode { return "event \(e.event.wireCode), C \(c.event)" }
        if c.background != (e.launchedInBackground ? 1 : 0) { return "launch mode: C \(c.background)" }
        if c.deadline != e.deadline ?? -1 { return "deadline \(String(describing: e.deadline)), C \(c.deadline)" }
        if c.budget_end != e.budgetEnd ?? -1 {
            return "budget end \(String(describing: e.budgetEnd)), C \(c.budget_end)"
        }
        if Int(c.option_count) != e.options.count { return "\(e.options.count) options, C \(c.option_count)" }
        var cursor = c.options
        for (i, kv) in e.options.enumerated() {
            var key = lifecycle__str(), value = lifecycle__str()
            lifecycle__next_option(&cursor, &key, &value)
            if string(key) != Array(kv.key.utf8) { return "option \(i) key \(kv.key), C \(string(key))" }
            if string(value) != Array(kv.value.utf8) { return "option \(i) value \(kv.value), C \(string(value))" }
        }
    case .backgroundTaskReply(let request, let task, let budgetEnd):
        guard c.type == type(LC_T_TASK_REPLY) else { return "Swift: task reply, C: type \(c.type)" }
        if c.id != request { return "request \(request), C \(c.id)" }
        if c.task != task ?? 0 { return "task \(String(describing: task)), C \(c.task)" }
        if c.budget_end != budgetEnd ?? -1 { return "budget end \(String(describing: budgetEnd)), C \(c.budget_end)" }
    case .backgroundTasksExpiring(let tasks):
        guard c.type == type(LC_T_TASKS_EXPIRING) else { return "Swift: tasks expiring, C: type \(c.type)" }
        if c.id != 0 { return "id 0, C \(c.id)" }
        if Int(c.task_count) != tasks.count { return "\(tasks.count) tasks, C \(c.task_count)" }
        var m = c
        for (i, t) in tasks.enumerated() where lifecycle__expiring_task(&m, UInt16(i)) != t {
            return "task \(i) is \(t), C \(lifecycle__expiring_task(&m, UInt16(i)))"
        }
    case .resumed:
        guard c.type == type(LC_T_RESUMED) else { return "Swift: resumed, C: type \(c.type)" }
        if c.id != 0 { return "id 0, C \(c.id)" }
    case .restoration(let data):
        guard c.type == type(LC_T_RESTORATION) else { return "Swift: restoration, C: type \(c.type)" }
        if bytes(c) != data { return "restoration data differs" }
    }
    return nil
}

/// Where the C decoding of an app message differs from Swift's, or nil.
func difference(_ s: AppMessage, _ c: lifecycle__message) -> String? {
    switch s {
    case .acknowledge(let sequence):
        guard c.type == type(LC_T_ACKNOWLEDGE) else { return "Swift: acknowledge, C: type \(c.type)" }
        if c.id != sequence { return "sequence \(sequence), C \(c.id)" }
    case .beginBackgroundTask(let request, let name):
        guard c.type == type(LC_T_BEGIN_TASK) else { return "Swift: begin task, C: type \(c.type)" }
        if c.id != request { return "request \(request), C \(c.id)" }
        if string(c.name) != Array(name.utf8) { return "name \(name), C \(string(c.name))" }
    case .endBackgroundTask(let task):
        guard c.type == type(LC_T_END_TASK) else { return "Swift: end task, C: type \(c.type)" }
        if c.id != task { return "task \(task), C \(c.id)" }
    case .resume(let last, let app, let tasks):
        guard c.type == type(LC_T_RESUME) else { return "Swift: resume, C: type \(c.type)" }
        if c.id != last { return "last acknowledged \(last), C \(c.id)" }
        if string(c.name) != Array(app.utf8) { return "app \(app), C \(string(c.name))" }
        if Int(c.task_count) != tasks.count { return "\(tasks.count) tasks, C \(c.task_count)" }
        var m = c
        for (i, t) in tasks.enumerated() where lifecycle__expiring_task(&m, UInt16(i)) != t {
            return "task \(i) is \(t), C \(lifecycle__expiring_task(&m, UInt16(i)))"
        }
    case .complete(let sequence, let result):
        guard c.type == type(LC_T_COMPLETE) else { return "Swift: complete, C: type \(c.type)" }
        if c.id != sequence { return "sequence \(sequence), C \(c.id)" }
        if c.result != result.wireCode { return "result \(result.wireCode), C \(c.result)" }
    case .saveRestoration(let data):
        guard c.type == type(LC_T_SAVE_RESTORATION) else { return "Swift: save restoration, C: type \(c.type)" }
        if bytes(c) != data { return "restoration data differs" }
    case .prewarmed:
        guard c.type == type(LC_T_PREWARMED) else { return "Swift: prewarmed, C: type \(c.type)" }
    }
    return nil
}

/// The restoration data C decoded.
func bytes(_ c: lifecycle__message) -> [UInt8] {
    guard let data = c.data else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: Int(c.data_size)))
}
