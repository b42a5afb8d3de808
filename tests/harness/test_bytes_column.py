"""The report's "bytes/s of peak" column says whose byte count it is (issue 25, item 5)."""

from benchmarks.report import markdown, speed_rows


def _doc(bytes_source):
    kernel = {"median_s": 1e-3, "iqr_s": 1e-4, "compile_s": 0.1, "bytes_frac": 2.7, "flops_frac": 0.07}
    if bytes_source is not None:
        kernel["bytes_source"] = bytes_source
    rec = {"kind": "speed", "name": "fam.kernel", "family": "fam", "size": {"n": 1}, "status": "ok",
           "kernel": kernel, "baselines": {}}
    return {"results": [rec], "scaling": []}


def test_xla_counted_bytes_are_labelled_and_explained():
    for source in ("xla", None):  # records written before bytes_source existed came from XLA's count
        row = speed_rows(_doc(source))[0]
        assert row["bw"] == "270.0% (XLA)"
    md = markdown(_doc("xla"))
    assert "XLA's bytes-accessed count" in md and "not DRAM traffic" in md


def test_analytic_bytes_are_unmarked():
    assert speed_rows(_doc("analytic"))[0]["bw"] == "270.0%"
