"""Every API at every version the brief lists: a full lifecycle per version, and every response the
coordinator sends must encode at the request's version and decode back identically."""
from __future__ import annotations

import pytest

from tests.coordinator.support import E, Ctx, assignment


class Recording(Ctx):
    """Remembers the version of each token so every response can be encoded at it."""

    def __init__(self, **kw):
        self.versions = {}
        super().__init__(**kw)

    def run(self, result):
        out = super().run(result)
        for token, resp in out:
            v = self.versions.get(token)
            if v is not None:
                data = resp.to_bytes(v)
                assert type(resp).from_bytes(data, v).to_bytes(v) == data
        return out


def _tracked(c, fn, version, *args, **kw):
    """Call a Ctx request helper at ``version``, remembering the version of its token."""
    orig = c.token

    def token():
        t = orig()
        c.versions[t] = version
        return t
    c.token = token
    try:
        return fn(*args, version=version, **kw)
    finally:
        c.token = orig


@pytest.mark.parametrize("jv", range(10))
def test_group_lifecycle_at_every_join_version(jv):
    sv = min(jv, 5) if jv >= 3 else min(jv, 2)
    hv = min(jv, 4)
    lv = min(jv, 5)
    c = Recording()
    members = []
    for _ in range(2):
        if jv >= 4:
            r = c.answer(_tracked(c, c.join, jv, "g"))
            assert r.error_code == E.MEMBER_ID_REQUIRED
            members.append((r.member_id, _tracked(c, c.join, jv, "g", r.member_id)))
        else:
            members.append((None, _tracked(c, c.join, jv, "g")))
    while any(c.answer(t) is None for _, t in members):
        c.advance(3000)
    rs = [c.answer(t) for _, t in members]
    ids = [r.member_id for r in rs]
    gen, leader = rs[0].generation_id, rs[0].leader
    for m in ids:
        tok = _tracked(c, c.sync, sv, "g", m, gen,
                       {x: assignment(t=[i]) for i, x in enumerate(ids)} if m == leader else None)
        assert c.answer(tok).error_code == 0
    assert c.state("g") == "Stable"
    assert _tracked(c, c.heartbeat, hv, "g", ids[0], gen) == 0
    r = _tracked(c, c.leave, lv, "g", ids[1])
    assert r.error_code == 0
    assert c.state("g") == "PreparingRebalance"


@pytest.mark.parametrize("v", range(2, 10))     # Kafka 4 removed OffsetCommit v0-1 (KIP-896); v10 is the handler's
def test_offset_commit_and_fetch_at_every_version(v):
    c = Recording()
    errs = _tracked(c, c.commit, v, "g", {("t", 0): 10 + v})
    assert errs == {("t", 0): 0}
    resp = _tracked(c, c.fetch, v, "g", {"t": [0, 1]})
    parts = (resp.groups[0].topics if v >= 8 else resp.topics)[0].partitions
    assert [(p.partition_index, p.committed_offset) for p in parts] == [(0, 10 + v), (1, -1)]
    if v >= 2:
        resp = _tracked(c, c.fetch, v, "g", None)
        topics = resp.groups[0].topics if v >= 8 else resp.topics
        assert [p.committed_offset for p in topics[0].partitions] == [10 + v]


@pytest.mark.parametrize("v", range(6))
def test_describe_and_list_groups_at_every_version(v):
    c = Recording()
    c.stable_group("g", 1)
    c.commit("s", {("t", 0): 1})
    (d, dead) = _tracked(c, c.describe, v, "g", "nope")
    assert (d.group_state, d.protocol_data, len(d.members)) == ("Stable", "range", 1)
    assert (dead.group_state, dead.error_code, dead.members) == ("Dead", 0, [])
    listed = _tracked(c, c.list_groups, v)
    assert sorted(g.group_id for g in listed.groups) == ["g", "s"]
    if v >= 4:
        assert [g.group_id for g in _tracked(c, c.list_groups, v, states=["STABLE "]).groups] == ["g"]
    if v >= 5:
        assert _tracked(c, c.list_groups, v, types=["consumer"]).groups == []
        assert len(_tracked(c, c.list_groups, v, types=["Classic"]).groups) == 2


@pytest.mark.parametrize("v", range(3))
def test_delete_groups_at_every_version(v):
    c = Recording()
    c.commit("s", {("t", 0): 1})
    assert _tracked(c, c.delete_groups, v, "s", "nope") == {"s": 0, "nope": E.GROUP_ID_NOT_FOUND}
