import Testing

@testable import LifecycleDaemon

/// The control socket's admission on a hand-fed clock: no socket, no
/// sleep; each rule in microseconds.
@Suite struct AdmissionTests {
    let second: Int64 = 1_000_000_000

    @Test func aUserHasAtMostItsShareOfConnectionsAndRootIsNeverBounded() {
        var a = Admission(descriptorLimit: 1024)
        #expect(a.othersLimit == 128)
        for _ in 0..<Admission.connectionsPerUID {
            let r = a.connect(uid: 1000, now: 0)
            #expect(r == .admitted)
        }
        guard case .refused(let refusal, let message) = a.connect(uid: 1000, now: 0) else {
            Issue.record("the 33rd connection of one user was admitted")
            return
        }
        #expect(refusal == "too-many-connections" && message.contains("uid 1000") && message.contains("32"))
        for _ in 0..<1000 {
            let r = a.connect(uid: 0, now: 0)
            #expect(r == .admitted)
        }
        a.disconnected(uid: 1000)
        let r20 = a.connect(uid: 1000, now: 0)
        #expect(r20 == .admitted, "a connection closed frees its place")
        #expect(a.perUID[0] == 1000 && a.perUID[1000] == 32)
    }

    @Test func otherUsersTogetherHaveAnEighthOfTheDescriptors() {
        var a = Admission(descriptorLimit: 1024)
        for uid in UInt32(1)...4 {
            for _ in 0..<32 {
                let r = a.connect(uid: uid, now: 0)
                #expect(r == .admitted)
            }
        }
        guard case .refused(_, let message) = a.connect(uid: 5, now: 0) else {
            Issue.record("a connection past the others' limit was admitted")
            return
        }
        #expect(message.contains("at most 128 from users other than root"))
        let r35 = a.connect(uid: 0, now: 0)
        #expect(r35 == .admitted)
        // At least one user's worth, however few descriptors; at most 1,024.
        #expect(Admission(descriptorLimit: 64).othersLimit == 32)
        #expect(Admission(descriptorLimit: 1 << 20).othersLimit == 1024)
    }

    @Test func requestsComeInBurstsOfTwiceTheRateThenAtTheRate() {
        var a = Admission(descriptorLimit: 1024)
        let burst = Int(2 * Admission.requestsPerSecond)
        for i in 0..<burst {
            let r = a.request(uid: 7, now: 0)
            #expect(r, "request \(i) of the burst")
        }
        let r46 = a.request(uid: 7, now: 0)
        #expect(!r46, "the burst is spent")
        let r48 = a.request(uid: 8, now: 0)
        #expect(r48, "another user has its own allowance")
        let oneToken = second / Int64(Admission.requestsPerSecond)
        let r51 = a.request(uid: 7, now: oneToken - 1)
        #expect(!r51)
        let r53 = a.request(uid: 7, now: 2 * oneToken)
        #expect(r53, "a token comes back every 1/32 s")
        let r55 = a.request(uid: 7, now: 2 * oneToken)
        #expect(r55, "two have come back by then: a refused request costs nothing")
        let r57 = a.request(uid: 7, now: 2 * oneToken)
        #expect(!r57)
        for _ in 0..<10_000 {
            let r = a.request(uid: 0, now: 0)
            #expect(r)
        }  // root
        // A clock that seems to go back (a value given out of order) costs nothing.
        let r59 = a.request(uid: 7, now: 0)
        #expect(!r59)
    }

    @Test func aUserStruckOutIsTurnedAwayForASecond() {
        var a = Admission(descriptorLimit: 1024)
        a.struckOut(uid: 1000, now: 5 * second)
        let r66 = a.connect(uid: 1000, now: 5 * second)
        #expect(r66 == .turnedAway)
        let r68 = a.connect(uid: 1000, now: 6 * second - 1)
        #expect(r68 == .turnedAway)
        let r70 = a.connect(uid: 1001, now: 5 * second)
        #expect(r70 == .admitted, "only that user")
        let r72 = a.connect(uid: 1000, now: 6 * second)
        #expect(r72 == .admitted)
        a.struckOut(uid: 0, now: 0)
        let r75 = a.connect(uid: 0, now: 0)
        #expect(r75 == .admitted, "root is never turned away")
    }

    @Test func manyUsersAreForgottenNotHeldForever() {
        var a = Admission(descriptorLimit: 1024)
        for uid in UInt32(1)...UInt32(Admission.remembered + 1) {
            _ = a.request(uid: uid, now: 0)
            a.struckOut(uid: uid, now: 0)
        }
        _ = a.request(uid: 99_999, now: 0)
        a.struckOut(uid: 99_999, now: 0)
        // The tables were reset: the first users start afresh.
        let r88 = a.connect(uid: 1, now: 0)
        #expect(r88 == .admitted)
        let r90 = a.connect(uid: 99_999, now: 0)
        #expect(r90 == .turnedAway)
    }
}
