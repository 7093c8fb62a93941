"""The loader reads a positive row ``A,B`` as "B is a prerequisite of A": the pair (B, A)."""

from __future__ import annotations

from reasoning.data import domain_names, load_domain


def test_conditional_probability_precedes_decision_tree_model(al_cpl):
    domain = load_domain(al_cpl, "data_mining")
    # the files hold the row Decision_tree_model,Conditional_probability with label 1
    row = domain.pairs.index(("Conditional_probability", "Decision_tree_model"))
    assert domain.labels[row]
    reverse = ("Decision_tree_model", "Conditional_probability")
    if reverse in domain.pairs:
        assert not domain.labels[domain.pairs.index(reverse)]


def test_every_domain_has_aligned_pairs_labels_and_38_features(al_cpl):
    assert domain_names(al_cpl) == ["data_mining", "geometry", "precalculus"]
    for name in domain_names(al_cpl):
        domain = load_domain(al_cpl, name)
        assert len(domain.pairs) == len(domain.labels) == len(domain.features)
        assert domain.features.shape[1] == 38
        index = domain.index_pairs()
        assert [tuple(domain.concepts[i] for i in p) for p in index[:5]] == domain.pairs[:5]
