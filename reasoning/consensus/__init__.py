"""A team's answers, their consensus and the annotators' agreement.

* :func:`consensus`: the consistent labels that best explain every answer, with each
  annotator's estimated accuracy (one-coin Dawid–Skene by EM, the order's contradictions as
  further evidence; ``docs/consensus.md``);
* :func:`agreement`: per annotator their answers, agreement with the consensus and accuracy,
  false "no" and false "yes", minority answers, the prior's weight and a trend; the reviewers
  apart; Cohen's κ per pair of annotators, Krippendorff's α;
* :func:`rebuild`: a consensus from the accuracies of a full fit kept, without EM;
* :func:`p_wrong`: the chance that one answer is wrong, for second opinions;
* :func:`check_candidates`: the pairs a check question may ask.
"""

from reasoning.consensus.agreement import (
    KAPPA_MIN_SHARED,
    PRIOR_MIN_SHARED,
    TREND_WINDOW,
    TREND_WINDOWS,
    Agreement,
    AnnotatorAgreement,
    Interval,
    PairKappa,
    Reviewer,
    Window,
    agreement,
)
from reasoning.consensus.core import (
    SETTLE_ANSWERS,
    SETTLE_ODDS,
    TIE_DELTA,
    Consensus,
    Vote,
    check_candidates,
    consensus,
    effective_answers,
    p_wrong,
)
from reasoning.consensus.rebuild import rebuild

__all__ = [
    "KAPPA_MIN_SHARED",
    "PRIOR_MIN_SHARED",
    "SETTLE_ANSWERS",
    "SETTLE_ODDS",
    "TIE_DELTA",
    "TREND_WINDOW",
    "TREND_WINDOWS",
    "Agreement",
    "AnnotatorAgreement",
    "Vote",
    "Consensus",
    "Interval",
    "PairKappa",
    "Reviewer",
    "Window",
    "agreement",
    "check_candidates",
    "consensus",
    "effective_answers",
    "p_wrong",
    "rebuild",
]
