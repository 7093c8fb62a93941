"""The scale benchmark runs end to end at tiny sizes and writes the figures it promises.

One run (three short-lived servers, about 15 s on a shared 2-core machine) imports a 60-chain,
has it refused by a budget of 1,000 decided pairs, and answers 12 questions on a small and a
"large" generated order.
"""

from __future__ import annotations

import csv

import pytest

from benchmarks.scale import COLUMNS, TARGETS, generate_order, main

CHAIN, QUESTIONS = 60, 12


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("scale")
    code = main(["--out", str(out), "--chain", str(CHAIN), "--concepts", "400", "--pool", "3000",
                 "--small-concepts", "80", "--small-pool", "800", "--questions", str(QUESTIONS),
                 "--refusal-budget", "1000", "--chunk", "1000", "--timeout", "120",
                 "--no-progress"])
    with (out / "scale.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    figures = {(r["phase"], r["metric"]): r for r in rows}
    return code, out, header, figures


def _value(figures, phase, metric):
    value = figures[(phase, metric)]["value"]
    assert value != "", f"{phase} {metric} was not measured: {figures[(phase, metric)]['note']}"
    return float(value)


def test_every_output_is_written(run):
    code, out, header, figures = run
    assert code == 0
    assert header == COLUMNS
    assert set(TARGETS) <= set(figures), "every target has its figure"
    assert len(list(out.glob("server-*.log"))) == 3, "chain, refusal and large servers"
    summary = (out / "summary.md").read_text()
    assert "| chain | import_s |" in summary and "targets met" in summary
    for (phase, metric), target in TARGETS.items():
        row = figures[(phase, metric)]
        assert row["target"] == f"<= {target:g}"
        assert row["met"] in ("yes", "no")


def test_the_chain_is_imported_listed_and_exported(run):
    _, _, _, figures = run
    assert _value(figures, "chain", "import_s") > 0
    assert _value(figures, "chain", "decided_pairs") == CHAIN * (CHAIN - 1)
    assert "positive" in figures[("chain", "import_s")]["note"]
    assert _value(figures, "chain", "peak_rss_mib") > 50, "a Python server holds > 50 MiB"
    assert _value(figures, "chain", "db_mib") > 0
    assert _value(figures, "chain", "labels_page_s") > 0
    ttfb, total = _value(figures, "chain", "export_ttfb_s"), _value(figures, "chain", "export_s")
    assert 0 < ttfb <= total
    # a header and one CSV line per decided pair, each at least "cI,cJ,negative\\n"
    assert _value(figures, "chain", "export_mib") * 1024**2 > CHAIN * (CHAIN - 1) * 14


def test_a_lower_budget_refuses_the_chain(run):
    _, _, _, figures = run
    row = figures[("refusal", "refusal_s")]
    assert row["note"].startswith("422 budget-exceeded"), row["note"]
    assert float(row["value"]) > 0


def test_both_loops_answer_every_question(run):
    _, _, _, figures = run
    for phase in ("small", "large"):
        assert _value(figures, phase, "questions") == QUESTIONS
        assert _value(figures, phase, "setup_s") > 0
        for metric in ("label_p50_ms", "label_p99_ms", "next_p50_ms", "next_p99_ms"):
            assert _value(figures, phase, metric) > 0
        assert _value(figures, phase, "label_p50_ms") <= _value(figures, phase, "label_p99_ms")
        assert _value(figures, phase, "rss_end_mib") > 50
    assert _value(figures, "large", "db_mib") > _value(figures, "small", "db_mib")
    assert _value(figures, "large/small", "label_p50") > 0


def test_the_generated_truth_is_the_reachability_of_the_parents():
    nx = pytest.importorskip("networkx")
    order = generate_order(300, 4000, seed=5)
    graph = nx.DiGraph((p, child) for child, row in enumerate(order.parents) for p in row)
    graph.add_nodes_from(range(300))
    assert nx.is_directed_acyclic_graph(graph)
    assert all(len(row) <= 10 for row in order.parents)
    pairs = order.pool.tolist()
    assert len({tuple(p) for p in pairs}) == len(pairs) == 4000
    truth = [order.precedes(a, b) for a, b in pairs]
    assert truth == [nx.has_path(graph, a, b) for a, b in pairs]
    assert 0.05 < sum(truth) / len(truth) < 0.6, "the pool holds positives and negatives"
