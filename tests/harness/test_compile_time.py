"""The harness charges each task with the compile time JAX reports, and the report sums it per family."""

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import report, runner


def test_compile_time_since_counts_new_programs_and_their_seconds():
    start = runner.compile_totals()
    f = jax.jit(lambda x: jnp.sin(x) * 3.0 + jnp.cos(x))
    f(np.arange(7.0, dtype=np.float32)).block_until_ready()
    f(np.arange(9.0, dtype=np.float32)).block_until_ready()  # a second shape: a second program
    f(np.arange(9.0, dtype=np.float32)).block_until_ready()  # a cache hit: no program
    got = runner.compile_time_since(start)
    assert got["programs"] == 2
    assert got["backend_s"] > 0 and got["tracing_s"] > 0 and got["lowering_s"] > 0
    again = runner.compile_time_since(runner.compile_totals())
    assert again == {"backend_s": 0.0, "lowering_s": 0.0, "tracing_s": 0.0, "saved_s": 0.0, "programs": 0,
                     "cache_hits": 0}


def test_time_budget_rows_sum_per_family_and_overall():
    ct = {"backend_s": 1.0, "lowering_s": 0.25, "tracing_s": 0.25, "programs": 3}
    doc = {"results": [{"family": "a", "wall_s": 4.0, "compile_time": ct},
                       {"family": "a", "wall_s": 2.0, "compile_time": ct},
                       {"family": "b", "wall_s": 10.0},  # an old record: no compile figures
                       {"family": "c"}],  # no wall time: left out
           "scaling": [{"family": "a", "wall_s": 1.5, "compile_time": ct}]}
    rows = report.time_budget_rows(doc)
    assert [r[0] for r in rows] == ["b", "a", "**all**"]
    b, a, total = rows
    assert b[1:] == ["1", "10 s", "-", "-", "-"]
    assert a[1] == "3" and a[4] == f"{4.5 / 7.5:.0%}" and a[5] == "9"
    assert total[1] == "4" and total[5] == "9" and total[4] == f"{4.5 / 17.5:.0%}"
    assert report.time_budget_rows({"results": []}) == []


def test_host_callbacks_are_detected_in_compiled_programs():
    import equinox as eqx

    x = np.arange(4.0, dtype=np.float32)
    plain = jax.jit(lambda v: v * 2.0).lower(x).compile()
    checked = jax.jit(lambda v: eqx.error_if(v, v.sum() < 0, "negative")).lower(x).compile()
    assert runner.has_host_callbacks(plain) is False
    assert runner.has_host_callbacks(checked) is True
    rows = report.speed_rows({"results": [{"kind": "speed", "name": "f", "family": "a", "size": {}, "status": "ok",
                                           "kernel": {"median_s": 1e-3, "iqr_s": 1e-4, "host_callbacks": True},
                                           "baselines": {}}]})
    assert rows[0]["kernel"].endswith("(host callback)")
