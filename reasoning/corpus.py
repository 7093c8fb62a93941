"""Generated corpora: a random strict order with concept texts and links that follow it.

For measuring the features of :mod:`reasoning.features` where the truth is known. Each concept
of a :func:`~reasoning.generate.random_order` gets

* a title of one or two made-up words (unique);
* a few *related words* of its own (its topic);
* a text of about ``words`` words: a first sentence naming one of its direct prerequisites, then
  words drawn from its own related words, its prerequisites' related words and titles (direct
  prerequisites more often than the rest of its ancestors), a few titles of random other
  concepts (noise), and common filler words;
* links: each cover edge ``a ≺ b`` gives the link ``b -> a`` (b's text refers to its
  prerequisite) with probability ``link_probability``, and ``link_noise`` times as many links
  again are drawn between random concepts.

So the texts and links carry signal about the order, blurred by noise, as real ones do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reasoning.generate import GeneratedOrder, random_order

__all__ = ["GeneratedCorpus", "random_corpus"]

_CONSONANTS = list("bdfgklmnprstvz")
_VOWELS = list("aeiou")
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]  # 70


@dataclass(frozen=True, eq=False)
class GeneratedCorpus:
    """A random strict order with a title and a text per concept and links between them.

    Attributes
    ----------
    order : GeneratedOrder
        The order, its pool and the truth of each pool pair (concept ``i`` is index ``i``).
    titles, texts : list of str
        Concept ``i``'s title and text.
    links : array of shape (k, 2)
        Directed links ``(u, v)``: ``u``'s text refers to ``v``.
    """

    order: GeneratedOrder
    titles: list[str]
    texts: list[str]
    links: np.ndarray


def _made_up_words(count: int, rng: np.random.Generator) -> list[str]:
    """``count`` distinct pronounceable words of three syllables."""
    space = len(_SYLLABLES) ** 3
    if count > space:
        raise ValueError(f"at most {space} distinct words")
    codes = rng.choice(space, size=count, replace=False)
    s = len(_SYLLABLES)
    return [_SYLLABLES[c // (s * s)] + _SYLLABLES[(c // s) % s] + _SYLLABLES[c % s]
            for c in codes.tolist()]


def _parents_and_ancestors(order: GeneratedOrder) -> tuple[list[list[int]], list[list[int]]]:
    n = order.n
    parents: list[list[int]] = [[] for _ in range(n)]
    for a, b in order.covers.tolist():
        parents[b].append(a)
    reach = np.unpackbits(order.reach, axis=1, count=n).astype(bool)  # reach[a, b]: a ≺ b
    ancestors = [np.flatnonzero(reach[:, b]).tolist() for b in range(n)]
    return parents, ancestors


def random_corpus(n: int, pool_size: int, *, words: int = 200, related: int = 5,
                  link_probability: float = 0.7, link_noise: float = 0.3,
                  positive_share: float | None = 0.3, depth: int = 6, degree: float = 2.0,
                  random_state=None) -> GeneratedCorpus:
    """Draw a random strict order with its pool, texts and links.

    Parameters
    ----------
    n, pool_size : int
        Concepts and pool pairs (as :func:`~reasoning.generate.random_order`).
    words : int, default 200
        Words of each text (at least 10).
    related : int, default 5
        Related words of each concept.
    link_probability : float, default 0.7
        Chance that a cover edge ``a ≺ b`` gives the link ``b -> a``.
    link_noise : float, default 0.3
        Random links added, as a share of the links that follow the order.
    positive_share : float, optional, default 0.3
    depth, degree : as :func:`~reasoning.generate.random_order`
    random_state : int or numpy.random.Generator, optional

    Returns
    -------
    GeneratedCorpus

    Examples
    --------
    >>> corpus = random_corpus(30, 100, words=40, random_state=0)
    >>> len(corpus.texts), len(corpus.texts[0].split()) >= 40, corpus.links.shape[1]
    (30, True, 2)
    """
    if words < 10:
        raise ValueError("a text needs at least 10 words")
    rng = np.random.default_rng(random_state)
    order = random_order(n, pool_size, degree=degree, depth=depth,
                         positive_share=positive_share, random_state=rng)
    title_words = rng.integers(1, 3, size=n)
    vocabulary = _made_up_words(int(title_words.sum()) + n * related + 500, rng)
    cut = int(title_words.sum())
    ends = np.cumsum(title_words)
    titles = [" ".join(vocabulary[end - size: end])
              for end, size in zip(ends.tolist(), title_words.tolist(), strict=True)]
    own = np.array(vocabulary[cut: cut + n * related], dtype=object).reshape(n, related)
    filler = np.array(vocabulary[cut + n * related:], dtype=object)
    parents, ancestors = _parents_and_ancestors(order)
    titles_array = np.array(titles, dtype=object)
    texts = []
    for c in range(n):
        head = titles[c].capitalize()
        first = (f"{head} builds on {titles[int(rng.choice(parents[c]))]}." if parents[c]
                 else f"{head} is a first notion.")
        body = _body(c, words, own, filler, titles_array, parents[c], ancestors[c], rng)
        texts.append(first + "\n\n" + " ".join(body.tolist()) + ".")
    links = _links(order, link_probability, link_noise, rng)
    return GeneratedCorpus(order, titles, texts, links)


def _body(c: int, words: int, own: np.ndarray, filler: np.ndarray, titles: np.ndarray,
          parents: list[int], ancestors: list[int], rng: np.random.Generator) -> np.ndarray:
    """The words of concept ``c``'s text after its first sentence, shuffled."""
    n = len(titles)
    parts = [rng.choice(own[c], size=words // 5)]
    for group, share in ((parents, 0.08), (ancestors, 0.04)):
        if group:
            parts.append(rng.choice(own[group].ravel(), size=int(words * share)))
            parts.append(titles[rng.choice(group, size=max(1, int(words * share / 4)))])
    parts.append(titles[rng.integers(0, n, size=max(1, words // 100))])  # noise mentions
    used = sum(len(p) for p in parts)
    parts.append(rng.choice(filler, size=max(0, words - used)))
    body = np.concatenate(parts)
    return body[rng.permutation(len(body))]


def _links(order: GeneratedOrder, probability: float, noise: float,
           rng: np.random.Generator) -> np.ndarray:
    covers = order.covers
    kept = covers[rng.random(len(covers)) < probability][:, ::-1]  # b -> a
    extra = int(round(noise * len(kept)))
    random_links = rng.integers(0, order.n, size=(extra, 2))
    random_links = random_links[random_links[:, 0] != random_links[:, 1]]
    return np.concatenate([kept, random_links]).astype(np.int64).reshape(-1, 2)
