"""The brackets a dependency tree implies (the out-of-domain protocol's gold on UD English-EWT),
checked against spans worked out by hand."""

from syntaxformer.evaluation.dependency import subtree_brackets


def test_projective_tree_gives_each_heads_yield():
    # the(1)->cat(2), cat->sat(3), sat root, on(4)->mat(6), the(5)->mat, mat->sat
    # yields: cat = "the cat" (0, 2); mat = "on the mat" (3, 6); sat = the whole sentence (excluded)
    assert subtree_brackets([2, 3, 0, 6, 6, 3]) == {(0, 2), (3, 6)}


def test_chains_give_the_branching_trees():
    # right chain (word i headed by i - 1): every suffix is a yield -> right-branching spans
    assert subtree_brackets([0, 1, 2, 3]) == {(1, 4), (2, 4)}
    # left chain (word i headed by i + 1): every prefix -> left-branching spans
    assert subtree_brackets([2, 3, 4, 0]) == {(0, 2), (0, 3)}


def test_a_non_projective_yield_is_left_out():
    # word 2 heads word 4 across word 3 (headed by 1): yield {2, 4} has a gap; word 1's yield {1, 3}
    # too; the root word 5 spans everything (excluded)
    assert subtree_brackets([5, 5, 1, 2, 0]) == set()


def test_short_sentences_have_no_brackets():
    assert subtree_brackets([0]) == set() and subtree_brackets([0, 1]) == set()
