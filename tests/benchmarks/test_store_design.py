"""The store-design benchmark counts the lines written against the rows rewritten."""

from __future__ import annotations

from benchmarks import store_design


def test_the_store_design_benchmark_counts_lines_against_rows(tmp_path):
    rows = store_design.main(["--out", str(tmp_path), "--chain", "300", "--short-chain", "120",
                              "--concepts", "400", "--pool", "3000", "--questions", "30"])
    by_case = {r["case"].split()[0]: r for r in rows}
    chain = by_case["chain-import"]
    assert chain["decided_pairs"] == 300 * 299 and chain["lines_written"] == 2 * 299
    assert chain["rows_rewritten"] == 299 + 299 * 300 // 2  # a row each, a column's rows
    assert by_case["chain-by-label"]["rows_rewritten"] > 20 * by_case["chain-by-label"][
        "lines_written"]
    assert all(r["rows_rewritten"] >= r["lines_written"] for r in rows)
    assert (tmp_path / "store_design.csv").read_text().startswith("case,labels")
