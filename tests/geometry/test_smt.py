"""SMT queries and the proof checker (z3 and cvc5); the solver-heavy replays are slow tests."""

import pytest

from jaxcore.geometry import book_one, check_proof, entails, have
from jaxcore.geometry.language import Statement

PTS3 = {"a": "point", "b": "point", "c": "point"}


@pytest.mark.parametrize("solver", ["z3", "cvc5"])
@pytest.mark.parametrize("mode", ["quantified", "ground"])
def test_betweenness_symmetry_proved(solver, mode):
    r = entails(PTS3, ["between(a, b, c)"], ["between(c, b, a)", "a != c"], solvers=(solver,), time_limit_s=5.0,
                mode=mode)
    assert r.verdict == "proved" and r.solver == solver and r.answers[solver] == "unsat"


def test_not_entailed_in_ground_mode():
    # a point on both circles of I.1 need not lie on the line ab: a model exists (sat), both solvers agree
    sorts = {**PTS3, "C": "circle", "D": "circle", "L": "line"}
    ctx = ["a != b", "centre(a, C)", "on(b, C)", "centre(b, D)", "on(a, D)", "on(c, C)", "on(c, D)", "on(a, L)",
           "on(b, L)"]
    r = entails(sorts, ctx, ["on(c, L)"], mode="ground", time_limit_s=5.0, all_solvers=True)
    assert r.verdict == "not entailed" and r.answers == {"z3": "sat", "cvc5": "sat"}
    r = entails(sorts, ctx, ["seg(a, c) = seg(b, c)"], mode="ground", time_limit_s=5.0, all_solvers=True)
    assert r.verdict == "proved" and r.answers == {"z3": "unsat", "cvc5": "unsat"}


def test_entails_errors():
    with pytest.raises(ValueError, match="^solvers: expected one of"):
        entails(PTS3, [], ["a = a"], solvers=("yices",))
    with pytest.raises(ValueError, match="^mode: expected one of"):
        entails(PTS3, [], ["a = a"], mode="lazy")
    with pytest.raises(ValueError, match="^time_limit_s: expected"):
        entails(PTS3, [], ["a = a"], time_limit_s=0.0)
    with pytest.raises(ValueError, match="^sorts: expected a sort for every object"):
        entails(PTS3, [], ["on(a, L)"])


def test_proposition_one_checks():
    props = book_one()
    r = check_proof(props["I.1"], props, solvers=("cvc5", "z3"), time_limit_s=5.0)
    assert r.complete and r.num_checked == r.num_queries == 6
    assert r.steps[2].claims == ("intersects(C, D)",) and r.steps[2].verdict == "proved"


def test_wrong_step_is_not_proved_and_refuted_by_the_sampler(key):
    props = book_one()
    st = props["I.1"]
    wrong = Statement(st.name, st.recipe, st.hypotheses, st.conclusion, st.exists,
                      st.proof + (have("seg(a, c) = seg(a, b) + seg(b, c)"),))
    r = check_proof(wrong, props, solvers=("z3",), time_limit_s=2.0, screen_samples=256, key=key)
    assert r.steps[-2].verdict == "refuted" and r.steps[-2].solver == "sampler"
    assert not r.complete and r.num_checked == r.num_queries - 1


def test_check_proof_errors():
    props = book_one()
    with pytest.raises(ValueError, match="^key: expected"):
        check_proof(props["I.1"], props, screen_samples=8)
    with pytest.raises(ValueError, match="^library: expected the proposition 'I.1'"):
        check_proof(props["I.2"], {}, solvers=("z3",), time_limit_s=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", [f"I.{i}" for i in range(1, 16)])
def test_book_one_proofs(name):
    # cvc5 first: it proved 156 of 158 queries in the reproduction (median 0.16 s) against z3's 146; I.7's goal and
    # one step of I.14 stay unchecked for both. I.7 ships without proof steps (Euclid's argument by contradiction
    # through I.5's base angles is not written here), and z3 sometimes finds a model of the encoded axioms in which
    # c != d inside the limit (CI, 4.4 s): 'not entailed' is then the right answer for that goal, never for a step
    props = book_one()
    r = check_proof(props[name], props, solvers=("cvc5", "z3"), time_limit_s=5.0)
    unknown = {"I.7": 1, "I.14": 1}.get(name, 0)
    assert r.num_queries - r.num_checked <= unknown
    allowed = {"proved", "trivial", "unknown"}
    for s in r.steps:
        ok = allowed | ({"not entailed"} if (name, s.step) == ("I.7", "goal") else set())
        assert s.verdict in ok, (s.step, s.verdict, s.answers)
