"""The embedded WikiText-2 training split: its reader, corpus specs that name it, and the recipe that
trains on it beside ptb-sample."""

from __future__ import annotations

import pytest

from syntaxformer.data.corpus import is_shipped_text, load_corpus
from syntaxformer.data.wikitext import WIKITEXT_2, paragraph_sentences, wikitext_2_sentences
from syntaxformer.errors import InputError
from syntaxformer.workflows.induce import InduceJob, induce_training, recipe_note, resolve_recipe


def test_a_paragraph_becomes_sentences_of_words():
    line = " The game 's real @-@ time battles , he said . It sold 1 @,@ 000 copies ( 3 @.@ 5 % ) ! "
    assert paragraph_sentences(line) == [
        ["The", "game", "'s", "real-time", "battles", "he", "said"],
        ["It", "sold", "1,000", "copies", "3.5", "%"],
    ]


@pytest.mark.parametrize("line", ["", "   ", " = Valkyria Chronicles III = ", " = = Gameplay = = "])
def test_headings_and_blank_lines_are_no_sentences(line):
    assert paragraph_sentences(line) == []


def test_a_paragraph_without_a_final_stop_keeps_its_last_sentence_and_loose_joiners_go():
    assert paragraph_sentences(" @-@ one , two <unk> & three ") == [["one", "two", "<unk>", "&", "three"]]


def test_the_embedded_split_has_the_counted_sentences_and_words():
    sentences = wikitext_2_sentences()
    assert len(sentences) == 76483 and sum(map(len, sentences)) == 1714120
    assert sentences[2] == tuple(
        "Released in January 2011 in Japan it is the third game in the Valkyria series".split()
    )


def test_a_spec_of_items_reads_each_in_order_with_the_one_normalisation():
    sample = load_corpus("ptb-sample:dev")
    both = load_corpus("ptb-sample:dev, wikitext-2")
    assert both[: len(sample)] == sample and len(both) == len(sample) + 76483
    assert both[len(sample) + 2] == "released in january N in japan it is the third game in the valkyria series".split()


def test_an_empty_spec_is_refused():
    with pytest.raises(InputError, match="empty corpus"):
        load_corpus(" , ")


@pytest.mark.parametrize(
    "spec, shipped",
    [
        ("ptb-sample", True),
        ("ptb-sample,wikitext-2", True),
        (WIKITEXT_2, True),
        ("ptb-sample:test", True),
        ("ptb-lm", False),
        ("ptb-sample,ptb.train.txt", False),
        ("", False),
    ],
)
def test_shipped_texts_need_no_file(spec, shipped):
    assert is_shipped_text(spec) is shipped


def test_the_default_recipe_is_the_sample_setting_on_more_text():
    sample, sample_overrides, sample_min_layer = resolve_recipe("tree-transformer", "sample")
    fields, overrides, min_layer = resolve_recipe("tree-transformer", "default")
    changed = {k: v for k, v in fields.items() if sample.get(k) != v}
    assert changed == {"corpus": "ptb-sample,wikitext-2", "max_vocab": 10000, "valid_fraction": 0.01, "max_steps": 6000}
    assert (overrides, min_layer) == (sample_overrides, sample_min_layer) == ({"constituent_variant": "official"}, 0)
    assert "note" not in fields and "right-branching" in recipe_note("tree-transformer", "default")
    assert recipe_note("tree-transformer", "sample") is None and recipe_note("structformer", "default") is None
    # a shipped text needs no --corpus; the ptb-lm text does
    assert induce_training(InduceJob(recipe="default"), {}).corpus == "ptb-sample,wikitext-2"
    assert induce_training(InduceJob(recipe="sample"), {}).corpus == "ptb-sample"
    with pytest.raises(InputError, match="the long recipe of tree-transformer trains on the ptb-lm .* not shipped"):
        induce_training(InduceJob(recipe="long"), {})
    given = induce_training(InduceJob(recipe="long"), {"corpus": "ptb.train.txt"})
    assert given.corpus == "ptb.train.txt" and given.preset == "small"
