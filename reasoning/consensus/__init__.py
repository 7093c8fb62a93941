"""A team's answers, their consensus and the annotators' agreement.

* :func:`consensus`: the consistent labels that best explain every answer, with each
  annotator's estimated accuracy (one-coin Dawid–Skene by EM, the order's contradictions as
  further evidence; ``docs/consensus.md``);
* :func:`agreement`: per annotator their answers, agreement with the consensus and accuracy,
  Cohen's κ per pair of annotators, Krippendorff's α;
* :func:`p_wrong`: the chance that one answer is wrong, for second opinions;
* :func:`check_candidates`: the pairs a check question may ask.
"""

from reasoning.consensus.agreement import (
    KAPPA_MIN_SHARED,
    Agreement,
    AnnotatorAgreement,
    Interval,
    PairKappa,
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

__all__ = [
    "KAPPA_MIN_SHARED",
    "SETTLE_ANSWERS",
    "SETTLE_ODDS",
    "TIE_DELTA",
    "Agreement",
    "AnnotatorAgreement",
    "Vote",
    "Consensus",
    "Interval",
    "PairKappa",
    "agreement",
    "check_candidates",
    "consensus",
    "effective_answers",
    "p_wrong",
]
