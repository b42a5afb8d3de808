"""The report names each family's program with the largest device memory (issue 24, item 4)."""

from benchmarks.report import markdown, peak_device_memory


def _rec(name, size, arg, out, temp):
    mem = {"argument_size_in_bytes": arg, "output_size_in_bytes": out, "temp_size_in_bytes": temp}
    kernel = {"median_s": 1e-3, "iqr_s": 1e-4, "compile_s": 0.1, "memory": mem}
    return {"kind": "speed", "name": name, "family": "fam", "size": {"n": size}, "status": "ok",
            "kernel": kernel, "baselines": {}}


def test_the_largest_total_of_arguments_outputs_and_temporaries_is_reported():
    # the second record has the largest temporaries, the third the largest total
    doc = {"results": [_rec("fam.a", 1, 10, 10, 10), _rec("fam.b", 2, 0, 0, 50), _rec("fam.a", 3, 40, 20, 5),
                       {**_rec("other.c", 1, 10**9, 0, 0), "family": "other"}], "scaling": []}
    name, size, mem = peak_device_memory(doc, "fam")
    assert (name, size) == ("fam.a", "n=3")
    assert sum(mem.values()) == 65
    md = markdown(doc)
    assert "fam.a (n=3), 65 B per device (arguments 40 B, outputs 20 B, temporaries 5 B" in md


def test_records_without_memory_analysis_are_skipped():
    rec = _rec("fam.a", 1, 1, 1, 1)
    rec["kernel"]["memory"] = {}
    assert peak_device_memory({"results": [rec]}, "fam") is None
    assert "Largest device memory" not in markdown({"results": [rec], "scaling": []})
