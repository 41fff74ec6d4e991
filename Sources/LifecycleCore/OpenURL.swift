// Opening a URL (Wakeups.swift has the overview): the app listing the
// scheme comes to the front and gets openURL, or is launched with it.

extension Supervisor {
    /// The app that opens `url`: the first, by name, listing its scheme.
    func route(_ url: String) -> Result<AppID, Refusal> {
        guard let colon = url.firstIndex(of: ":"), colon != url.startIndex else { return .failure(.badURL(url)) }
        let scheme = url[..<colon].lowercased()
        let valid =
            scheme.first!.isASCII && scheme.first!.isLetter
            && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
        guard valid else { return .failure(.badURL(url)) }
        guard let id = appIDs.first(where: { apps[$0]!.policy.urlSchemes.contains(scheme) }) else {
            return .failure(.unknownScheme(scheme))
        }
        return .success(id)
    }

    mutating func openURL(_ url: String) {
        let id: AppID
        switch route(url) {
        case .failure(let refusal): return refuse(refusal)
        case .success(let found): id = found
        }
        let app = apps[id]!
        if displays[displayOf(id)]!.isLocked { return refuse(.screenLocked) }
        if app.startable {
            forgetEnds(id)
            recordUse(id)
            userLaunched(id)
            note(id, .urlOpened(url, launched: true))
            return start(id, .foreground, reason: .url, setUp: { $0.launchURL = url })
        }
        if app.ending { return refuse(.stopping(id)) }
        note(id, .urlOpened(url, launched: false))
        update(id) { $0.wakes.url = url }
        recordUse(id)
        takeForegroundSlot(id)
        advance(id)
    }
}
