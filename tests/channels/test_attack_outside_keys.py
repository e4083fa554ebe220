"""The attack pass on one sender's keys (issue 24, Deliver 10), pure: whatever a webhook
sender spells (case, '@', blanks, 'ß', the Kelvin sign, fullwidth '@', '/', ':', '%'),
admission, the rate budget and the session namespace decide on one and the same key, so no
spelling is admitted as one sender and budgeted or stored as another."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.bus import Origin, normalize_sender, session_key
from zeroclaw.config import ExternalPeerRule, normalize_peer_name

SPELLINGS = ("ci-bot", "CI-BOT", "@ci-bot", " @Ci-Bot ", "straße", "STRASSE", "\u212aey", "Key")
TRICKY = st.one_of(
    st.sampled_from(SPELLINGS),
    st.text(alphabet=st.sampled_from("aAßsSK\u212a@\uff20/:%~ .\u200b\u0130i"), max_size=12),
    st.text(max_size=12),
)


@settings(max_examples=400, deadline=None)
@given(TRICKY, TRICKY)
def test_admission_rate_and_sessions_agree_on_who_a_sender_is(a: str, b: str) -> None:
    origin_a, origin_b = Origin.from_sender("webhook.ops", a), Origin.from_sender("webhook.ops", b)
    same_rate = normalize_sender(a) == normalize_sender(b)  # Gate.rate's key
    same_admission = normalize_peer_name(a) == normalize_peer_name(b)
    ns_a = session_key(origin_a, "x").rpartition("/")[0]
    ns_b = session_key(origin_b, "x").rpartition("/")[0]
    assert same_rate == same_admission == (ns_a == ns_b) == (origin_a == origin_b)
    # A rule naming one spelling admits (or ignores) every spelling of the same key only.
    rule = ExternalPeerRule(False, frozenset({normalize_peer_name(a)}), frozenset())
    if normalize_peer_name(a):
        assert rule.accepts(b) == same_admission
    ignoring = ExternalPeerRule(True, frozenset(), frozenset({normalize_peer_name(a)}))
    if same_admission:
        assert not ignoring.accepts(b)


def test_the_known_foldings_are_one_sender_and_fullwidth_at_is_another() -> None:
    def key(name: str) -> str:
        return session_key(Origin.from_sender("webhook.ops", name), None)

    assert len({key(s) for s in SPELLINGS[:4]}) == 1
    assert key("straße") == key("STRASSE") and key("\u212aey") == key("Key")
    assert key("\uff20ci-bot") != key("ci-bot")  # not stripped: a name of its own everywhere
    assert not ExternalPeerRule(False, frozenset({"ci-bot"}), frozenset()).accepts("\uff20ci-bot")
