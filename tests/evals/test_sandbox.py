"""The sandbox on bad input: each case contained and recorded, never an exception in the harness."""

import pytest

from jaxcore import evals


def test_runs_code_with_copied_tables(tmp_path):
    src = tmp_path / "t.csv"
    src.write_text("a,b\n1,2\n3,4\n")
    r = evals.run_code("import csv\nrows = list(csv.DictReader(open('data.csv')))\n"
                       "print(sum(int(r['b']) for r in rows))\nopen('out.txt', 'w').write('fine')",
                       {"data.csv": src})
    assert (r.status, r.stdout, r.refused) == ("ok", "6\n", ())
    assert r.files == ("data.csv", "out.txt")
    assert src.read_text() == "a,b\n1,2\n3,4\n"   # the original is untouched (a copy was used)


def test_infinite_loop_hits_the_cpu_limit():
    r = evals.run_code("while True:\n    pass", cpu_seconds=1, wall_seconds=30)
    assert r.status == "cpu_limit" and r.returncode < 0


def test_sleeping_code_hits_the_wall_clock():
    r = evals.run_code("import time\ntime.sleep(60)", wall_seconds=0.5)
    assert r.status == "timeout" and r.seconds < 10


def test_writing_outside_the_folder_is_refused(tmp_path):
    target = tmp_path / "escape.txt"
    r = evals.run_code(f"open({str(target)!r}, 'w').write('x')")
    assert r.status == "refused" and not target.exists()
    assert "writing outside the working directory" in r.refused[0]
    victim = tmp_path / "keep.txt"
    victim.write_text("k")
    r = evals.run_code(f"import os\nos.remove({str(victim)!r})")
    assert r.status == "refused" and victim.exists()
    r = evals.run_code(f"import os\nos.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)")
    assert r.status == "refused" and not target.exists()
    r = evals.run_code("open('../escape.txt', 'w')")   # relative paths resolve against the working folder
    assert r.status == "refused"


def test_network_is_cut():
    r = evals.run_code("import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 9))")
    assert r.status == "refused" and r.refused[0].startswith("socket.")
    assert r.network in ("namespace+audit-hook", "audit-hook") and r.network == evals.network_isolation()


def test_code_that_catches_the_refusal_still_leaves_a_record():
    r = evals.run_code("try:\n    import socket; socket.socket()\nexcept PermissionError:\n    print('caught')")
    assert r.status == "ok" and r.stdout == "caught\n" and len(r.refused) == 1


def test_processes_are_refused():
    r = evals.run_code("import subprocess\nsubprocess.run(['true'])")
    assert r.status == "refused" and "subprocess" in r.refused[0]


def test_huge_output_is_truncated_and_limited():
    r = evals.run_code("for i in range(100000):\n    print(i)", max_output_chars=100)
    assert r.status == "ok" and r.truncated and r.stdout.startswith("0\n1\n") and len(r.stdout) < 140
    r = evals.run_code("import sys\nsys.stdout.write('x' * (8 << 20))", file_mb=1, max_output_chars=50)
    assert r.status == "file_limit" and r.truncated


def test_memory_limit():
    r = evals.run_code("x = bytearray(3 << 30)", memory_mb=512)
    assert r.status == "memory_limit"


def test_errors_are_recorded():
    r = evals.run_code("def (")
    assert r.status == "error" and "SyntaxError" in r.stderr
    r = evals.run_code("raise SystemExit(3)")
    assert (r.status, r.returncode) == ("error", 3)


def test_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="code: expected a string"):
        evals.run_code(b"print(1)")
    with pytest.raises(ValueError, match="tables: expected plain file names"):
        evals.run_code("pass", {"../x.csv": __file__})
    with pytest.raises(ValueError, match=r"tables\['x.csv'\]: expected the path"):
        evals.run_code("pass", {"x.csv": tmp_path / "missing.csv"})
    with pytest.raises(ValueError, match="memory_mb: expected"):
        evals.run_code("pass", memory_mb=10)


def test_the_temporary_folder_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    r = evals.run_code("open('x.txt', 'w').write('y')")
    assert r.status == "ok" and r.files == ("x.txt",) and list(tmp_path.iterdir()) == []
