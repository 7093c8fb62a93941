"""Why a pair is decided: proofs as asserted labels (with ids and names), a pair's status.

Also what makes two names a pair at all (:func:`pair_problem`), the one check behind every
label, pool pair and imported record.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.errors import Contradiction, InvalidLabel, UnknownConcepts
from app.schemas import LabelRef, PairStatus, label_value
from app.services.labels.confidence import pair_confidence
from app.services.state import ProjectState
from reasoning.closure import ContradictionError, Proof

__all__ = ["PairProblem", "check_pair", "contradiction", "pair_problem", "pair_status",
           "proof_chains", "proof_refs"]


@dataclass(frozen=True)
class PairProblem:
    """Why ``(a, b)`` is no pair: the names the project does not know, or a self pair."""

    unknown: list[str]  # empty for a self pair
    reason: str


def pair_problem(known: Container[str], a: str, b: str,
                 what: str = "label") -> PairProblem | None:
    """What is wrong with ``(a, b)`` as a ``what`` (a label, a pair) among ``known`` names."""
    missing = [name for name in (a, b) if name not in known]
    if missing:
        return PairProblem(missing, "unknown concept " + ", ".join(repr(m) for m in missing))
    if a == b:
        return PairProblem([], f"a {what} needs two different concepts")
    return None


def check_pair(state: ProjectState, a: str, b: str) -> tuple[int, int]:
    """The concept ids of a label's pair; 422 for unknown names or a self pair."""
    problem = pair_problem(state.id_of, a, b)
    if problem is not None:
        if problem.unknown:
            raise UnknownConcepts(problem.unknown)
        raise InvalidLabel(f"{problem.reason}, got ({a!r}, {a!r})")
    return state.id_of[a], state.id_of[b]


def proof_refs(state: ProjectState, proof: Proof,
               pending: dict[tuple[int, int], int] | None = None) -> list[dict[str, Any]]:
    """The asserted labels of ``proof`` as ``{"id", "a", "b", "label"}`` (names, not ids).

    ``pending`` maps pairs asserted earlier in the same bulk import to their item index; such
    labels have no id yet and are cited by ``index``. In a bulk import every reference has both
    members (absent values are null).
    """
    name: dict[Any, str] = state.name_of
    refs = []
    for lab in proof.labels:
        pair: Any = (lab.a, lab.b)
        ref: dict[str, Any] = {"id": None, "a": name[lab.a], "b": name[lab.b],
                               "label": label_value(lab.positive)}
        if pending is not None:
            ref["index"] = pending.get(pair)
        if ref.get("index") is None:
            live = state.labels.get(pair)
            ref["id"] = live.id if live is not None else None
        refs.append(ref)
    return refs


def proof_chains(state: ProjectState, proof: Proof) -> list[list[str]]:
    name: dict[Any, str] = state.name_of
    return [[name[c] for c in chain] for chain in proof.chains]


def contradiction(state: ProjectState, a: str, b: str, positive: bool,
                  exc: ContradictionError) -> Contradiction:
    """The 409 of a label that contradicts the closure, with the proof of the opposite."""
    return Contradiction(
        f"({a!r}, {b!r}) cannot be {label_value(positive)}: the asserted labels in `proof` "
        f"force it {label_value(exc.proof.positive)}",
        a=a, b=b, label=label_value(positive), proof=proof_refs(state, exc.proof),
        chains=proof_chains(state, exc.proof),
    )


def pair_status(state: ProjectState, a: str, b: str,
                session: Session | None = None) -> PairStatus:
    """Status, source and proof of ``(a, b)`` from the caught-up state (no prediction); with
    ``session``, a decided pair's confidence and whether it is contested
    (:mod:`app.services.labels.confidence`)."""
    a_id, b_id = check_pair(state, a, b)
    status = state.closure.status(a_id, b_id)
    proof = state.closure.proof(a_id, b_id) if status.value is not None else None
    confidence, contested = None, False
    if session is not None and status.value is not None:
        known = pair_confidence(session, state.project_id)
        confidence, contested = known.of(a_id, b_id), known.is_contested(a_id, b_id)
    return PairStatus(
        a=a, b=b,
        status="undecided" if status.value is None else label_value(status.value),
        source=None if status.value is None else ("asserted" if status.asserted
                                                  else "inferred"),
        proof=[LabelRef.model_validate(r) for r in proof_refs(state, proof)] if proof else [],
        chains=proof_chains(state, proof) if proof is not None else [],
        in_pool=(a_id, b_id) in state.pool.row_of,
        prediction=None,
        confidence=confidence,
        contested=contested,
    )
