"""The diagram sampler: E's constructions realised numerically in the Euclidean plane for many random
configurations at once (``jax.jit`` + ``vmap``; the configuration axis shards over devices), and every literal
evaluated with tolerances.

The Euclidean plane is a model of E, so a literal that is false (beyond the tolerance) in a sampled diagram in
which every context literal holds is not entailed by the context: a sound refutation up to floating point, found
in milliseconds where an SMT solver may answer "unknown". A literal true in every sample is evidence only. A
sample in which all hypotheses hold shows them satisfiable.

Objects are stored per sort: points ``[N, P, 2]``, lines ``[N, L, 3]`` as a unit normal and offset
(``n . x + c = 0``), circles ``[N, C, 3]`` as centre and radius. Free points are uniform in ``[-1, 1]^2``. Each
literal evaluates to "true" (within ``tol`` for an equality, beyond ``10 tol`` for a strict relation), "false"
(beyond ``10 tol`` the other way) or neither (too close to call, or the sample is degenerate).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxcore._util.checks import check_int, check_scalar, expected
from jaxcore._util.keys import check_key

from .language import RULES, Apply, Atom, Construct, Literal, Metric, Statement, Suppose, parse_literal


class Diagrams(eqx.Module):
    """``N`` sampled diagrams of one construction program.

    Attributes:
        points: ``[N, P, 2]`` coordinates.
        lines: ``[N, L, 3]`` unit normal ``(nx, ny)`` and offset ``c`` of ``nx x + ny y + c = 0``.
        circles: ``[N, C, 3]`` centre ``(x, y)`` and radius.
        valid: ``[N]`` bool, False where a construction failed (non-meeting circles, a zero-length line).
        names: static ``((name, sort, slot), ...)``.
    """

    points: Float[Array, "N P 2"]
    lines: Float[Array, "N L 3"]
    circles: Float[Array, "N C 3"]
    valid: Bool[Array, " N"]
    names: tuple = eqx.field(static=True)

    def index(self) -> dict[str, tuple[str, int]]:
        """Object name -> (sort, slot)."""
        return {n: (s, i) for n, s, i in self.names}


class Program(eqx.Module):
    """A construction program as arrays, for the sampler's interpreter (:func:`compile_program`).

    Attributes:
        rules: ``[S]`` int32 rule codes (padded with 0, no operation).
        ins: ``[S, 6]`` int32 input slots (per sort).
        outs: ``[S, 3]`` int32 output slots (per sort).
        names: static ``((name, sort, slot), ...)``.
        sizes: static ``(points, lines, circles)`` slots (padded).
    """

    rules: Int[Array, " S"]
    ins: Int[Array, "S 6"]
    outs: Int[Array, "S 3"]
    names: tuple = eqx.field(static=True)
    sizes: tuple = eqx.field(static=True)


class LiteralCode(eqx.Module):
    """Literals as arrays, for the evaluator (:func:`encode_literals`).

    Attributes:
        kind: ``[K]`` int32 atom kind (or the metric code).
        args: ``[K, 3]`` int32 object slots.
        positive: ``[K]`` bool, False for a negated literal.
        op: ``[K]`` int32 metric relation (0 ``=``, 1 ``<``, 2 ``<=``).
        terms: ``[K, T, 5]`` int32 magnitude terms: kind, three point slots, sign.
        num_literals: static K before padding.
    """

    kind: Int[Array, " K"]
    args: Int[Array, "K 3"]
    positive: Bool[Array, " K"]
    op: Int[Array, " K"]
    terms: Int[Array, "K T 5"]
    num_literals: int = eqx.field(static=True)


class LiteralValues(NamedTuple):
    """Truth of K literals in N diagrams: ``true`` and ``false`` ``[N, K]`` bool (neither: too close to call)."""

    true: Bool[Array, "N K"]
    false: Bool[Array, "N K"]


class RefuteResult(NamedTuple):
    """A sampler check of claims under a context.

    Attributes:
        refuted: ``[K]`` bool: claim k is false in some sample where every context literal is true.
        supported: ``[K]`` bool: claim k is true in every such sample (evidence only).
        num_counterexamples: ``[K]`` int: samples refuting claim k.
        num_valid: samples in which every context literal holds.
        num_samples: samples drawn.
    """

    refuted: np.ndarray
    supported: np.ndarray
    num_counterexamples: np.ndarray
    num_valid: int
    num_samples: int


# ----------------------------------------------------------------------------- construction program


def _flatten(steps, library, prefix, mapping, out):
    """Construct steps with names renamed; Apply expanded into the cited proof's constructions."""
    for i, st in enumerate(steps):
        if isinstance(st, Construct):
            out.append(Construct(st.rule, tuple(mapping.get(x, x) for x in st.inputs),
                                 tuple(mapping.setdefault(x, prefix + x) for x in st.outputs)))
        elif isinstance(st, Apply):
            if library is None or st.name not in library:
                raise ValueError(expected("library", f"the proposition {st.name!r} cited by a proof", None))
            lemma = library[st.name]
            sub = {k: mapping.setdefault(v, prefix + v) for k, v in st.mapping}
            inner = f"{prefix}{st.name}@{i}:"
            _flatten(lemma.proof, library, inner, sub, out)
        elif isinstance(st, Suppose):
            continue  # objects built under a false supposition have no realisation
    return out


def program_of(statement: Statement, library: dict | None = None, *, with_proof: bool = True) -> tuple[Construct, ...]:
    """The construction program of a statement: its recipe and (``with_proof``) its proof's constructions, with
    cited propositions expanded (their internal objects renamed ``"I.1@<step>:x"``).

    Raises:
        ValueError: a proof cites a proposition missing from ``library``.
    """
    steps = list(statement.recipe)
    if with_proof:
        _flatten(statement.proof, library, "", {}, steps)
    return tuple(steps)


def _layout(program: Sequence[Construct]):
    names: list[tuple[str, str, int]] = []
    count = {"point": 0, "line": 0, "circle": 0}
    idx: dict[str, tuple[str, int]] = {}
    compiled = []
    for c in program:
        rule = RULES.get(c.rule)
        if rule is None:
            raise ValueError(expected("program", "constructions with rules of RULES", c.rule))
        ins = []
        for n, s in zip(c.inputs, rule.inputs):
            if n not in idx or idx[n][0] != s:
                raise ValueError(expected("program", f"input {n!r} of {c} built before as a {s}", idx.get(n)))
            ins.append(idx[n][1])
        outs = []
        for n, s in zip(c.outputs, rule.outputs):
            if n in idx:
                raise ValueError(expected("program", f"a new name for each output of {c}", n))
            idx[n] = (s, count[s])
            names.append((n, s, count[s]))
            outs.append(count[s])
            count[s] += 1
        compiled.append((c.rule, tuple(ins), tuple(outs)))
    return tuple(compiled), tuple(names), count


def _perp(v):
    return jnp.stack([-v[..., 1], v[..., 0]], -1)


def _cross(u, v):
    return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]


def _rot(v, t):
    c, s = jnp.cos(t), jnp.sin(t)
    return jnp.stack([c * v[0] - s * v[1], s * v[0] + c * v[1]])


#: the rules the interpreter realises, in the order of their branch index (0: padding, does nothing)
_CODES: tuple[str, ...] = ("noop", "point", "point_on_line", "point_off_line", "point_between", "extend",
                           "point_same_side", "point_opposite_side", "line", "circle", "meet_ll", "meet_cc",
                           "meet_cc_one", "meet_lc", "meet_lc_beyond", "meet_cc_opp", "congruent", "at_distance",
                           "rotate_about", "reflect", "apex", "mirror_angle")


def _circles_meet(c1, c2):
    d = c2[:2] - c1[:2]
    dist = jnp.linalg.norm(d)
    along = (dist ** 2 + c1[2] ** 2 - c2[2] ** 2) / (2 * dist)
    h2 = c1[2] ** 2 - along ** 2
    e = d / dist
    m = c1[:2] + along * e
    h = jnp.sqrt(jnp.maximum(h2, 0)) * _perp(e)
    return m + h, m - h, h2 > 0


def _line_circle(base, e, cc):
    w = base - cc[:2]
    pw = e @ w
    disc = pw ** 2 - (w @ w - cc[2] ** 2)
    sq = jnp.sqrt(jnp.maximum(disc, 0))
    return base + (-pw + sq) * e, base + (-pw - sq) * e, disc > 0


def _branches():
    """One function per rule: (P, L, C, ok, ins, outs, u) -> (P, L, C, ok) for one diagram."""

    def setp(P, i, v):
        return P.at[i].set(v.astype(P.dtype))

    def b_noop(P, L, C, ok, ins, outs, u):
        return P, L, C, ok

    def b_point(P, L, C, ok, ins, outs, u):
        return setp(P, outs[0], u[:2] * 2 - 1), L, C, ok

    def b_on_line(P, L, C, ok, ins, outs, u):
        n, c = L[ins[0], :2], L[ins[0], 2]
        return setp(P, outs[0], -c * n + (u[0] * 2 - 1) * 1.5 * _perp(n)), L, C, ok

    def b_between(P, L, C, ok, ins, outs, u):
        a, b = P[ins[0]], P[ins[1]]
        return setp(P, outs[0], a + (0.2 + 0.6 * u[0]) * (b - a)), L, C, ok

    def b_extend(P, L, C, ok, ins, outs, u):
        a, b = P[ins[0]], P[ins[1]]
        return setp(P, outs[0], b + (0.2 + 0.8 * u[0]) * (b - a)), L, C, ok

    def side(same):
        def f(P, L, C, ok, ins, outs, u):
            b, ln = P[ins[0]], L[ins[1]]
            p = u[:2] * 2 - 1
            sb, sp = ln[:2] @ b + ln[2], ln[:2] @ p + ln[2]
            want = sb if same else -sb
            flip = jnp.sign(sp) != jnp.sign(want)
            return setp(P, outs[0], jnp.where(flip, p - 2 * sp * ln[:2], p)), L, C, ok
        return f

    def b_line(P, L, C, ok, ins, outs, u):
        a, b = P[ins[0]], P[ins[1]]
        d = b - a
        nd = jnp.linalg.norm(d)
        n = _perp(d) / nd
        return P, L.at[outs[0]].set(jnp.concatenate([n, -(n @ a)[None]])), C, ok & (nd > 1e-6)

    def b_circle(P, L, C, ok, ins, outs, u):
        a, b = P[ins[0]], P[ins[1]]
        r = jnp.linalg.norm(b - a)
        return P, L, C.at[outs[0]].set(jnp.concatenate([a, r[None]])), ok & (r > 1e-6)

    def b_meet_ll(P, L, C, ok, ins, outs, u):
        l1, l2 = L[ins[0]], L[ins[1]]
        det = _cross(l1[:2], l2[:2])
        x = (l1[1] * l2[2] - l2[1] * l1[2]) / det
        y = (l2[0] * l1[2] - l1[0] * l2[2]) / det
        return setp(P, outs[0], jnp.stack([x, y])), L, C, ok & (jnp.abs(det) > 1e-6)

    def b_meet_cc(P, L, C, ok, ins, outs, u):
        p, q, good = _circles_meet(C[ins[0]], C[ins[1]])
        return setp(setp(P, outs[0], p), outs[1], q), L, C, ok & good

    def b_meet_cc_one(P, L, C, ok, ins, outs, u):
        p, _, good = _circles_meet(C[ins[0]], C[ins[1]])
        return setp(P, outs[0], p), L, C, ok & good

    def b_meet_lc(P, L, C, ok, ins, outs, u):
        ln = L[ins[0]]
        p, q, good = _line_circle(-ln[2] * ln[:2], _perp(ln[:2]), C[ins[1]])
        return setp(setp(P, outs[0], p), outs[1], q), L, C, ok & good

    def b_meet_lc_beyond(P, L, C, ok, ins, outs, u):
        b, c = P[ins[2]], P[ins[3]]
        p, _, good = _line_circle(b, (b - c) / jnp.linalg.norm(b - c), C[ins[1]])
        return setp(P, outs[0], p), L, C, ok & good

    def b_meet_cc_opp(P, L, C, ok, ins, outs, u):
        p, q, good = _circles_meet(C[ins[0]], C[ins[1]])
        bb, ln = P[ins[4]], L[ins[5]]
        same = jnp.sign(ln[:2] @ p + ln[2]) == jnp.sign(ln[:2] @ bb + ln[2])
        return setp(P, outs[0], jnp.where(same, q, p)), L, C, ok & good

    def b_congruent(P, L, C, ok, ins, outs, u):
        t, refl = u[0] * 2 * jnp.pi, u[1] < 0.5
        shift = u[2:] * 2 - 1
        for k in range(3):
            v = P[ins[k]]
            v = jnp.where(refl, v * jnp.array([1.0, -1.0], P.dtype), v)
            P = setp(P, outs[k], _rot(v, t) + shift)
        return P, L, C, ok

    def b_at_distance(P, L, C, ok, ins, outs, u):
        a, b, c = P[ins[0]], P[ins[1]], P[ins[2]]
        t = u[0] * 2 * jnp.pi
        return setp(P, outs[0], a + jnp.linalg.norm(c - b) * jnp.stack([jnp.cos(t), jnp.sin(t)])), L, C, ok

    def b_rotate(P, L, C, ok, ins, outs, u):
        a, b = P[ins[0]], P[ins[1]]
        return setp(P, outs[0], a + _rot(b - a, (0.1 + 0.8 * u[0]) * 2 * jnp.pi)), L, C, ok

    def b_reflect(P, L, C, ok, ins, outs, u):
        p, a, b = P[ins[0]], P[ins[1]], P[ins[2]]
        n = _perp(b - a) / jnp.linalg.norm(b - a)
        return setp(P, outs[0], p - 2 * (n @ (p - a)) * n), L, C, ok

    def b_apex(P, L, C, ok, ins, outs, u):
        a, b = P[ins[0]], P[ins[1]]
        sign = jnp.where(u[1] < 0.5, 1.0, -1.0)
        return setp(P, outs[0], (a + b) / 2 + (0.2 + 1.5 * u[0]) * sign * _perp(b - a)), L, C, ok

    def b_mirror(P, L, C, ok, ins, outs, u):
        a, b, c, d = P[ins[0]], P[ins[1]], P[ins[2]], P[ins[3]]
        phi = _angle(b, a, c)
        sign = jnp.where(u[0] < 0.5, 1.0, -1.0)
        return setp(P, outs[0], a + _rot(d - a, sign * phi)), L, C, ok

    table = {"noop": b_noop, "point": b_point, "point_on_line": b_on_line, "point_off_line": b_point,
             "point_between": b_between, "extend": b_extend, "point_same_side": side(True),
             "point_opposite_side": side(False), "line": b_line, "circle": b_circle, "meet_ll": b_meet_ll,
             "meet_cc": b_meet_cc, "meet_cc_one": b_meet_cc_one, "meet_lc": b_meet_lc,
             "meet_lc_beyond": b_meet_lc_beyond, "meet_cc_opp": b_meet_cc_opp, "congruent": b_congruent,
             "at_distance": b_at_distance, "rotate_about": b_rotate, "reflect": b_reflect, "apex": b_apex,
             "mirror_angle": b_mirror}
    return [table[c] for c in _CODES]


_BRANCHES = _branches()


def _one(key, rules, ins, outs, num_points, num_lines, num_circles, dtype):
    P = jnp.zeros((num_points, 2), dtype)
    L = jnp.zeros((num_lines, 3), dtype).at[:, 0].set(1)
    C = jnp.zeros((num_circles, 3), dtype).at[:, 2].set(1)

    def body(carry, x):
        P, L, C, ok = carry
        rule, i, o, step = x
        u = jax.random.uniform(jax.random.fold_in(key, step), (4,), dtype)
        P, L, C, ok = jax.lax.switch(rule, _BRANCHES, P, L, C, ok, i, o, u)
        return (P, L, C, ok), None

    steps = jnp.arange(rules.shape[0])
    (P, L, C, ok), _ = jax.lax.scan(body, (P, L, C, jnp.bool_(True)), (rules, ins, outs, steps))
    finite = jnp.isfinite(P).all() & jnp.isfinite(L).all() & jnp.isfinite(C).all()
    return P, L, C, ok & finite


@functools.partial(jax.jit, static_argnames=("num_points", "num_lines", "num_circles", "dtype"))
def _sample_program(keys, rules, ins, outs, num_points, num_lines, num_circles, dtype):
    one = functools.partial(_one, num_points=num_points, num_lines=num_lines, num_circles=num_circles, dtype=dtype)
    return jax.vmap(one, in_axes=(0, None, None, None))(keys, rules, ins, outs)


def _bucket(n, step):
    return max(step, -(-n // step) * step)


def compile_program(program: Sequence[Construct] | Statement, library: dict | None = None) -> Program:
    """A construction program (or a statement's recipe and proof) as arrays for :func:`sample_diagrams`.

    Compiling once lets a caller sample under its own ``jit`` (nothing host-side remains). Slot counts are padded
    (points to a multiple of 32, lines and circles of 16, steps of 32), so programs of similar size share one
    compiled interpreter.

    Args:
        program: constructions, or a statement (recipe and proof, citations expanded from ``library``).
        library: cited propositions by name.

    Returns:
        :class:`Program`.

    Raises:
        ValueError: a construction whose inputs are not built before it, or a repeated output name.

    Examples:
        >>> from jaxcore.geometry import book_one, compile_program
        >>> props = book_one()
        >>> p = compile_program(props["I.1"], props)
        >>> p.rules.shape, p.sizes
        ((32,), (32, 16, 16))
    """
    if isinstance(program, Statement):
        program = program_of(program, library)
    compiled, names, count = _layout(tuple(program))
    num_steps = _bucket(len(compiled), 32)
    rules = np.zeros(num_steps, np.int32)
    ins = np.zeros((num_steps, 6), np.int32)
    outs = np.zeros((num_steps, 3), np.int32)
    for k, (rule, i, o) in enumerate(compiled):
        rules[k] = _CODES.index(rule)
        ins[k, :len(i)] = i
        outs[k, :len(o)] = o
    sizes = (_bucket(count["point"], 32), _bucket(count["line"], 16), _bucket(count["circle"], 16))
    return Program(jnp.asarray(rules), jnp.asarray(ins), jnp.asarray(outs), names, sizes)


def sample_diagrams(key, program: Sequence[Construct] | Statement | Program, num_samples: int, *, library: dict | None = None,
                    sharding: jax.sharding.Sharding | None = None) -> Diagrams:
    """Realise a construction program in ``num_samples`` random diagrams.

    Args:
        key: a ``jax.random.key``.
        program: constructions (:class:`~jaxcore.geometry.Construct`), a :class:`~jaxcore.geometry.Statement`
            (its recipe and its proof's constructions, cited propositions expanded from ``library``), or a
            :class:`Program` from :func:`compile_program` (then the call can be traced under ``jit``).
        num_samples: configurations N (>= 1).
        library: proposition name -> :class:`~jaxcore.geometry.Statement`, for a statement whose proof cites others.
        sharding: optional sharding of the configuration axis (e.g. a ``NamedSharding`` over a 1-D mesh).

    Returns:
        :class:`Diagrams` (float32, or float64 under ``jax_enable_x64``).

    Raises:
        TypeError: ``key`` is not a PRNG key.
        ValueError: ``num_samples`` < 1; a construction whose inputs are not built before it.

    Examples:
        >>> import jax
        >>> from jaxcore.geometry import construct, sample_diagrams
        >>> d = sample_diagrams(jax.random.key(0), [construct("a := point()"), construct("b := point()"),
        ...                                         construct("L := line(a, b)")], 1000)
        >>> d.points.shape, d.lines.shape, bool(d.valid.all())  # slots padded to 32 points, 16 lines
        ((1000, 32, 2), (1000, 16, 3), True)
    """
    check_key(key)
    num_samples = check_int(num_samples, "num_samples", minimum=1)
    if not isinstance(program, Program):
        program = compile_program(program, library)
    keys = jax.random.split(key, num_samples)
    if sharding is not None:
        keys = jax.device_put(keys, sharding)
    dtype = jnp.zeros(()).dtype
    pts, lns, crc, ok = _sample_program(keys, program.rules, program.ins, program.outs, *program.sizes, dtype)
    names = program.names
    return Diagrams(pts, lns, crc, ok, names)


# ----------------------------------------------------------------------------- evaluating literals


def _angle(a, b, c):
    u, v = a - b, c - b
    return jnp.arctan2(jnp.abs(_cross(u, v)), (u * v).sum(-1))


def _eq(d, tol):
    return d <= tol, d >= 10 * tol


def _gt(v, tol):  # v > 0 strictly: true beyond 10 tol, false at or below tol
    return v >= 10 * tol, v <= tol


_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("eq", ("point", "point")), ("eq", ("line", "line")), ("eq", ("circle", "circle")), ("on", ("point", "line")),
    ("on", ("point", "circle")), ("same_side", ("point", "point", "line")), ("between", ("point", "point", "point")),
    ("centre", ("point", "circle")), ("inside", ("point", "circle")), ("intersects", ("line", "line")),
    ("intersects", ("line", "circle")), ("intersects", ("circle", "circle")))
_METRIC = len(_KINDS)
_MAG_CODES = {"seg": 1, "ang": 2, "area": 3, "right": 4}
_OPS = {"=": 0, "<": 1, "<=": 2}


def _encode(literals, names):
    """Literals as integer arrays: kind [K], args [K, 3], positive [K], op [K], terms [K, T, 5]."""
    idx = {n: (s, i) for n, s, i in names}
    k = len(literals)
    kb = _bucket(k, 32)
    num_terms = max([len(lit.body.lhs) + len(lit.body.rhs) for lit in literals if isinstance(lit.body, Metric)] + [1])
    tb = _bucket(num_terms, 4)
    kind = np.full(kb, _METRIC, np.int32)
    args = np.zeros((kb, 3), np.int32)
    pos = np.ones(kb, bool)
    op = np.zeros(kb, np.int32)
    terms = np.zeros((kb, tb, 5), np.int32)
    for j, lit in enumerate(literals):
        b = lit.body
        pos[j] = lit.positive
        if isinstance(b, Atom):
            srt = tuple(idx[a][0] for a in b.args)
            a = list(b.args)
            if b.pred == "intersects" and srt == ("circle", "line"):
                a, srt = a[::-1], srt[::-1]
            kind[j] = _KINDS.index((b.pred, srt))
            args[j, :len(a)] = [idx[x][1] for x in a]
        else:
            op[j] = _OPS[b.op]
            for t, (m, sign) in enumerate([(m, -1) for m in b.lhs] + [(m, 1) for m in b.rhs]):
                terms[j, t, 0] = _MAG_CODES[m.kind]
                terms[j, t, 1:1 + len(m.args)] = [idx[x][1] for x in m.args]
                terms[j, t, 4] = sign
    return kind, args, pos, op, terms


def _kind_values(P, L, C, tol):
    """(true, false) of every atom kind, each [N, K], from gathered arguments P [N, K, 3, 2], L / C [N, K, 3, 3]."""
    def nrm(v):
        return jnp.linalg.norm(v, axis=-1)

    out = []
    out.append(_eq(nrm(P[:, :, 0] - P[:, :, 1]), tol))
    out.append(_eq(jnp.minimum(nrm(L[:, :, 0] - L[:, :, 1]), nrm(L[:, :, 0] + L[:, :, 1])), tol))
    out.append(_eq(nrm(C[:, :, 0] - C[:, :, 1]), tol))
    out.append(_eq(jnp.abs((L[:, :, 1, :2] * P[:, :, 0]).sum(-1) + L[:, :, 1, 2]), tol))
    out.append(_eq(jnp.abs(nrm(P[:, :, 0] - C[:, :, 1, :2]) - C[:, :, 1, 2]), tol))
    sa = (L[:, :, 2, :2] * P[:, :, 0]).sum(-1) + L[:, :, 2, 2]
    sb = (L[:, :, 2, :2] * P[:, :, 1]).sum(-1) + L[:, :, 2, 2]
    out.append((((sa >= 10 * tol) & (sb >= 10 * tol)) | ((sa <= -10 * tol) & (sb <= -10 * tol)),
                (jnp.abs(sa) <= tol) | (jnp.abs(sb) <= tol)
                | ((sa * sb < 0) & (jnp.abs(sa) >= 10 * tol) & (jnp.abs(sb) >= 10 * tol))))
    pa, pb, pc = P[:, :, 0], P[:, :, 1], P[:, :, 2]
    ac = pc - pa
    lac = nrm(ac)
    off = jnp.abs(_cross(ac, pb - pa)) / jnp.maximum(lac, 1e-30)
    along = ((pb - pa) * ac).sum(-1) / jnp.maximum(lac, 1e-30)
    inner = jnp.minimum(along, lac - along)
    out.append(((off <= tol) & (inner >= 10 * tol), (off >= 10 * tol) | (inner <= tol)))
    out.append(_eq(nrm(P[:, :, 0] - C[:, :, 1, :2]), tol))
    out.append(_gt(C[:, :, 1, 2] - nrm(P[:, :, 0] - C[:, :, 1, :2]), tol))
    out.append(_gt(jnp.abs(_cross(L[:, :, 0, :2], L[:, :, 1, :2])), tol))
    dist = jnp.abs((L[:, :, 0, :2] * C[:, :, 1, :2]).sum(-1) + L[:, :, 0, 2])
    out.append(_gt(C[:, :, 1, 2] - dist, tol))
    d = nrm(C[:, :, 0, :2] - C[:, :, 1, :2])
    r1, r2 = C[:, :, 0, 2], C[:, :, 1, 2]
    out.append(_gt(jnp.minimum(d - jnp.abs(r1 - r2), r1 + r2 - d), tol))
    return out


@functools.partial(jax.jit, static_argnames=("tol",))
def _eval_program(points, lines, circles, valid, kind, args, pos, op, terms, tol):
    def gather(arr, idx):
        # a one-hot product instead of a gather: XLA:CPU's gather over the sample axis was 20x slower here
        # (16384 diagrams: 1.47 s vs 0.064 s); exact at HIGHEST precision (no TF32 rounding on GPUs)
        oh = jax.nn.one_hot(idx.reshape(-1), arr.shape[1], dtype=arr.dtype)
        out = jnp.einsum("ms,nsd->nmd", oh, arr, precision=jax.lax.Precision.HIGHEST)
        return out.reshape(arr.shape[0], *idx.shape, arr.shape[2])

    vals = _kind_values(gather(points, args), gather(lines, args), gather(circles, args), tol)
    # metric relations: v = sum(rhs) - sum(lhs)
    tp = gather(points, terms[..., 1:4])  # [N, K, T, 3, 2]
    a, b, c = tp[..., 0, :], tp[..., 1, :], tp[..., 2, :]
    mk = terms[..., 0]
    mag = jnp.where(mk == 1, jnp.linalg.norm(a - b, axis=-1),
                    jnp.where(mk == 2, _angle(a, b, c),
                              jnp.where(mk == 3, 0.5 * jnp.abs(_cross(b - a, c - a)),
                                        jnp.where(mk == 4, jnp.pi / 2, 0.0))))
    v = (mag * terms[..., 4]).sum(-1)
    mt = jnp.where(op == 0, jnp.abs(v) <= tol, jnp.where(op == 1, v >= 10 * tol, v >= -tol))
    mf = jnp.where(op == 0, jnp.abs(v) >= 10 * tol, jnp.where(op == 1, v <= tol, v <= -10 * tol))
    ts = jnp.stack([t for t, _ in vals] + [mt], -1)  # [N, K, kinds]
    fs = jnp.stack([f for _, f in vals] + [mf], -1)
    t = jnp.take_along_axis(ts, kind[None, :, None], -1)[..., 0]
    f = jnp.take_along_axis(fs, kind[None, :, None], -1)[..., 0]
    t, f = jnp.where(pos, t, f), jnp.where(pos, f, t)
    return t & valid[:, None], f & valid[:, None]


def encode_literals(names: Diagrams | Program | tuple, literals: Sequence[Literal | str]) -> LiteralCode:
    """Literals over a program's objects as arrays for :func:`evaluate_literals` (traceable once encoded).

    Args:
        names: the diagrams, the program, or its ``names`` tuple.
        literals: K literals (texts or :class:`~jaxcore.geometry.Literal`); K is padded to a multiple of 32.

    Returns:
        :class:`LiteralCode`.

    Raises:
        ValueError: a literal names an object the program lacks.

    Examples:
        >>> from jaxcore.geometry import book_one, compile_program, encode_literals
        >>> props = book_one()
        >>> code = encode_literals(compile_program(props["I.1"], props), props["I.1"].conclusion)
        >>> code.kind.shape, code.num_literals
        ((32,), 4)
    """
    if isinstance(names, (Diagrams, Program)):
        names = names.names
    lits_ = tuple(parse_literal(x) for x in literals)
    known = {n for n, _, _ in names}
    for lit in lits_:
        for o in lit.objects():
            if o not in known:
                raise ValueError(expected("literals", f"objects of the diagrams (no {o!r})", sorted(known)))
    kind, args, pos, op, terms = _encode(lits_, names)
    return LiteralCode(jnp.asarray(kind), jnp.asarray(args), jnp.asarray(pos), jnp.asarray(op), jnp.asarray(terms),
                       len(lits_))


def evaluate_literals(diagrams: Diagrams, literals: Sequence[Literal | str] | LiteralCode, *,
                      tol: float = 1e-4) -> LiteralValues:
    """Evaluate K literals in every sampled diagram.

    An equality (``on``, ``centre``, ``=``, ``seg(a, b) = ...``) is true when its residual is at most ``tol`` and
    false beyond ``10 tol``; a strict relation (``between``, ``same_side``, ``inside``, ``intersects``, ``<``) is
    true with a margin of ``10 tol`` and false within ``tol`` of failing. Lengths are in the diagram's units (free
    points in ``[-1, 1]^2``), angles in radians (``right`` is pi/2), areas in squared units. Invalid samples are
    neither true nor false.

    Args:
        diagrams: from :func:`sample_diagrams`.
        literals: K literals over the diagrams' objects, or their :class:`LiteralCode` (then traceable).
        tol: the tolerance (> 0).

    Returns:
        :class:`LiteralValues` with ``[N, K]`` masks.

    Raises:
        ValueError: a literal names an object the diagrams lack; ``tol`` not positive.

    Examples:
        >>> import jax
        >>> from jaxcore.geometry import construct, evaluate_literals, sample_diagrams
        >>> prog = [construct(t) for t in ("a := point()", "b := point()", "c := point_between(a, b)")]
        >>> v = evaluate_literals(sample_diagrams(jax.random.key(0), prog, 100), ["between(a, c, b)", "a = c"])
        >>> bool(v.true[:, 0].all()), bool(v.false[:, 1].all())
        (True, True)
    """
    tol = check_scalar(tol, "tol", positive=True)
    code = literals if isinstance(literals, LiteralCode) else encode_literals(diagrams, literals)
    t, f = _eval_program(diagrams.points, diagrams.lines, diagrams.circles, diagrams.valid, code.kind, code.args,
                         code.positive, code.op, code.terms, tol)
    return LiteralValues(t[:, :code.num_literals], f[:, :code.num_literals])


def refute(key, program: Sequence[Construct] | Statement, context: Sequence[Literal | str],
           claims: Sequence[Literal | str], num_samples: int = 4096, *, library: dict | None = None,
           tol: float = 1e-4) -> RefuteResult:
    """Look for sampled diagrams where the context holds and a claim fails.

    Args:
        key: a ``jax.random.key``.
        program: the constructions realising the objects (or a statement: recipe and proof).
        context: literals a sample must satisfy to count (e.g. the hypotheses).
        claims: K literals to test.
        num_samples: diagrams drawn.
        library: cited propositions, as for :func:`sample_diagrams`.
        tol: the evaluation tolerance.

    Returns:
        :class:`RefuteResult` (NumPy arrays).

    Raises:
        TypeError / ValueError: as :func:`sample_diagrams` and :func:`evaluate_literals`.

    Examples:
        >>> import jax
        >>> from jaxcore.geometry import construct, refute
        >>> prog = [construct(t) for t in ("a := point()", "b := point()", "c := point()")]
        >>> r = refute(jax.random.key(0), prog, ["a != b"], ["seg(a, c) <= seg(a, b) + seg(b, c)", "between(a, c, b)"],
        ...            1000)
        >>> r.refuted.tolist(), r.supported.tolist()
        ([False, True], [True, False])
    """
    d = sample_diagrams(key, program, num_samples, library=library)
    ctx = tuple(parse_literal(c) for c in context)
    cl = tuple(parse_literal(c) for c in claims)
    v = evaluate_literals(d, ctx + cl, tol=tol)
    t, f = np.asarray(v.true), np.asarray(v.false)
    ok = t[:, :len(ctx)].all(1) & np.asarray(d.valid)
    ct, cf = t[:, len(ctx):], f[:, len(ctx):]
    counter = (cf & ok[:, None]).sum(0)
    return RefuteResult(counter > 0, (ct | ~ok[:, None]).all(0) & (ok.sum() > 0), counter.astype(np.int64),
                        int(ok.sum()), num_samples)
