"""Request and response bodies of the REST contract (pydantic v2, separate from the tables).

Request models forbid unknown fields and are strict (no ``"1"`` for a number, no ``1`` for a
string); names are 1–512 characters without control characters or unpaired surrogates; every
list is capped so that no request can ask for unbounded work.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from models import NAME_LENGTH

__all__ = [
    "AnswerRetracted",
    "DisagreementAnswer",
    "DisagreementItem",
    "DisagreementPage",
    "QueryReason",
    "Resolution",
    "ReviewerKeyRead",
    "AnnotatorCounts",
    "AnnotatorPage",
    "JobAccepted",
    "JobRead",
    "JobState",
    "MAX_FEATURES",
    "MAX_ITEMS",
    "MAX_LIMIT",
    "ApiKeyRead",
    "BulkLabels",
    "BulkLabelsCreated",
    "ConceptIn",
    "ConceptPage",
    "ConceptRead",
    "ConceptsCreate",
    "ConceptsCreated",
    "DecidedPair",
    "Health",
    "ConsensusAsOf",
    "LabelCreated",
    "LabelIn",
    "LabelItem",
    "LabelPage",
    "LabelRef",
    "LabelRetracted",
    "LabelValue",
    "label_value",
    "MAX_DECIDED_LISTED",
    "ModelInfo",
    "Name",
    "NewlyDecided",
    "NextQueries",
    "PairIn",
    "PairPage",
    "PairRead",
    "PairStatus",
    "PendingPair",
    "PairsCreate",
    "PairsCreated",
    "PredictionItem",
    "PredictionModelName",
    "PredictionPage",
    "Problem",
    "ProjectCounts",
    "ProjectCreate",
    "ProjectCreated",
    "ProjectDetail",
    "ProjectList",
    "ProjectRead",
    "ProjectUpdate",
    "Query",
    "QueryBounds",
    "SuggestionItem",
    "SuggestionPage",
    "check_name",
    "ConceptDeleted",
    "ConceptRename",
    "ConceptsMerge",
    "ConceptsMerged",
    "LinkIn",
    "LinkPage",
    "LinksCreate",
    "LinksChanged",
    "PoolSuggestions",
    "SuggestedPair",
]

MAX_ITEMS = 100_000
"""Most items in one list of a request body (concepts, pairs, labels)."""
MAX_FEATURES = 4_096
"""Longest feature vector of a pool pair."""
MAX_LIMIT = 10_000
"""Largest page of a listing."""
MAX_DESCRIPTION = 10_000
MAX_TEXT = 1_000_000
"""Longest concept text (characters)."""

# Control characters, surrogates, and U+FFFE/U+FFFF (which no XML document, hence no GraphML
# export, can carry).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_NUL_OR_SURROGATE = re.compile("[\x00\ud800-\udfff]")


def check_name(value: str) -> str:
    """Refuse control characters (NUL, newlines, ...) and unpaired surrogates in a name."""
    match = _CONTROL.search(value)
    if match:
        char = match.group()
        what = ("unpaired surrogate" if "\ud800" <= char <= "\udfff" else
                "noncharacter" if char in "\ufffe\uffff" else "control character")
        raise ValueError(f"{what} U+{ord(char):04X} at position {match.start()} is not allowed")
    return value


def _check_text(value: str) -> str:
    # Free text may hold newlines; NUL cannot be stored (PostgreSQL) and lone surrogates
    # cannot be encoded.
    match = _NUL_OR_SURROGATE.search(value)
    if match:
        raise ValueError(f"character U+{ord(match.group()):04X} is not allowed")
    return value


# The same rule for OpenAPI clients and fuzzers (surrogates are left to the validator: a JSON
# Schema pattern cannot name lone ones).
NAME_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f\\ufffe\\uffff]*$"
Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=NAME_LENGTH),
    AfterValidator(check_name),
    Field(json_schema_extra={"pattern": NAME_PATTERN}),
]
Description = Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION),
                        AfterValidator(_check_text),
                        Field(json_schema_extra={"pattern": "^[^\\u0000]*$"})]
TextValue = Annotated[str, StringConstraints(max_length=MAX_TEXT), AfterValidator(_check_text)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
LabelValue = Literal["positive", "negative"]
Source = Annotated[str, StringConstraints(min_length=1, max_length=64,
                                          pattern=r"^[A-Za-z0-9_.:-]+$")]
PredictionModelName = Literal["random_forest", "logistic_regression"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Response(BaseModel):
    model_config = ConfigDict(from_attributes=True)


# ---------------------------------------------------------------------------- problems
class Problem(BaseModel):
    """An RFC 9457 problem; some kinds add members (``proof``, ``errors``, ...)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=["/problems/contradiction"])
    title: str
    status: int
    detail: str
    instance: str | None = None


# ---------------------------------------------------------------------------- projects
PolicyName = Literal["strict", "consensus"]
POLICY_DESCRIPTION = (
    "How answers become asserted labels: \"strict\" (the first answer on a pair asserts it; a "
    "contradicting answer is refused with its proof) or \"consensus\" (for teams: every answer "
    "is kept and the asserted labels are the consistent set that best explains them all, "
    "given each annotator's estimated reliability).")
DEFAULT_QUESTION = "Is {a} needed before {b}, directly or through other concepts?"
Question = Annotated[str, StringConstraints(min_length=1, max_length=MAX_DESCRIPTION),
                     Field(description="The question annotators are asked, with {a} and {b}; "
                                       f"default: \"{DEFAULT_QUESTION}\"")]


class ProjectCreate(_Request):
    name: Name
    description: Description | None = None
    prediction_model: PredictionModelName | None = Field(
        default=None, description="The model behind /predictions; default random_forest "
        "(the paper's 200-tree random forest)."
    )
    policy: PolicyName = Field(default="strict", description=POLICY_DESCRIPTION)
    question: Question | None = None


class ProjectUpdate(_Request):
    name: Name | None = None
    description: Description | None = None
    prediction_model: PredictionModelName | None = None
    policy: PolicyName | None = Field(default=None, description=POLICY_DESCRIPTION)
    question: Question | None = None


class ProjectRead(_Response):
    id: int
    name: str
    description: str | None
    created_at: datetime
    version: int = Field(description="Grows with every change of the project.")
    feature_length: int | None = Field(description="Length of every pool pair's features.")
    prediction_model: str
    features_computed: bool = Field(
        default=False, description="The pool's features are computed by sporal from the "
        "concept texts and links (docs/features.md), not sent with the pairs.")
    policy: PolicyName = Field(default="strict", description=POLICY_DESCRIPTION)
    question: str = Field(default=DEFAULT_QUESTION,
                          description="The question annotators are asked, with {a} and {b}.")

    @field_validator("question", mode="before")
    @classmethod
    def _default_question(cls, value: object) -> object:
        return DEFAULT_QUESTION if value is None else value


class ProjectCreated(ProjectRead):
    api_key: str = Field(description="The project's key; shown once, stored hashed.")


class ApiKeyRead(BaseModel):
    api_key: str = Field(description="The new key; the old one stops working now.")


class ProjectCounts(BaseModel):
    concepts: int
    pool_pairs: int
    asserted_labels: int
    inferred_positive: int
    inferred_negative: int
    undecided_pool_pairs: int


class QueryBounds(BaseModel):
    """Theorem 2: queries needed to label the positive relation known so far."""

    lower: int = Field(description="Size of the transitive reduction of the positives.")
    upper: int = Field(description="Number of positive pairs of the closure.")


class ProjectDetail(ProjectRead):
    counts: ProjectCounts
    query_bounds: QueryBounds


class ProjectList(BaseModel):
    items: list[ProjectRead]
    total: int


# ---------------------------------------------------------------------------- concepts
class ConceptIn(_Request):
    name: Name
    description: Description | None = None
    text: TextValue | None = Field(
        default=None, description="The concept's text (features are computed from it); "
        "\"\" removes it, absent keeps it.")


class ConceptsCreate(_Request):
    concepts: list[ConceptIn] = Field(max_length=MAX_ITEMS)


class ConceptRead(_Response):
    id: int
    name: str
    description: str | None


class ConceptsCreated(BaseModel):
    created: int = Field(description="How many of the posted names were new.")
    concepts: list[ConceptRead]


class ConceptPage(BaseModel):
    items: list[ConceptRead]
    total: int


# ---------------------------------------------------------------------------- pool pairs
class PairIn(_Request):
    a: Name
    b: Name
    features: list[FiniteFloat] | None = Field(
        default=None, min_length=1, max_length=MAX_FEATURES,
        description="Absent in a project whose features sporal computes (docs/features.md).")


class PairsCreate(_Request):
    pairs: list[PairIn] = Field(max_length=MAX_ITEMS)


class PairsCreated(BaseModel):
    created: int
    unchanged: int = Field(description="Pairs already registered with the same features.")
    feature_length: int | None


class PairRead(BaseModel):
    id: int
    a: str
    b: str
    features: list[float]
    status: Literal["positive", "negative", "undecided"]


class PairPage(BaseModel):
    items: list[PairRead]
    total: int


# ---------------------------------------------------------------------------- labels
MAX_DECIDED_LISTED = 1000
"""A label's answer lists at most this many of the pairs it decided."""


def label_value(positive: bool) -> LabelValue:
    """A label as answers write it; inside the service a label is the bool ``positive``."""
    return "positive" if positive else "negative"


class LabelIn(_Request):
    a: Name
    b: Name
    label: LabelValue = Field(description='"positive": a is a prerequisite of b.')
    annotator: Name | None = None
    source: Source | None = Field(
        default=None, description='Where the answer comes from (e.g. "labelstudio"); kept '
        'with the answer. Default "api" ("bulk" for bulk labels, "import" for a file).')

    @property
    def positive(self) -> bool:
        return self.label == "positive"


class BulkLabels(_Request):
    labels: list[LabelIn] = Field(max_length=MAX_ITEMS)


class LabelRef(BaseModel):
    """An asserted label, as cited by proofs (``id`` null for a label of the same import)."""

    id: int | None
    a: str
    b: str
    label: LabelValue


class DecidedPair(BaseModel):
    a: str
    b: str
    label: LabelValue
    source: Literal["inferred"] = "inferred"


class NewlyDecided(BaseModel):
    positive: int
    negative: int


class DisagreementRef(BaseModel):
    id: int
    state: Literal["opened", "closed", "open"] = Field(
        description="\"opened\": this answer opened it; \"closed\": this answer settled it; "
                    "\"open\": it stays open.")


class DisagreementPairRef(BaseModel):
    id: int
    a: str
    b: str
    state: Literal["opened", "closed", "open"] = Field(
        description="\"opened\": this answer opened it; \"closed\": this answer closed it; "
                    "\"open\": it stays open.")


class PendingPair(BaseModel):
    a: str
    b: str


class ConsensusAsOf(BaseModel):
    """How current a `consensus` project's labels are (docs/consensus.md, "Incremental
    consensus")."""

    as_of: int | None = Field(description="The project version of the last full consensus "
                              "of every live answer (every answer stored before it counted).")
    pending: list[PendingPair] = Field(
        default_factory=list, description="The pairs repaired locally since, with the last "
        "fit's accuracies held fixed: until the background refit, the labels may differ from a "
        "full recompute here (and on pairs answered both ways, whose decision the refitted "
        "accuracies may move). Empty: the labels are the full consensus of `as_of`.")


class LabelCreated(BaseModel):
    id: int = Field(description="The asserted label this answer created or agrees with "
                                "(0: none; in consensus, a disputed pair may have none).")
    answer_id: int | None = Field(default=None, description="The answer kept for this post "
                                  "(GET answers); a repeat by the same annotator keeps none.")
    a: str
    b: str
    label: LabelValue
    annotator: str | None
    created_at: datetime
    newly_decided: NewlyDecided
    decided: list[DecidedPair] = Field(
        description="The other pairs (any two concepts) this label newly decided: the first "
                    f"{MAX_DECIDED_LISTED:,} of `decided_total`; `decided_rest` pages the rest."
    )
    decided_total: int = Field(description="How many other pairs this label newly decided.")
    decided_rest: str | None = Field(
        default=None, description="Where to page every pair this label decided, when "
                                  "`decided` does not hold them all (GET labels?caused_by=ID)."
    )
    undecided: list[DecidedPair] = Field(
        default_factory=list, description="consensus: pairs this answer made undecided, or "
        "decided the other way (listed with their value before).")
    disagreement: DisagreementRef | None = Field(
        default=None, description="consensus: the disagreement this answer opened, joined or "
        "settled.")
    disagreements: list[DisagreementPairRef] = Field(
        default_factory=list, description="consensus: every disagreement this answer opened or "
        "closed on its pair or the reverse pair, and one that stays open there.")
    closed_others: int = Field(
        default=0, description="consensus: how many disagreements on other pairs the refit "
        "after this answer closed.")
    check_failed: bool = Field(
        default=False, description="This answer said negative to a pair decided positive "
        "through other concepts: show the annotator the question's definition again.")
    consensus: ConsensusAsOf | None = Field(
        default=None, description="consensus: how current the labels are after this answer "
        "(null in `strict`, or before any full consensus).")


class BulkLabelsCreated(BaseModel):
    created: int = Field(description="Labels stored (new asserted labels).")
    unchanged: int = Field(description="Labels that were already asserted the same way.")
    newly_decided: NewlyDecided
    labels: list[LabelRef]


class LabelRetracted(BaseModel):
    id: int
    a: str
    b: str
    label: LabelValue
    retracted_at: datetime
    undecided: int = Field(description="How many pairs became undecided.")


class LabelItem(BaseModel):
    a: str
    b: str
    label: LabelValue
    source: Literal["asserted", "inferred", "retracted"]
    id: int | None = Field(description="The asserted label's id (null when inferred).")
    caused_by: int | None = Field(
        description="The asserted label that decided the pair when the live labels are "
        "replayed in assertion order (null for retracted labels)."
    )
    annotator: str | None
    created_at: datetime | None
    retracted_at: datetime | None = None
    confidence: float | None = Field(
        default=None, description="How sure the decided pair is (as `pairs/status` says; null "
        "for a retracted label).")
    contested: bool = Field(
        default=False, description="The pair has an open disagreement (the map marks it).")


class LabelPage(BaseModel):
    items: list[LabelItem]
    total: int
    next: str | None = Field(
        default=None, description="The cursor of the next page (pass it as `after`); null "
        "on the last page.")
    consensus: ConsensusAsOf | None = Field(
        default=None, description="consensus: how current the labels are (null in `strict`, "
        "or before any full consensus).")


class ModelInfo(BaseModel):
    """The newest trained model that an answer used (models train in the background)."""

    name: str
    trained_on: int = Field(description="Labeled pool pairs the model was trained on.")
    positive: int
    negative: int
    version: int = Field(description="The project version the model was trained at.")
    labels_behind: int = Field(
        description="Labels asserted or retracted since the model was trained (0: current).")


class PairStatus(BaseModel):
    a: str
    b: str
    status: Literal["positive", "negative", "undecided"]
    source: Literal["asserted", "inferred"] | None
    proof: list[LabelRef] = Field(description="The asserted labels that decide the pair.")
    chains: list[list[str]] = Field(description="Paths of asserted positives used by the proof.")
    in_pool: bool
    prediction: float | None = Field(
        description="The prediction model's probability of positive (undecided pool pairs)."
    )
    confidence: float | None = Field(
        default=None, description="How sure the decided pair is (null: undecided): an asserted "
        "pair's label's posterior given the answers on it (strict: 1.0 when no live answer "
        "contradicts it); an inferred pair's, the weakest label of its strongest proof "
        "(docs/teams.md).")
    contested: bool = Field(
        default=False, description="The pair has an open disagreement (consensus).")
    model: ModelInfo | None = Field(
        default=None, description="The prediction model behind `prediction` (null: none yet).")


# ---------------------------------------------------------------------------- questions
QueryReason = Literal["new", "second-opinion", "disagreement"]


class Query(BaseModel):
    a: str
    b: str
    score: float | None
    gain_if_positive: float | None
    gain_if_negative: float | None
    reason: QueryReason = Field(
        default="new", description='Why this pair is asked: "new" (undecided; a check question '
        'says so too), "second-opinion" (decided on answers likely wrong that decide many pool '
        'pairs) or "disagreement" (a link of an open disagreement); always "new" in strict.')


class NextQueries(BaseModel):
    queries: list[Query]
    undecided: int = Field(description="Undecided pool pairs.")
    strategy: str
    model: ModelInfo | None = Field(description="null while no model can be trained (p = 0.5).")
    annotator: str | None = None
    reserved_until: datetime | None = Field(
        default=None, description="When the lease on the returned pairs ends (with annotator)."
    )


class SuggestionItem(BaseModel):
    """A question the service suggested, as logged when ``next`` answered."""

    id: int
    a: str
    b: str
    strategy: str
    score: float | None
    gain_if_positive: float | None
    gain_if_negative: float | None
    annotator: str | None
    version: int = Field(description="The project version the question was chosen at.")
    created_at: datetime


class SuggestionPage(BaseModel):
    items: list[SuggestionItem]
    total: int


class PredictionItem(BaseModel):
    a: str
    b: str
    label: LabelValue | None
    source: Literal["asserted", "inferred", "predicted", "forced"]
    probability: float | None = Field(
        description="1/0 for decided pairs, else the model's probability of positive."
    )


class PredictionPage(BaseModel):
    items: list[PredictionItem]
    total: int
    model: ModelInfo | None


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str = Field(description="The version of the running service.")
    database: str
    open_mode: bool = Field(description="True when no key is asked anywhere.")


# ---------------------------------------------------------------------------- texts and links
class LinkIn(_Request):
    source: Name = Field(description="The concept whose text refers to `target`.")
    target: Name


class LinksCreate(_Request):
    links: list[LinkIn] = Field(max_length=MAX_ITEMS)


class LinksChanged(BaseModel):
    created: int = Field(description="Links new to the project (or removed, for DELETE).")
    unchanged: int = Field(description="Links already there (or absent, for DELETE).")
    recomputed_pairs: int = Field(
        description="Pool pairs whose features were computed again (computed projects).")


class LinkPage(BaseModel):
    items: list[LinkIn]
    total: int


class SuggestedPair(BaseModel):
    a: str
    b: str
    similarity: float = Field(description="TF-IDF cosine of the two texts.")
    link_distance: int | None = Field(
        description="Links between them, either direction (null: more than 2).")


class PoolSuggestions(BaseModel):
    items: list[SuggestedPair]
    registered: int = Field(description="Pairs registered (with register=true).")


# ---------------------------------------------------------------------------- correcting data
class ConceptRename(_Request):
    name: Name
    new_name: Name


class ConceptDeleted(BaseModel):
    name: str
    pool_pairs: int = Field(description="Pool pairs of the concept, deleted with it.")
    answers_kept: int = Field(
        default=0, description="Answers on the concept, kept in the history (`GET .../answers`, "
        "the project export): retracted at the deletion, if they were not already.")


class ConceptsMerge(_Request):
    keep: Name = Field(description="The concept that stays.")
    merge: Name = Field(description="The concept merged into `keep` (it goes).")


class ConceptsMerged(BaseModel):
    keep: str
    merged: str
    labels_moved: int = Field(description="Live labels of `merge` now on `keep` (`strict`; in "
                              "`consensus` the consensus of the moved answers decides).")
    labels_dropped: int = Field(
        description="Live labels retracted: a duplicate of one on `keep`, or a negative "
        "between the two (`consensus`: every live label of `merge`, before the consensus "
        "is computed again).")
    pool_pairs_moved: int
    pool_pairs_dropped: int
    disagreements_opened: int = Field(
        default=0, description="`consensus`: disagreements the merged answers opened.")
    disagreements_closed: int = Field(
        default=0, description="`consensus`: disagreements the merge closed (reason `merge`), "
        "the merged concept's included.")


class AnnotatorCounts(BaseModel):
    annotator: str | None = Field(description="null: labels posted without an annotator.")
    answered: int = Field(description="accepted + retracted + refused + contested + "
                                      "excluded.")
    accepted: int = Field(description="Labels asserted and still live.")
    retracted: int = Field(description="Labels asserted, retracted since.")
    refused: int = Field(description="Answers refused as contradictions (409).")
    contested: int = Field(default=0, description="consensus: answers that dispute what was "
                                                  "decided (open to the consensus).")
    excluded: int = Field(default=0, description="consensus: live answers that do not count "
                                                 "(their annotator is excluded).")


class AnnotatorPage(BaseModel):
    items: list[AnnotatorCounts]
# ---------------------------------------------------------------------------- jobs
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobRead(BaseModel):
    """A job: heavy work of a project run in the background (`GET .../jobs/{id}`)."""

    id: int
    project_id: int
    kind: str = Field(description="What the job does (`recompute-features`).")
    state: JobState = Field(description="queued, running, then succeeded, failed or cancelled.")
    progress: float = Field(description="The share of the work done, 0 to 1.")
    message: str | None = Field(description="What the job is doing now, or why it ended.")
    reason: str | None = Field(description="Why a job was cancelled (`cancelled`, "
                               "`superseded`: a newer job replaced it while it was queued) or "
                               "failed without running to its end (`interrupted by a "
                               "restart`).")
    cancel_requested: bool = Field(description="A DELETE asked a running job to stop.")
    result: dict[str, object] | None = Field(
        description="A succeeded job's result: the answer the request would have given had it "
        "waited (e.g. `created`, `unchanged`, `recomputed_pairs`).")
    problem: Problem | None = Field(description="A failed job's RFC 9457 problem.")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    location: str = Field(description="This job's path.")


class JobAccepted(JobRead):
    """`202 Accepted`: the change is stored, the pool's features are recomputed by the job."""

    features: Literal["previous"] = Field(
        default="previous", description="Until the job succeeds, the pool keeps the features "
        "it had before the change (new pool pairs get features from the changed corpus).")
    stored: dict[str, object] = Field(
        description="What the request stored now (the synchronous answer's counts, "
        "`recomputed_pairs` 0).")


# ---------------------------------------------------------------------------- answers
AnswerOutcome = Literal["asserted", "agreed", "repeated", "refused", "contested", "excluded"]


class AnswerItem(BaseModel):
    """One answer as kept: the evidence the asserted labels are drawn from."""

    id: int
    a: str
    b: str
    label: LabelValue
    annotator: str | None = Field(description="null: posted without an annotator.")
    role: Literal["annotator", "reviewer"] = Field(
        description="\"reviewer\": a resolution of a disagreement, final for its pair.")
    source: str = Field(description="Where it came from: \"api\", \"bulk\", \"import\", "
                                    "\"review\", or what the client named (\"labelstudio\").")
    created_at: datetime
    outcome: AnswerOutcome = Field(
        description="\"asserted\": it asserted its pair; \"agreed\": it agreed with the label "
        "asserted there; \"repeated\": its annotator said it before; \"refused\": it "
        "contradicted the asserted labels (strict); \"contested\": it disputes what was "
        "decided (consensus); \"excluded\": its annotator is excluded, it does not count "
        "(consensus).")
    retracted_at: datetime | None = None


class AnswerPage(BaseModel):
    items: list[AnswerItem]
    next_cursor: str | None = Field(
        default=None, description="The cursor of the next page (pass it as `cursor`); null "
        "on the last page.")


class AccuracyInterval(BaseModel):
    estimate: float = Field(description="The estimated chance that an answer is right.")
    low: float = Field(description="The 95% interval's lower end.")
    high: float = Field(description="The 95% interval's upper end.")


class CheckCounts(BaseModel):
    asked: int = Field(description="Check questions answered: pairs decided positive only "
                                   "through two or more steps.")
    failed: int = Field(description="Of those, answered negative.")


class TrendWindow(BaseModel):
    answers: int = Field(description="Consecutive answers of the annotator in this window "
                                     "(20, the oldest window possibly fewer).")
    agreement: float = Field(description="The share of them that agrees with the consensus.")


class AnnotatorAgreementItem(BaseModel):
    annotator: str | None = Field(description="null: answers posted without an annotator.")
    answers: int = Field(description="The answers that count (per pair the latest).")
    agreement: float | None = Field(description="The share of them that agrees with the "
                                                "consensus (an answer on a pair it leaves "
                                                "undecided does not).")
    accuracy: AccuracyInterval | None
    checks: CheckCounts
    false_no: int = Field(description="Their \"no\" on pairs the consensus decides positive.")
    false_yes: int = Field(description="Their \"yes\" on pairs the consensus decides "
                                       "negative.")
    minority: int = Field(description="Their answers that disagree with the consensus "
                                      "(`false_no` + `false_yes`).")
    undecided: int = Field(description="Their answers on pairs the consensus leaves undecided "
                                       "(a tie).")
    minority_url: str = Field(description="Where their minority answers are listed: "
                                          "`GET answers` with `minority=true`.")
    shared_pairs: int = Field(description="Their pairs another annotator or a reviewer "
                                          "answered too.")
    rests_on_prior: bool = Field(description="Fewer than 10 of their answers are on a shared "
                                             "pair or a check question: `accuracy` is mostly "
                                             "the prior's (0.9), not their answers'.")
    identifiable: bool = Field(description="false: others contradict them only one answer "
                               "against one, and nothing (a third answer, a resolution, a check "
                               "question) says who is right, so their estimate and their "
                               "contradictors' are alike whoever is right.")
    trend: list[TrendWindow] = Field(description="Their agreement over windows of 20 "
                                     "consecutive answers, oldest first, the last ending at "
                                     "their latest answer (at most 10 windows).")
    note: str | None = Field(description="In words, why `accuracy` should not be read as is "
                                         "(rests on the prior, not identifiable); null when "
                                         "nothing needs saying.")
    excluded: bool = Field(default=False, description="Their answers do not count (`POST "
                           ".../annotators/{name}/exclude`): the consensus is the others'.")


class ReviewerItem(BaseModel):
    annotator: str | None = Field(description="Who resolved (the name given with the "
                                              "resolution).")
    resolutions: int = Field(description="Their live resolutions.")
    final: int = Field(description="The pairs where a resolution of theirs is the one that "
                                   "stands.")


class KappaItem(BaseModel):
    a: str | None
    b: str | None
    shared: int = Field(description="Pairs both annotators answered.")
    kappa: float | None = Field(description="Cohen's kappa over the shared pairs (null where "
                                            "undefined).")


class AgreementAsOf(BaseModel):
    """Which answers a view was computed from."""

    computed_at: datetime = Field(description="When the view was computed.")
    current: bool = Field(description="Computed from the answers as they are now. False: the "
                          "last view computed, served while a job (`job`) computes the next "
                          "(a project of at least `SPORAL_AGREEMENT_JOB_FROM` answers; "
                          "`?fresh=true` computes it in the request).")
    job: str | None = Field(default=None, description="The job computing the next view "
                            "(`GET` it for its state); null when current.")


class AgreementRead(BaseModel):
    """How far a project's annotators agree, with each other and with the consensus."""

    policy: PolicyName
    annotators: list[AnnotatorAgreementItem]
    pairs: list[KappaItem] = Field(description="Cohen's kappa per pair of annotators with at "
                                               "least 20 shared pairs.")
    alpha: float | None = Field(description="Krippendorff's alpha (nominal) over every "
                                            "annotator and pair; null when undefined.")
    answers: int = Field(description="Every live answer of the project.")
    reviewers: list[ReviewerItem] = Field(description="Who resolved disagreements, apart: a "
                                          "resolution is final for its pair, not scored "
                                          "against the consensus.")
    as_of: AgreementAsOf


__all__ += ["AccuracyInterval", "AgreementAsOf", "AgreementRead", "AnnotatorAgreementItem",
            "AnswerItem", "AnswerOutcome", "AnswerPage", "CheckCounts", "KappaItem", "ReviewerItem",
            "TrendWindow"]


# ---------------------------------------------------------------------------- teams
class ReviewerKeyRead(BaseModel):
    reviewer_key: str = Field(description="The project's new reviewer key (it resolves "
                              "disagreements and opens the project); the old one stops working.")


class DisagreementAnswer(BaseModel):
    """An answer on the pair of a disagreement."""

    id: int
    a: str
    b: str
    label: LabelValue
    annotator: str | None
    role: Literal["annotator", "reviewer"]
    source: str
    created_at: datetime
    outcome: str
    retracted_at: datetime | None = None


ClosedReason = Literal["answers", "reviewer", "retraction", "policy", "merge", "deletion",
                       "exclusion"]


class ResolutionItem(BaseModel):
    """One resolution of a disagreement: the reviewer's answer."""

    answer_id: int = Field(description="The reviewer's answer (GET answers).")
    annotator: str | None = Field(description="Who resolved it.")
    label: LabelValue = Field(description="The value the reviewer gave.")
    resolved_at: datetime
    undone_at: datetime | None = Field(
        description="When it was undone (its answer retracted); null: it stands.")


class DisagreementItem(BaseModel):
    id: int
    a: str
    b: str
    state: Literal["open", "closed"]
    opened_at: datetime
    closed_at: datetime | None
    closed_reason: ClosedReason | None = Field(
        default=None, description="Why it closed: later answers settled it (`answers`), a "
        "reviewer's resolution, its own or one whose refit settled it (`reviewer`), a "
        "retraction (`retraction`), a switch of policy (`policy`), a merge of concepts "
        "(`merge`: the merged pairs' consensus computed again, or the pair merged away), the "
        "deletion of one of its concepts (`deletion`); null while open.")
    reopened_at: datetime | None = Field(
        default=None, description="When a reviewer reopened it; while open after that, only "
        "a resolution (or a switch of policy) closes it.")
    resolutions: list[ResolutionItem] = Field(
        default_factory=list, description="Every resolution, oldest first, undone ones "
        "included.")
    consensus: LabelValue | None = Field(
        description="The pair's value in the consensus closure now (null: undecided).")
    positive: list[DisagreementAnswer] = Field(description="The live answers saying positive.")
    negative: list[DisagreementAnswer] = Field(description="The live answers saying negative.")
    proof: list[LabelRef] = Field(description="The asserted labels that decide the pair now.")
    chains: list[list[str]] = Field(description="The chains of concepts of the proof.")


class DisagreementPage(BaseModel):
    items: list[DisagreementItem]
    next_cursor: str | None = Field(
        default=None, description="The cursor of the next page (pass it as `cursor`); null "
        "on the last page.")


class DisagreementReviewed(DisagreementItem):
    """A disagreement after a reviewer's resolution, undo or reopening."""

    closed_others: int = Field(
        default=0, description="How many other disagreements the refit closed.")
    opened_others: int = Field(
        default=0, description="How many disagreements on other pairs the refit opened.")


__all__ += ["ClosedReason", "DisagreementPairRef", "DisagreementReviewed", "ResolutionItem"]


class Resolution(_Request):
    label: LabelValue = Field(description="The reviewer's value for the pair: final.")
    annotator: Name | None = Field(default=None, description="Who resolved it (kept with "
                                   "the reviewer's answer).")


class AnswerRetracted(BaseModel):
    id: int
    a: str
    b: str
    label: LabelValue
    retracted_at: datetime
    undecided: int = Field(description="How many pairs became undecided or changed value.")


# ---------------------------------------------------------------------------- people and roles
class AnnotatorKeyCreate(_Request):
    annotator: Name = Field(description="The person's name: every answer by this name is "
                            "theirs, earlier ones included.")


class AnnotatorKeyItem(_Response):
    annotator: str
    created_at: datetime


class AnnotatorKeyCreated(AnnotatorKeyItem):
    api_key: str = Field(description="The annotator's key, shown once (stored hashed); the "
                         "name's earlier key stops working now.")


class AnnotatorKeyPage(BaseModel):
    items: list[AnnotatorKeyItem] = Field(description="Every annotator with a live key, "
                                          "by name.")


class WhoAmI(BaseModel):
    role: Literal["admin", "project", "reviewer", "annotator"] = Field(description=(
        "What the key is: the admin key (anyone when keys are off), the project's key, its "
        "reviewer key or an annotator key."))
    annotator: str | None = Field(description="The annotator an annotator key speaks for "
                                              "(null for the other keys).")
    open: bool = Field(description="The service runs open (no keys asked anywhere).")


__all__ += ["AnnotatorKeyCreate", "AnnotatorKeyCreated", "AnnotatorKeyItem",
            "AnnotatorKeyPage", "WhoAmI"]


# ---------------------------------------------------------------------------- team actions
class AnnotatorExcluded(BaseModel):
    """What excluding (or including again) an annotator changed (consensus)."""

    annotator: str
    excluded: bool = Field(description="Whether their answers are excluded now.")
    changed: bool = Field(description="false: they were so already; nothing changed.")
    answers: int = Field(description="Their live answers that stopped counting (exclude) or "
                                     "count again (include).")
    labels_created: int = Field(description="Labels the consensus asserted anew.")
    labels_retracted: int = Field(description="Labels whose value left the consensus.")
    disagreements_opened: int
    disagreements_closed: int
    summary: str = Field(description="What changed, in one sentence.")


class AnnotatorReasked(BaseModel):
    """The pairs only one annotator answered, now second-opinion questions for the others."""

    annotator: str
    pairs: int = Field(description="Pairs re-asked now: `next` serves them to the other "
                                   "annotators (reason `second-opinion`) until one answers.")
    waiting: int = Field(description="Of this annotator's re-asked pairs (these and earlier "
                                     "ones), those still waiting for a second opinion.")
    summary: str = Field(description="What changed, in one sentence.")


__all__ += ["AnnotatorExcluded", "AnnotatorReasked"]


class WrongPairs(BaseModel):
    """An expected count of wrong pool pairs and its 90% interval."""

    estimate: float = Field(description="The expected number of wrong pairs.")
    low: int = Field(description="The interval's lower end (5% quantile).")
    high: int = Field(description="The interval's upper end (95% quantile).")


class QualityRead(BaseModel):
    """How many pool pairs of the map are likely wrong (``docs/teams.md#quality``)."""

    decided_wrong: WrongPairs = Field(
        description="Among the decided pool pairs, from each label's probability of being "
                    "wrong (one wrong label makes every pair it carries wrong).")
    predicted_wrong: WrongPairs | None = Field(
        description="Among the undecided pool pairs, were the map `predictions` completes "
                    "taken, from the prediction model's calibrated probabilities; null "
                    "before a model.")
    decided: int = Field(description="Pool pairs the labels decide.")
    undecided: int = Field(description="Pool pairs they leave undecided.")
    model: ModelInfo | None = Field(description="The prediction model used, if any.")


__all__ += ["QualityRead", "WrongPairs"]
