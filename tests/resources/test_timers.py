"""tether.resources.timers: one pending wakeup per kind of base timer."""

from __future__ import annotations

from tether.resources.timers import Armed, ChannelFlush, Idle, Sweep


def test_each_kind_is_armed_once_until_it_fired() -> None:
    armed = Armed()
    assert armed.arm(Sweep()) and not armed.arm(Sweep())
    assert armed.arm(Idle()) and armed.arm(ChannelFlush())  # kinds are apart
    armed.fired(Sweep())
    assert armed.arm(Sweep()) and not armed.arm(Idle())
