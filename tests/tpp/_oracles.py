"""Brute-force O(L^2) oracles in NumPy float64 for the tpp tests."""

import numpy as np


def hawkes_intensity(mu, alpha, beta, t, m, s):
    """lambda_k(s) [K] by the double sum over events strictly before s."""
    lam = np.array(mu, np.float64).copy()
    for ti, mi in zip(t, m):
        if ti < s:
            lam += alpha[:, mi] * np.exp(-beta[:, mi] * (s - ti))
    return lam


def hawkes_compensator(mu, alpha, beta, t, m, s):
    comp = np.array(mu, np.float64) * s
    for ti, mi in zip(t, m):
        if ti < s:
            comp += alpha[:, mi] / beta[:, mi] * (1 - np.exp(-beta[:, mi] * (s - ti)))
    return comp


def hawkes_loglik(mu, alpha, beta, t, m, T):
    ll = 0.0
    for i in range(len(t)):
        ll += np.log(hawkes_intensity(mu, alpha, beta, t[:i], m[:i], t[i])[m[i]])
    return ll - hawkes_compensator(mu, alpha, beta, t, m, T).sum()


def self_correcting_loglik(mu, alpha, t, T):
    """sum log lambda(t_i) - int_0^T lambda by per-segment integration written from scratch."""
    ll = sum(mu * ti - alpha * i for i, ti in enumerate(t))
    edges = np.concatenate([[0.0], t, [T]])
    comp = 0.0
    for i in range(len(edges) - 1):
        a, b = edges[i], edges[i + 1]
        comp += (np.exp(mu * b) - np.exp(mu * a)) / mu * np.exp(-alpha * i)
    return ll - comp
