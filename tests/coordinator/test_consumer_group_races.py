"""Random interleavings of ConsumerGroupHeartbeats (hypothesis): members join, heartbeat with what
they own (revoking only when they get to it), lose responses (then resend a full request, as
Kafka's clients do), leave or fall silent, and topics grow. After every step: no partition owned by two members, live state == replayed state (the
harness); at the end, once everyone heartbeats faithfully, every partition is owned exactly once."""
from hypothesis import given, settings, strategies as st

from .support import CgCtx

MEMBERS = ["m0", "m1", "m2", "m3"]
step = st.one_of(
    st.tuples(st.just("hb"), st.sampled_from(MEMBERS), st.booleans()),     # (kind, member, lose the answer)
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS), st.just(False)),
    st.tuples(st.just("tick"), st.sampled_from([1000, 20000]), st.just(False)),
    st.tuples(st.just("grow"), st.just(""), st.just(False)),
)


class Client:
    """What a well-behaved client knows: its epoch and the partitions it owns (by topic name)."""

    def __init__(self):
        self.epoch = None
        self.owned = {}
        self.full = False       # the last answer was lost: resend everything (Kafka's clients do)


def heartbeat(c, clients, mid, lose=False):
    cl = clients[mid]
    if cl.epoch is None:
        r = c.hb("g", mid, 0, topics=["a", "b"])
    else:
        r = c.hb("g", mid, cl.epoch, owned=cl.owned, topics=["a", "b"] if cl.full else None, full=cl.full)
    if r.error_code:        # fenced or unknown: abandon everything and rejoin next time
        cl.epoch, cl.owned, cl.full = None, {}, False
        return
    if lose:                # the answer never arrives: the client keeps its old view
        cl.full = True
        return
    cl.full = False
    cl.epoch = r.member_epoch
    if r.assignment is not None:
        cl.owned = c.names(r)


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=40))
def test_random_interleavings_never_double_assign(steps):
    c = CgCtx({"a": 5, "b": 3})
    clients = {m: Client() for m in MEMBERS}
    for kind, arg, lose in steps:
        if kind == "hb":
            heartbeat(c, clients, arg, lose)
        elif kind == "leave" and clients[arg].epoch is not None:
            c.hb("g", arg, -1)
            clients[arg] = Client()
        elif kind == "tick":
            c.advance(arg)
        elif kind == "grow":
            c.add_topic("a", c.topics["a"].num_partitions + 1)
            c.topics_changed()
        if c.cg("g") is not None:
            c.owned_check("g")
    # everyone heartbeats faithfully until the group settles
    for _ in range(12):
        for m in MEMBERS:
            heartbeat(c, clients, m)
    g = c.cg("g")
    assert g.state.value == "Stable"
    owned = [(t, p) for cl in clients.values() for t, ps in cl.owned.items() for p in ps]
    assert len(owned) == len(set(owned))
    assert set(owned) == {(t, p) for t, meta in c.topics.items() for p in range(meta.num_partitions)}
