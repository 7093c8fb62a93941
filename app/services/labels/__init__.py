"""Asserted labels, by topic: writing them (one or in bulk), retracting one, listing the
decided pairs, explaining a pair (proofs), and the stored closure rows they all keep."""

from app.services.labels.listing import list_labels
from app.services.labels.proofs import pair_status
from app.services.labels.retraction import retract_label
from app.services.labels.writing import Refused, Written, post_bulk, post_label

__all__ = ["Refused", "Written", "list_labels", "pair_status", "post_bulk", "post_label",
           "retract_label"]
