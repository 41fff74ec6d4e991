@preconcurrency import Glibc
import LifecycleOS
import Testing

/// The real sd-event loop's timers: one armed at or before now runs at the
/// next turn through a defer source, not the timerfd (EventLoop.arm), and
/// behaves as a timer all the same.
@Suite struct EventLoopTests {
    let ms: Int64 = 1_000_000

    @Test func aTimerArmedAtNowFiresAtTheNextTurnAsOftenAsItIsArmed() throws {
        let loop = try EventLoop()
        var fired = 0
        var timedOut = false
        var timer: EventLoop.Source!
        timer = try loop.timer {
            fired += 1
            if fired == 1000 { loop.exit() } else { timer.arm(at: loop.now) }  // from its own handler
        }
        let guardTimer = try loop.timer {
            timedOut = true
            loop.exit()
        }
        guardTimer.arm(at: loop.now + 10_000 * ms)
        timer.arm(at: loop.now)
        try loop.run()
        #expect(!timedOut, "fired \(fired) times, then no more")
        #expect(fired == 1000)
    }

    @Test func aTimerPastItsDeadlineStillFires() throws {
        let loop = try EventLoop()
        var fired = false
        let timer = try loop.timer {
            fired = true
            loop.exit()
        }
        let guardTimer = try loop.timer { loop.exit() }
        guardTimer.arm(at: loop.now + 10_000 * ms)
        timer.arm(at: 0)  // long past, as the memory sweep's first look is armed
        try loop.run()
        #expect(fired)
    }

    @Test func aTimerMovedLaterBeforeItsTurnFiresAtItsNewDeadlineOnly() throws {
        let loop = try EventLoop()
        var firedAt: [Int64] = []
        let timer = try loop.timer { firedAt.append(loop.now) }
        let end = try loop.timer { loop.exit() }
        let target = loop.now + 30 * ms
        timer.arm(at: loop.now)
        timer.arm(at: target)
        end.arm(at: target + 100 * ms)
        try loop.run()
        #expect(firedAt.count == 1, "fired at \(firedAt.map { $0 - target }) ns from the new deadline")
        #expect(firedAt.allSatisfy { $0 >= target })
    }

    @Test func aTimerDisarmedBeforeItsTurnDoesNotFire() throws {
        let loop = try EventLoop()
        var fired = false
        let timer = try loop.timer { fired = true }
        let end = try loop.timer { loop.exit() }
        timer.arm(at: loop.now)
        timer.arm(at: nil)
        end.arm(at: loop.now + 50 * ms)
        try loop.run()
        #expect(!fired)
    }

    @Test func aTimerMovedToNowFiresAtOnceNotAtItsOldDeadline() throws {
        let loop = try EventLoop()
        var firedAt: [Int64] = []
        let start = loop.now
        let timer = try loop.timer {
            firedAt.append(loop.now)
            loop.exit()
        }
        let guardTimer = try loop.timer { loop.exit() }
        timer.arm(at: start + 5_000 * ms)
        timer.arm(at: loop.now)
        guardTimer.arm(at: start + 10_000 * ms)
        try loop.run()
        #expect(firedAt.count == 1)
        #expect(firedAt.allSatisfy { $0 < start + 5_000 * ms })
    }
}
