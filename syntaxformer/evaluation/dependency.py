"""Unlabelled dependency accuracy: UAS and UUAS (DESIGN.md §4).

Conventions (named in every report by :data:`PROTOCOL`):

- Heads are 1-based, 0 = root (CoNLL-U).
- Punctuation tokens (marked by gold's ``punct``) are not scored. A gold head that is punctuation is
  replaced by its nearest non-punctuation ancestor (0 if there is none).
- The prediction of a sentence may cover all gold tokens, or only the non-punctuation tokens (what a
  model trained on punctuation-free text sees); which one is decided per sentence by the token count.
  Gold is reduced to its non-punctuation tokens (heads re-attached as above and renumbered), and a
  full-length prediction is reduced the same way, with gold's punctuation marks: a predicted head on
  a punctuation token is replaced by that token's nearest non-punctuation ancestor in the predicted
  tree (so gold scored against itself is 100 either way). A predicted head chain that cycles through
  punctuation only counts as wrong.
- **UAS**: scored tokens whose predicted head is the gold head, over all scored tokens (micro).
- **UUAS**: undirected edges, as StructFormer's evaluation code: each scored token ``i`` gives the edge
  ``{i, head(i)}`` (the root edge ``{i, 0}`` included); the number of gold edges also among the
  predicted edges (each distinct edge once), over the number of scored tokens (micro).

Scores are percentages (0-100).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from syntaxformer.data import normalise_word
from syntaxformer.errors import InputError

#: The convention every dependency number of this module follows.
PROTOCOL = (
    "unlabelled attachment: UAS (directed) and UUAS (undirected edges, root edge included), "
    "micro over tokens; punctuation not scored, a punctuation gold head replaced by its "
    "nearest non-punctuation ancestor"
)

#: The head of a predicted token whose head chain cycles through punctuation (never correct).
_CYCLE = -1


def reattach_heads(heads: Sequence[int], punct: Sequence[bool], on_cycle: int | None = None) -> list[int]:
    """Heads of the non-punctuation tokens after removing punctuation, renumbered (1-based, 0 root).

    A head that is punctuation is replaced by its nearest non-punctuation ancestor (0 = root if the
    chain of punctuation heads ends at the root).

    Args:
        heads: one head per token, 1-based, 0 = root.
        punct: one flag per token, ``True`` for punctuation.
        on_cycle: the head given to a token whose head chain cycles through punctuation tokens
            only; ``None`` raises instead.

    Returns:
        one head per non-punctuation token, in the renumbered (punctuation-free) indexing.

    Raises:
        InputError: a head out of range, or (when ``on_cycle`` is None) a cycle through punctuation.
    """
    n = len(heads)
    new_index = {0: 0}
    for i in range(n):
        if not punct[i]:
            new_index[i + 1] = len(new_index)
    out = []
    for i in range(n):
        if punct[i]:
            continue
        head, steps = heads[i], 0
        while True:
            if not 0 <= head <= n:
                raise InputError(f"token {i + 1}: head {head} out of range 0..{n}")
            if head == 0 or not punct[head - 1]:
                head = new_index[head]
                break
            head, steps = heads[head - 1], steps + 1
            if steps > n:
                if on_cycle is None:
                    raise InputError(f"token {i + 1}: its head chain cycles through punctuation")
                head = on_cycle
                break
        out.append(head)
    return out


def subtree_brackets(heads: Sequence[int]) -> set[tuple[int, int]]:
    """The unlabelled brackets a dependency tree implies: the yield (the word and all its
    descendants) of every word, as a half-open span ``(i, j)`` over 0-based word positions, kept when
    it is contiguous, at least two words long and not the whole sentence (the bracket convention of
    :func:`~syntaxformer.evaluation.constituency.sentence_f1`).

    This is the flattest phrase structure consistent with the dependency tree (each head projects
    one constituent over its yield; Collins et al. 1999, "flat" conversion; Xia & Palmer 2001): it
    lets a constituency parser be scored on a dependency treebank (UD English-EWT) beside the
    right- and left-branching trees. A non-projective word's yield has a gap and is left out.

    Args:
        heads: per word its 1-based head (0 = root), a tree.
    Returns:
        The set of spans.
    """
    n = len(heads)
    children = [[] for _ in range(n + 1)]
    for i, h in enumerate(heads, start=1):
        children[h].append(i)
    spans = set()
    for word in range(1, n + 1):
        stack, members = [word], []
        while stack:
            node = stack.pop()
            members.append(node)
            stack.extend(children[node])
        lo, hi = min(members), max(members)
        if hi - lo + 1 == len(members) and 2 <= len(members) < n:
            spans.add((lo - 1, hi))
    return spans


def evaluate_dependency(pred: Sequence, gold: Sequence, normalise: Callable[[str], str] | None = None) -> dict:
    """UAS and UUAS of predicted heads against gold dependency trees (module docstring).

    Args:
        pred: predicted ``DependencySentence`` objects (``words``, ``heads``; ``tags`` and ``punct``
            unused), each over all tokens of the gold sentence or over its non-punctuation tokens.
        gold: gold ``DependencySentence`` objects, same order, ``punct`` marking punctuation.
        normalise: word rule applied to both sides before the word check (default: the readers'
            ``normalise_word``).

    Returns:
        ``{"uas", "uuas"}`` in percent, ``"n_sentences"``, ``"n_tokens"`` (scored tokens),
        ``"protocol"``.

    Raises:
        InputError: different numbers of sentences; a sentence (1-based number in the message) whose
            length is neither the gold length nor its punctuation-free length, whose words differ, or
            whose heads are out of range.
    """
    if len(pred) != len(gold):
        raise InputError(
            f"the prediction has {len(pred)} sentences but the gold has {len(gold)} (sentences are aligned by order)",
            sentence=min(len(pred), len(gold)) + 1,
        )
    normalise = normalise or normalise_word
    correct = undirected = tokens = 0
    for k, (p, g) in enumerate(zip(pred, gold), start=1):
        punct = list(g.punct)
        keep = [i for i, is_punct in enumerate(punct) if not is_punct]
        n_pred = len(p.heads)
        if len(p.words) != n_pred:
            raise InputError(f"{len(p.words)} words but {n_pred} heads", sentence=k)
        if n_pred == len(g.words):
            gold_positions = range(len(g.words))
        elif n_pred == len(keep):
            gold_positions = keep
        else:
            raise InputError(
                f"predicted {n_pred} tokens; gold has {len(g.words)} tokens, {len(keep)} without punctuation",
                sentence=k,
            )
        for position, (pw, gi) in enumerate(zip(p.words, gold_positions), start=1):
            if normalise(pw) != normalise(g.words[gi]):
                raise InputError(f"token {position} differs: predicted {pw!r}, gold {g.words[gi]!r}", sentence=k)
        for position, h in enumerate(p.heads, start=1):
            if not 0 <= h <= n_pred:
                raise InputError(f"token {position}: predicted head {h} out of range 0..{n_pred}", sentence=k)
        try:
            gold_heads = reattach_heads(g.heads, punct)
        except InputError as e:
            raise InputError(f"gold: {e}", sentence=k) from None
        pred_heads = (
            reattach_heads(p.heads, punct, on_cycle=_CYCLE)
            if n_pred == len(g.words) and n_pred != len(keep)
            else list(p.heads)
        )
        correct += sum(ph == gh for ph, gh in zip(pred_heads, gold_heads))
        pred_edges = {frozenset((i, h)) for i, h in enumerate(pred_heads, start=1) if h != _CYCLE}
        gold_edges = {frozenset((i, h)) for i, h in enumerate(gold_heads, start=1)}
        undirected += len(pred_edges & gold_edges)
        tokens += len(gold_heads)
    return {
        "uas": 100 * correct / tokens if tokens else 0.0,
        "uuas": 100 * undirected / tokens if tokens else 0.0,
        "n_sentences": len(gold),
        "n_tokens": tokens,
        "protocol": PROTOCOL,
    }
