"""Independent pure-Python statement of the watermark's hash, network and reweight (test oracles)."""

import math

M32 = 0xFFFFFFFF
GOLDEN = 0x9E3779B9


def mix(x):
    x &= M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def context_hash(s0, s1, context):
    h = mix(s0)
    for j, c in enumerate(context):
        h = mix(h ^ ((mix((c & M32) ^ s1) + (j + 1) * GOLDEN) & M32))
    return h


def radices(v):
    best = None
    for u in range(min(2, v - 1), math.isqrt(v - 1) + 2):
        w = -(-v // u)
        if 4 * u * u < v:
            continue
        cost = (u * w - v, abs(w - u), u)
        if best is None or cost < best[0]:
            best = (cost, u, w)
    return best[1], best[2]


def network(x, s0, s1, seed, v, rounds):
    u, w = radices(v)
    keys = [mix((seed + mix((mix(s0 ^ (((i + 1) * GOLDEN) & M32)) + s1) & M32)) & M32) for i in range(rounds)]
    a, b = divmod(x, w)
    ra, rb = u, w
    for k in keys:
        f = ((mix(b ^ k) >> 16) * ra) >> 16
        a, b = b, (a + f) % ra
        ra, rb = rb, ra
    return a * rb + b


def position(token, s0, s1, seed, v, rounds=6):
    y = network(token, s0, s1, seed, v, rounds)
    while y >= v:
        y = network(y, s0, s1, seed, v, rounds)
    return y


def dip_reweight(p, perm, alpha):
    """perm[i] = token at position i; P_W from F' = g(F) differences (the paper's form)."""
    g = lambda x: max(x - alpha, 0.0) + max(x - (1 - alpha), 0.0)  # noqa: E731
    out = [0.0] * len(p)
    cum = 0.0
    for t in perm:
        out[t] = g(cum + p[t]) - g(cum)
        cum += p[t]
    return out


def binom_pmf(k, n, q):
    return math.comb(n, k) * q**k * (1 - q) ** (n - k)
