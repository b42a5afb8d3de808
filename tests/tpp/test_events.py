import jax.numpy as jnp
import numpy as np
import pytest

from jaxcore.tpp import EventBatch, Hawkes


def test_from_sequences_pads_with_last_time_and_masks():
    b = EventBatch.from_sequences([[0.5, 1.0, 2.5], [0.2], []], [[0, 1, 1], [1], []], T=[3.0, 1.0, 2.0])
    assert b.times.shape == (3, 3) and b.marks.shape == (3, 3) and b.mask.shape == (3, 3)
    assert b.num_marks == 2
    np.testing.assert_array_equal(np.asarray(b.num_events), [3, 1, 0])
    np.testing.assert_allclose(np.asarray(b.times[1]), [0.2, 0.2, 0.2])
    np.testing.assert_allclose(np.asarray(b.times[2]), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(b.marks[1]), [1, 0, 0])
    np.testing.assert_allclose(np.asarray(b.T), [3.0, 1.0, 2.0])
    assert b.times.dtype == jnp.float32 and b.marks.dtype == jnp.int32


def test_defaults_and_roundtrip():
    b = EventBatch.from_sequences([[1.0, 2.0], [0.5]], max_events=5)
    assert b.max_events == 5 and b.num_marks == 1
    np.testing.assert_allclose(np.asarray(b.T), [2.0, 0.5])  # default T = last event
    t, m, T = b.to_sequences()
    np.testing.assert_allclose(t[0], [1.0, 2.0])
    np.testing.assert_array_equal(m[1], [0])
    sub = b[1]
    assert sub.num_sequences == 1 and int(sub.num_events[0]) == 1


def test_x64_dtype(x64):
    b = EventBatch.from_sequences([[1.0]], T=2.0)
    assert b.times.dtype == jnp.float64


@pytest.mark.parametrize(
    "times, marks, T, kw, exc, match",
    [
        ([[0.1, np.nan]], None, 1.0, {}, ValueError, r"times\[0\]\[1\]: expected a finite"),
        ([[0.1], [-0.5]], None, 1.0, {}, ValueError, r"times\[1\]\[0\]: expected a time in \[0, T"),
        ([[0.1, 0.5, 0.3]], None, 1.0, {}, ValueError, r"times\[0\]\[2\]: expected event times sorted .*times\[0\]\[1\] = 0.5\), got 0.3"),
        ([[0.1, 1.5]], None, 1.0, {}, ValueError, r"times\[0\]\[1\]: expected a time in \[0, T=1.0\], got 1.5"),
        ([[0.1, 0.2]], [[0, 3]], 1.0, {"num_marks": 2}, ValueError, r"marks\[0\]\[1\]: expected an event type in \[0, 2\), got 3"),
        ([[0.1, 0.2]], [[0, -1]], 1.0, {}, ValueError, r"marks\[0\]\[1\]"),
        ([[0.1, 0.2]], [[0]], 1.0, {}, ValueError, r"marks\[0\]: expected 2 marks"),
        ([[0.1, 0.2]], [[0, 1], [0]], 1.0, {}, ValueError, r"marks: expected 1 sequences"),
        ([[0.1, 0.2, 0.3]], None, 1.0, {"max_events": 2}, ValueError, r"max_events: expected at least 3"),
        ([[0.1], [0.2]], None, [1.0, 2.0, 3.0], {}, ValueError, r"T: expected a scalar or 2"),
        ([[0.1]], None, np.inf, {}, ValueError, r"T\[0\]: expected a finite"),
        ([[0.1]], [[0.5]], 1.0, {}, TypeError, r"marks\[0\]: expected integer"),
        ([[0.1]], None, 1.0, {"num_marks": 0}, ValueError, r"num_marks: expected a positive integer"),
    ],
)
def test_validation_errors_name_sequence_and_position(times, marks, T, kw, exc, match):
    with pytest.raises(exc, match=match):
        EventBatch.from_sequences(times, marks, T, **kw)


def test_type_errors():
    with pytest.raises(TypeError, match="times: expected a list of 1-D sequences"):
        EventBatch.from_sequences(np.array([0.1, 0.2]))
    with pytest.raises(TypeError, match="times: expected a list"):
        EventBatch.from_sequences(3.0)
    b = EventBatch.from_sequences([[0.1]], [[1]], T=1.0, num_marks=2)
    with pytest.raises(ValueError, match=r"batch.num_marks: expected 1 .* got 2"):
        Hawkes(0.2, 0.5, 1.0).log_likelihood(b)
    with pytest.raises(TypeError, match="batch: expected a jaxcore.tpp.EventBatch"):
        Hawkes(0.2, 0.5, 1.0).log_likelihood({"times": 1})


def test_trim_cuts_padding_to_a_multiple_and_keeps_results():
    b = EventBatch.from_sequences([[0.1, 0.5, 0.9], [0.2], []], T=1.0, max_events=10)
    t = b.trim()
    assert t.max_events == 3 and t.num_sequences == 3
    np.testing.assert_array_equal(np.asarray(t.num_events), [3, 1, 0])
    assert b.trim(4).max_events == 4 and b.trim(64).max_events == 10  # never longer than the buffer
    h = Hawkes(0.3, 0.5, 1.0)
    np.testing.assert_allclose(np.asarray(h.log_likelihood(t)), np.asarray(h.log_likelihood(b)), rtol=1e-6)
    with pytest.raises(ValueError, match="multiple: expected an int >= 1"):
        b.trim(0)


def test_window_start_shifts_times_and_window():
    """``t0`` moves a window [t0, T] to [0, T - t0]; the Poisson log-likelihood is shift-invariant."""
    from jaxcore.tpp import Poisson

    years = np.array([1851.2, 1851.6, 1853.0, 1900.5])
    a = EventBatch.from_sequences([years], T=1963.0, t0=1851.0, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(a.times[0]), years - 1851.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(a.T), [112.0])
    b = EventBatch.from_sequences([years - 1851.0], T=112.0, dtype=np.float32)
    model = Poisson(mu=np.array([0.04], np.float32))
    np.testing.assert_allclose(np.asarray(model.log_likelihood(a)), np.asarray(model.log_likelihood(b)), rtol=1e-6)
    # one start per sequence; the default T (the last event) is shifted too
    c = EventBatch.from_sequences([[5.0, 6.0], [-250.0, 10.0]], t0=[4.0, -250.0])
    np.testing.assert_allclose(np.asarray(c.T), [2.0, 260.0])
    with pytest.raises(ValueError, match=r"times\[0\]: expected events at or after the window start t0 = 1852"):
        EventBatch.from_sequences([years], T=1963.0, t0=1852.0)
    with pytest.raises(ValueError, match="t0: expected a scalar or 1 window starts"):
        EventBatch.from_sequences([years], T=1963.0, t0=[1.0, 2.0])
    with pytest.raises(ValueError, match="t0: expected finite window starts"):
        EventBatch.from_sequences([years], T=1963.0, t0=float("nan"))
    with pytest.raises(TypeError, match="t0: expected a real scalar"):
        EventBatch.from_sequences([years], T=1963.0, t0="1851")
