"""Interrupts held during a teardown (orchestrator/servers/shield.py): delivered once, after the block."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

import pytest

from orchestrator.servers.shield import SHIELDED, interrupts_held


@pytest.fixture(autouse=True)
def python_ctrl_c() -> Iterator[None]:
    """SIGINT as Python sets it up in a terminal (``KeyboardInterrupt``), whatever the test process
    inherited: a shell starting it in the background (``make test &``) makes it ignore SIGINT, which the
    shield then rightly keeps ignoring."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_inside_the_block_is_raised_after_it_once_and_said_once() -> None:
    said: list[str] = []
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), interrupts_held(said.append, "stopping x (pid 7)"):
        os.kill(os.getpid(), signal.SIGINT)  # Python runs the handler before the next line
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C: adds nothing
        done.append("the teardown ended")
    assert done == ["the teardown ended"]
    assert said == ["SIGINT: stopping x (pid 7) first; the interrupt follows once it is done"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("first", [signal.SIGTERM, signal.SIGUSR1])
def test_the_first_signal_reaches_the_handler_that_was_in_place_after_the_block(first: int) -> None:
    got: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    before = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGUSR1)}
    try:
        with interrupts_held(lambda m: None, "stopping x"):
            os.kill(os.getpid(), first)
            os.kill(os.getpid(), signal.SIGTERM if first == signal.SIGUSR1 else signal.SIGUSR1)
            assert got == []  # held while the block runs
        assert got == [first]
        assert all(signal.getsignal(sig) is handler for sig in before)
    finally:
        for sig, old in before.items():
            signal.signal(sig, old)


def test_nothing_arrives_nothing_is_delivered_and_the_handlers_are_put_back() -> None:
    before = {sig: signal.getsignal(sig) for sig in SHIELDED}
    with interrupts_held(lambda m: None, "stopping x"):
        assert all(signal.getsignal(sig) is not before[sig] for sig in SHIELDED)
    assert {sig: signal.getsignal(sig) for sig in SHIELDED} == before


def test_outside_the_main_thread_nothing_is_swapped() -> None:
    seen: list[object] = []

    def teardown() -> None:
        with interrupts_held(lambda m: None, "stopping x"):
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=teardown)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]
