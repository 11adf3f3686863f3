"""BrokerClock (kgroup/clock.py): wall time plus an offset time travel moves forward, pinned while
a jump runs the timers due on its way."""
import pytest

from kgroup.clock import BrokerClock, now_ms


def test_wall_time_plus_an_offset_that_only_moves_forward():
    c = BrokerClock()
    assert abs(c.now_ms() - now_ms()) <= 5
    target = c.advance(60_000)
    assert target - 5 <= c.now_ms() <= target + 5 and c.offset_ms >= 59_990
    assert c.now_ms() - now_ms() >= 59_990
    with pytest.raises(ValueError):
        c.advance(-1)
    c.set_to(c.now_ms() - 10_000)           # never backwards
    assert c.offset_ms >= 59_990


def test_pinned_while_a_jump_runs_its_deadlines():
    c = BrokerClock()
    t = c.now_ms() + 5_000
    c.pin(t)
    assert c.now_ms() == t == c.now_ms()     # held, not running
    c.pin(t - 100_000)                       # a pin never takes it back
    assert c.now_ms() >= t
    c.set_to(t + 1_000)                      # the jump's end: runs on from there
    assert t + 1_000 <= c.now_ms() <= t + 1_010


def test_each_broker_has_its_own():
    a, b = BrokerClock(), BrokerClock()
    a.advance(3_600_000)
    assert b.offset_ms == 0 and a.now_ms() - b.now_ms() >= 3_599_990
