"""The spaCy pipeline component (syntaxformer/spacy_component.py) on ``spacy.blank("en")`` with the
``sentencizer`` (no spaCy model to download): the same trees as the parser on spaCy's tokens, benepar's
extensions (constituents, labels, children, parent), punctuation and whitespace tokens, batches, the
dependency heads of a StructFormer, serialisation, registration through the entry point, and the
package without spaCy."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

spacy = pytest.importorskip("spacy")

from spacy.tokens import Doc  # noqa: E402

from syntaxformer.decoding.spans import labelled_spans, to_bracketed  # noqa: E402
from syntaxformer.parser import load_parser  # noqa: E402
from syntaxformer.spacy_component import NonConstituentError  # noqa: E402

TEXT = "The old man sat on the bench. Dogs (big ones) bark!"


def _nlp(**config):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("syntaxformer", config=config)
    return nlp


@pytest.fixture(scope="module")
def tt():
    """The pipeline with the shipped Tree Transformer, and that parser."""
    return _nlp(model="tree-transformer-ptb-lm"), load_parser("tree-transformer-ptb-lm")


@pytest.fixture(scope="module")
def sf():
    """The pipeline with the shipped StructFormer, and that parser."""
    return _nlp(model="structformer-ptb-lm"), load_parser("structformer-ptb-lm")


def _tokens(sentence) -> list[str]:
    return [token.text for token in sentence]


def test_each_sentence_is_parsed_as_the_parser_parses_its_tokens(tt):
    nlp, parser = tt
    doc = nlp(TEXT)
    sentences = list(doc.sents)
    assert [_tokens(s) for s in sentences] == [
        ["The", "old", "man", "sat", "on", "the", "bench", "."],
        ["Dogs", "(", "big", "ones", ")", "bark", "!"],
    ]
    trees = parser.parse_sents([_tokens(s) for s in sentences])
    assert [s._.parse_string for s in sentences] == [to_bracketed(t) for t in trees]
    assert "(X -LRB-)" in sentences[1]._.parse_string  # brackets escaped as the treebank reader reads them
    # a batch through nlp.pipe gives the same parses as one Doc at a time
    piped = list(nlp.pipe([TEXT, "Dogs bark."]))
    assert [s._.parse_string for s in piped[0].sents] == [s._.parse_string for s in sentences]
    assert [s._.parse_string for s in piped[1].sents] == [to_bracketed(parser.parse(["Dogs", "bark", "."]))]


def test_constituents_are_the_trees_spans_in_pre_order(tt):
    nlp, parser = tt
    doc = nlp(TEXT)
    for sentence in doc.sents:
        tree = parser.parse(_tokens(sentence))
        expected = list(dict.fromkeys((sentence.start + i, sentence.start + j) for i, j, _ in labelled_spans(tree)))
        constituents = list(sentence._.constituents)
        assert [(c.start, c.end) for c in constituents] == expected
        assert constituents[0] == sentence
        assert sorted(expected, key=lambda s: (s[0], -s[1])) == expected  # pre-order: a span before its parts
        assert {(c.start, c.end) for c in constituents if len(c) == 1} == {(t.i, t.i + 1) for t in sentence}
        assert [c._.labels for c in constituents] == [("S",)] + [("X",) if len(c) > 1 else () for c in constituents[1:]]
        assert all(c._.parse_string.startswith("(X ") for c in constituents[1:])


def test_children_and_parent_agree(tt):
    nlp, _ = tt
    doc = nlp(TEXT)
    for sentence in doc.sents:
        assert sentence._.parent is None
        for constituent in sentence._.constituents:
            children = list(constituent._.children)
            if len(constituent) == 1:
                assert children == []
                continue
            # the children tile the constituent, left to right, and each has it as parent
            assert [c.start for c in children] == [constituent.start] + [c.end for c in children[:-1]]
            assert children[-1].end == constituent.end and len(children) >= 2
            assert all(child._.parent == constituent for child in children)
            assert list(constituent._.constituents)[1:] == [
                inner for child in children for inner in child._.constituents
            ]
    token = doc[1]  # "old"
    assert token._.parse_string == "(X old)" and token._.labels == ()
    assert token._.parent == doc[token.i : token.i + 1]._.parent
    assert token._.parent.start <= token.i < token._.parent.end


def test_a_span_that_is_no_constituent_and_a_doc_not_parsed_are_refused(tt):
    nlp, _ = tt
    doc = nlp(TEXT)
    across = doc[7:9]  # the period of the first sentence and the first word of the second
    for extension in ("parse_string", "labels", "parent"):
        with pytest.raises(NonConstituentError, match="7:9"):
            getattr(across._, extension)
    with pytest.raises(NonConstituentError):
        next(across._.constituents)
    unparsed = spacy.blank("en")("Dogs bark.")
    with pytest.raises(ValueError, match="add the 'syntaxformer' component"):
        unparsed[:]._.parse_string
    no_sentences = spacy.blank("en")
    no_sentences.add_pipe("syntaxformer", config={"model": "tree-transformer-ptb-lm"})
    with pytest.raises(ValueError, match="sentencizer"):
        no_sentences("Dogs bark.")


def test_whitespace_is_placed_as_punctuation_and_a_sentence_without_words_is_flat(tt):
    """A second space is a token of its own: kept from the model and placed as a comma in its place
    would be; the line break after the last sentence is a sentence of its own, with the flat tree."""
    nlp, _ = tt
    spaced = nlp("The old man sat  on the bench.\n")
    comma = nlp("The old man sat , on the bench.")
    first, last = list(spaced.sents)
    assert _tokens(first)[4] == " " and _tokens(last) == ["\n"]
    assert first._.parse_string == next(comma.sents)._.parse_string.replace("(X ,)", "(X _SP)")
    assert last._.parse_string == "(S _SP)" and last._.labels == ("S",) and list(last._.children) == []
    assert spaced[4]._.parent is not None and spaced[4]._.parse_string == "(X _SP)"


def test_a_tree_transformer_sets_no_heads(tt):
    nlp, _ = tt
    doc = nlp(TEXT)
    assert all(token._.syntaxformer_head is None for token in doc)
    assert not doc.has_annotation("DEP")


def test_a_structformer_sets_spacys_heads_and_keeps_the_sentences(sf):
    nlp, parser = sf
    doc = nlp(TEXT)
    sentences = list(doc.sents)
    rows = parser.parse_dependencies([_tokens(s) for s in sentences])
    expected = [
        s.start + (row["head"] - 1 if row["head"] else k)
        for s, sentence in zip(sentences, rows)
        for k, row in enumerate(sentence)
    ]
    assert [token._.syntaxformer_head.i for token in doc] == expected
    assert [token.head.i for token in doc] == expected
    deprels = [row["deprel"] for sentence in rows for row in sentence]
    assert [token.dep_ for token in doc] == [{"root": "ROOT"}.get(d, d) for d in deprels]
    assert [token.dep_ for token in doc].count("ROOT") == 2
    assert [(s.start, s.end) for s in doc.sents] == [(s.start, s.end) for s in sentences] == [(0, 8), (8, 15)]
    assert [s._.parse_string for s in doc.sents] == [
        to_bracketed(t) for t in parser.parse_sents([_tokens(s) for s in sentences])
    ]


def test_heads_of_another_parser_are_kept_only_with_set_heads_false(sf):
    nlp, _ = sf
    words, heads, deps = ["Dogs", "bark", "."], [1, 1, 1], ["nsubj", "ROOT", "punct"]
    with pytest.raises(ValueError, match="set_heads=False"):
        nlp.get_pipe("syntaxformer")(Doc(nlp.vocab, words=words, heads=heads, deps=deps))
    keep = _nlp(model="structformer-ptb-lm", set_heads=False).get_pipe("syntaxformer")
    doc = keep(Doc(nlp.vocab, words=words, heads=heads, deps=deps))
    assert [t.head.i for t in doc] == heads and [t.dep_ for t in doc] == deps
    assert doc[1]._.syntaxformer_head is not None and doc[:]._.labels == ("S",)


def test_the_parse_is_saved_with_the_doc(tt):
    nlp, _ = tt
    doc = nlp(TEXT)
    loaded = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    assert [s._.parse_string for s in loaded.sents] == [s._.parse_string for s in doc.sents]
    assert [[(c.start, c.end) for c in s._.children] for s in loaded.sents] == [
        [(c.start, c.end) for c in s._.children] for s in doc.sents
    ]


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_spacy_finds_the_factory_through_the_entry_point():
    (entry,) = [e for e in importlib.metadata.entry_points(group="spacy_factories") if e.name == "syntaxformer"]
    assert entry.value == "syntaxformer.spacy_component:make_component"
    # a fresh interpreter that never imports syntaxformer itself
    found = _python("import spacy, sys; print(spacy.blank('en').has_factory('syntaxformer'))")
    assert found.returncode == 0 and found.stdout.strip() == "True", found.stderr
    # ``import syntaxformer`` after spaCy registers it at once (spaCy reads the entry points only when it
    # builds a pipeline)
    registered = _python(
        "import spacy; before = 'syntaxformer' in spacy.registry.factories; import syntaxformer; "
        "print(before, 'syntaxformer' in spacy.registry.factories)"
    )
    assert registered.stdout.split() == ["False", "True"], registered.stderr


def test_the_package_works_without_spacy():
    code = (
        "import sys; sys.modules['spacy'] = None\n"  # spaCy absent: importing it fails
        "import syntaxformer\n"
        "print(syntaxformer.parse('Dogs bark.'))\n"
        "import syntaxformer.spacy_component\n"
    )
    result = _python(code)
    assert result.stdout.split() == ["(S", "(X", "Dogs)", "(X", "bark)", "(X", ".))"]
    assert "the spaCy component needs spaCy: pip install 'syntaxformer[spacy]'" in result.stderr
    assert result.returncode == 1
