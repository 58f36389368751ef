"""`replay`: a path re-executed from a fresh session must do what it did when it was recorded."""

from __future__ import annotations

import pytest

from unicache.explore.replay import ReplayDivergedError, replay
from unicache.explore.scope import Scope


def test_a_path_replays_with_its_tickets_seen() -> None:
    r = replay(Scope(components=("full",)), ("insert 1,2", "backup t:1,2", "ack T1"))
    try:
        assert r.seen == {1: (0, "backup")} and r.newest_settled() == 1 and r.manual.held() == []
    finally:
        assert r.close() is None


@pytest.mark.parametrize("path, index", [
    (("! insert 1,2",), 1),                      # recorded as a refusal, succeeds now
    (("insert 1,2", "lock t:9"), 2),             # recorded as a success, fails now
])
def test_a_line_that_does_otherwise_is_a_divergence(path: tuple[str, ...], index: int) -> None:
    with pytest.raises(ReplayDivergedError) as exc:
        replay(Scope(components=("full",)), path)
    assert exc.value.index == index and exc.value.line == path[index - 1]
