"""Readers on real data (the embedded ptb-sample; ../shared/data when present) and on bad input."""

from __future__ import annotations

import io
import logging
import re
from collections import Counter

import conllu
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from syntaxformer.data import (
    WORD_TAGS,
    DependencySentence,
    Preprocessing,
    load_corpus,
    load_gold_trees,
    normalise_word,
    parse_bracketed,
    preprocess_tree,
    ptb_sample_members,
    read_conllu,
    read_dependencies,
    read_ptb_dependency,
    read_text,
    read_treebank,
    split_label,
    strip_function_tag,
    write_conllu,
)
from syntaxformer.data.dependency import is_conllu_file, parse_conllu
from syntaxformer.decoding.spans import brackets, to_bracketed
from syntaxformer.errors import InputError

FIRST_WORDS = "pierre vinken N years old will join the board as a nonexecutive director nov. N"


@pytest.fixture(scope="module")
def ptb_raw():
    return read_treebank("ptb-sample")


@pytest.fixture(scope="module")
def ptb_dep():
    return read_dependencies("ptb-sample")


# --- embedded sample -----------------------------------------------------------------------------


def test_embedded_members():
    combined = ptb_sample_members("combined")
    dependency = ptb_sample_members("dependency")
    assert len(combined) == len(dependency) == 199
    assert [name for name, _ in combined][:2] == ["combined/wsj_0001.mrg", "combined/wsj_0002.mrg"]
    assert dependency[-1][0] == "dependency/wsj_0199.dp"
    assert [n for n, _ in combined] == sorted(n for n, _ in combined)
    assert combined[0][1].lstrip().startswith("( (S")
    with pytest.raises(ValueError):
        ptb_sample_members("nonsense")


# --- treebank reader -----------------------------------------------------------------------------


def test_ptb_sample_counts(ptb_raw):
    assert len(ptb_raw) == 3914
    assert sum(len(t.leaves()) for t in ptb_raw) == 100_676
    assert sum(1 for t in ptb_raw for _, tag in t.pos() if tag != "-NONE-") == 94_084
    # Trees are raw: the outer unlabelled bracket is kept, as nltk parses it.
    assert {t.label() for t in ptb_raw} == {""}
    assert ptb_raw[0][0].label() == "S" and ptb_raw[0][0][0].label() == "NP-SBJ"


def test_read_treebank_folder_file_glob_match_embedded(ptb_raw, shared_data):
    combined = shared_data / "ptb-sample" / "combined"
    assert read_treebank(combined) == ptb_raw
    assert read_treebank(str(combined / "wsj_0001.mrg")) == ptb_raw[:2]
    assert (
        read_treebank(str(combined / "wsj_000[12].mrg"))
        == ptb_raw[: len(read_treebank(combined / "wsj_0001.mrg")) + len(read_treebank(combined / "wsj_0002.mrg"))]
    )


def test_parse_bracketed_one_per_line_and_multiline():
    multi = "( (S\n  (NP (DT The) (NN dog))\n  (VP (VBZ barks)) ))\r\n\r\n(S (NN hi))\n"
    trees = parse_bracketed(multi)
    assert trees == [Tree.fromstring("((S (NP (DT The) (NN dog)) (VP (VBZ barks))))"), Tree.fromstring("(S (NN hi))")]
    assert parse_bracketed("(A a b)\n(B c)\n(C (D d))") == [
        Tree("A", ["a", "b"]),
        Tree("B", ["c"]),
        Tree("C", [Tree("D", ["d"])]),
    ]


def test_folder_without_mrg_reads_all_files(tmp_path):
    (tmp_path / "b.txt").write_text("(S (NN b))\n")
    (tmp_path / "a.trees").write_text("(S (NN a))\n")
    (tmp_path / ".hidden").write_text("junk")
    assert [t.leaves() for t in read_treebank(tmp_path)] == [["a"], ["b"]]
    (tmp_path / "z.mrg").write_text("(S (NN z))\n")
    assert [t.leaves() for t in read_treebank(tmp_path)] == [["z"]]


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("(S (NN a))\n\n(S (NP (NN b)\n  (VP (VB c))\n", 3, "unbalanced"),  # a tree never closed
        ("(S (NN a))\n(S (NN b)))\n", 2, "unbalanced"),  # a stray ')'
        ("(S (NN a))\nhello\n(S (NN b))\n", 2, "outside any tree"),  # garbage between trees
        ("(S (NN a))\n\n  trailing", 3, "outside any tree"),  # garbage after the last
    ],
)
def test_malformed_brackets_name_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "bad.mrg"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        read_treebank(path)
    assert info.value.path == str(path) and info.value.line == line
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_treebank_not_utf8(tmp_path):
    path = tmp_path / "latin1.mrg"
    path.write_bytes(b"(S (NN a))\n(S (NN caf\xe9))\n")
    with pytest.raises(InputError, match="not UTF-8") as info:
        read_treebank(path)
    assert (info.value.path, info.value.line) == (str(path), 2)


def test_treebank_empty_missing_and_unmatched_glob(tmp_path):
    empty = tmp_path / "empty.mrg"
    empty.write_text("\n  \n")
    with pytest.raises(InputError, match="no trees found") as info:
        read_treebank(empty)
    assert info.value.path == str(empty)
    with pytest.raises(InputError, match="no such treebank") as info:
        read_treebank(tmp_path / "missing.mrg")
    assert info.value.path == str(tmp_path / "missing.mrg")
    with pytest.raises(InputError, match="no treebank file matches") as info:
        read_treebank(str(tmp_path / "*.nothing"))
    assert info.value.path == str(tmp_path / "*.nothing")
    with pytest.raises(InputError, match="no trees found"):
        parse_bracketed("")


# --- preprocessing -------------------------------------------------------------------------------


def test_word_tags_are_the_36_of_design():
    assert len(WORD_TAGS) == 36
    assert {"NN", "PRP$", "WP$", "SYM", "LS", "POS", "TO"} <= WORD_TAGS
    assert not {",", ".", "$", "#", "-NONE-", "-LRB-", "``", "''", ":"} & WORD_TAGS


def test_normalise_word():
    assert normalise_word("Pierre") == "pierre"
    assert normalise_word("61") == normalise_word("1.5") == normalise_word("mid-1980s") == "N"
    assert normalise_word("<unk>") == "<unk>" and normalise_word("N") == "N"
    assert normalise_word("Pierre", lowercase=False) == "Pierre"
    assert normalise_word("1.5", digits_to_n=False) == "1.5"
    for word in ("Pierre", "1.5", "N", "<unk>", "Nov."):  # idempotent
        assert normalise_word(normalise_word(word)) == normalise_word(word)


def test_strip_function_tags():
    assert strip_function_tag("NP-SBJ-1") == "NP"
    assert strip_function_tag("PP-CLR") == "PP"
    assert strip_function_tag("NP=2") == "NP"
    assert strip_function_tag("S-TPC-1") == "S"
    for kept in ("-NONE-", "-LRB-", "-RRB-", "NP", "PRP$", ""):
        assert strip_function_tag(kept) == kept
    assert split_label("S+VP") == ["S", "VP"] and split_label("NP") == ["NP"]


def test_first_sentence_preprocessed(ptb_gold):
    first = ptb_gold[0]
    assert " ".join(first.leaves()) == FIRST_WORDS
    assert first == Tree.fromstring(
        "(S (NP (NP (NNP pierre) (NNP vinken)) (ADJP (NP (CD N) (NNS years)) (JJ old)))"
        " (VP (MD will) (VP (VB join) (NP (DT the) (NN board))"
        " (PP (IN as) (NP (DT a) (JJ nonexecutive) (NN director))) (NP (NNP nov.) (CD N)))))"
    )
    assert first.pos()[0] == ("pierre", "NNP")


def test_ptb_gold_counts(ptb_gold, ptb_raw):
    # No ptb-sample tree is left without words: all 3,914 kept, in order.
    assert len(ptb_gold) == 3914 and ptb_gold.skipped == () and ptb_gold.n_input == 3914
    assert ptb_gold.numbers == tuple(range(1, 3915))
    assert sum(len(t.leaves()) for t in ptb_gold) == 82_369
    assert sum(1 for t in ptb_raw for _, tag in t.pos() if tag in WORD_TAGS) == 82_369
    assert all(tag in WORD_TAGS for t in ptb_gold for _, tag in t.pos())
    phrasal = Counter(node.label() for t in ptb_gold for node in t.subtrees() if node.label() not in WORD_TAGS)
    # Function tags stripped, traces gone, unary chains joined outer-first with "+".
    assert all(re.fullmatch(r"[A-Z|]+(\+[A-Z|]+)*", label) for label in phrasal), phrasal
    assert (phrasal["NP"], phrasal["VP"], phrasal["S+VP"], phrasal["SBAR+S"]) == (30_341, 12_099, 2_217, 725)
    # Unary chains are collapsed: no phrasal node has a single phrasal child.
    for t in ptb_gold:
        for node in t.subtrees():
            if len(node) == 1 and isinstance(node[0], Tree):
                assert all(isinstance(c, str) for c in node[0]), node


def test_right_branching_sentence_f1_is_design_reference(ptb_gold):
    """Sentence-level F1 of right-branching trees = 39.91 (DESIGN.md §4): checks the preprocessing."""
    scores = []
    for tree in ptb_gold:
        n = len(tree.leaves())
        gold, pred = brackets(tree), {(i, n) for i in range(1, n - 1)}
        hit = len(gold & pred)
        recall = hit / len(gold) if gold else 1.0
        precision = hit / len(pred) if pred else 1.0
        scores.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    assert round(100 * sum(scores) / len(scores), 2) == 39.91


TRACE_TREE = "( (S (NP-SBJ-1 (-NONE- *)) (VP (VBD Ran) (ADVP-MNR (RB fast)) (NP (CD 1,000) (NNS miles))) (. .)) )"


def test_preprocess_switches():
    raw = Tree.fromstring(TRACE_TREE)
    assert preprocess_tree(raw) == Tree.fromstring("(S+VP (VBD ran) (ADVP (RB fast)) (NP (CD N) (NNS miles)))")
    assert raw == Tree.fromstring(TRACE_TREE)  # input unchanged
    assert preprocess_tree(raw, Preprocessing(collapse_unary=False)) == Tree.fromstring(
        "(S (VP (VBD ran) (ADVP (RB fast)) (NP (CD N) (NNS miles))))"
    )
    assert preprocess_tree(raw, Preprocessing(strip_function_tags=False)) == Tree.fromstring(
        "(S+VP (VBD ran) (ADVP-MNR (RB fast)) (NP (CD N) (NNS miles)))"
    )
    assert preprocess_tree(raw, Preprocessing(lowercase=False, digits_to_n=False)).leaves() == [
        "Ran",
        "fast",
        "1,000",
        "miles",
    ]
    assert preprocess_tree(raw, Preprocessing(word_tags=False)) == Tree.fromstring(
        "(S (NP (-NONE- *)) (VP (VBD ran) (ADVP (RB fast)) (NP (CD N) (NNS miles))) (. .))"
    )
    assert preprocess_tree(raw, Preprocessing(delete_empty=False, collapse_unary=False)) == Tree(
        "S", [Tree("NP", []), Tree.fromstring("(VP (VBD ran) (ADVP (RB fast)) (NP (CD N) (NNS miles)))")]
    )
    # A ROOT wrapper (other tools) is removed like the PTB's empty outer bracket.
    assert preprocess_tree(Tree.fromstring("(ROOT (S (NN a) (NN b)))")) == Tree.fromstring("(S (NN a) (NN b))")
    # Words without a preterminal (predicted trees) are kept and normalised.
    assert preprocess_tree(Tree.fromstring("(S (X The dog) barks)")) == Tree.fromstring("(S (X the dog) barks)")


def test_preprocess_no_word_left_is_none():
    assert preprocess_tree(Tree.fromstring("( (FRAG (. .) (-NONE- *T*-1)) )")) is None


def test_load_gold_trees_reports_skipped(tmp_path, caplog):
    path = tmp_path / "g.mrg"
    path.write_text("( (S (NN a) (NN b)) )\n( (FRAG (: --) (. .)) )\n( (S (NN c)) )\n")
    with caplog.at_level(logging.WARNING):
        gold = load_gold_trees(path)
    assert [t.leaves() for t in gold] == [["a", "b"], ["c"]]
    assert gold.skipped == (2,) and gold.numbers == (1, 3) and gold.n_input == 3
    assert "1 sentence(s) have no word left" in caplog.text and ": 2" in caplog.text


# --- bracket string round trip -------------------------------------------------------------------

_LABEL = st.text("ABCNPSV-+$", min_size=1, max_size=5)
_WORD = st.text(st.characters(blacklist_categories=("Z", "C"), blacklist_characters="()"), min_size=1, max_size=6)


def _trees(depth):
    if depth == 0:
        return st.builds(lambda label, words: Tree(label, words), _LABEL, st.lists(_WORD, min_size=1, max_size=3))
    return st.builds(
        lambda label, kids: Tree(label, kids),
        _LABEL,
        st.lists(st.one_of(_WORD, _trees(depth - 1)), min_size=1, max_size=3),
    )


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 3).flatmap(_trees))
def test_to_bracketed_round_trips(tree):
    text = to_bracketed(tree)
    assert "\n" not in text
    assert parse_bracketed(text) == [tree]
    assert parse_bracketed(f"{text}\n{text}\n") == [tree, tree]


def test_to_bracketed_escapes_brackets_in_words():
    tree = Tree("S", [Tree("X", ["(", "a)b"])])
    assert parse_bracketed(to_bracketed(tree)) == [Tree("S", [Tree("X", ["-LRB-", "a-RRB-b"])])]


# --- dependencies --------------------------------------------------------------------------------


def test_ptb_sample_dependencies_match_trees(ptb_dep, ptb_raw, ptb_gold):
    assert len(ptb_dep) == 3914
    assert sum(len(s) for s in ptb_dep) == 94_084 and sum(sum(s.punct) for s in ptb_dep) == 11_715
    for number, (sentence, raw, gold) in enumerate(zip(ptb_dep, ptb_raw, ptb_gold), start=1):
        pos = [(w, t) for w, t in raw.pos() if t != "-NONE-"]
        assert list(zip(sentence.words, sentence.tags)) == pos, number
        assert [normalise_word(w) for w, p in zip(sentence.words, sentence.punct) if not p] == gold.leaves(), number
        assert sentence.heads.count(0) == 1, number
    first = ptb_dep[0]
    assert first.words[:3] == ("Pierre", "Vinken", ",") and first.heads[:3] == (2, 8, 2)
    assert first.punct[:3] == (False, False, True) and first.heads[7] == 0


def test_dependency_folder_and_glob(ptb_dep, shared_data):
    folder = shared_data / "ptb-sample" / "dependency"
    assert read_dependencies(folder) == ptb_dep
    assert read_dependencies(str(folder / "wsj_000[1-2].dp")) == read_ptb_dependency(
        folder / "wsj_0001.dp"
    ) + read_ptb_dependency(folder / "wsj_0002.dp")


CONLLU = """# sent_id = a
# text = Don't go.
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t3:conj\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

1\t$\t$\tSYM\t$\t_\t0\troot\t_\t_
"""


def test_conllu_skips_ranges_and_empty_nodes():
    first, second = parse_conllu(CONLLU)
    assert first == DependencySentence(
        ("Do", "n't", "go", "."),
        ("AUX", "PART", "VERB", "PUNCT"),
        (3, 3, 0, 3),
        (False, False, False, True),
        ("aux", "advmod", "root", "punct"),
    )
    assert second.punct == (False,)  # SYM is scored; only PUNCT is punctuation


@pytest.mark.parametrize(
    "name, text, line, message",
    [
        ("h.dp", "a\tDT\t2\nb\tNN\t0\n\nc\tNN\t0\nd\tNN\t3\n", 5, "out of range"),
        ("n.dp", "a\tDT\t2\nb\tNN\tx\n", 2, "not an integer"),
        ("f.dp", "a\tDT\t2\nb NN 0\n", 2, "expected 'word TAB tag TAB head'"),
        ("h.conllu", "# c\n1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n2\tb\t_\tX\t_\t_\t7\tdep\t_\t_\n", 3, "out of range"),
        ("n.conllu", "1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n2\tb\t_\tX\t_\t_\tfoo\tdep\t_\t_\n", 2, "malformed CoNLL-U"),
        ("u.conllu", "1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n2\tb\t_\tX\t_\t_\t_\tdep\t_\t_\n", 2, "not an integer"),
        ("r.conllu", "1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n\n1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_\n", 3, "no tokens"),
        ("s.conllu", "1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n3\tb\t_\tX\t_\t_\t1\tdep\t_\t_\n", 2, "out of sequence"),
        ("c.conllu", "1\ta\t_\tX\t_\t_\t0\troot\n", 1, "10 tab-separated"),
    ],
)
def test_malformed_dependencies_name_file_and_line(tmp_path, name, text, line, message):
    path = tmp_path / name
    path.write_text(text)
    reader = read_conllu if name.endswith(".conllu") else read_ptb_dependency
    for read in (reader, read_dependencies):
        with pytest.raises(InputError, match=message) as info:
            read(path)
        assert (info.value.path, info.value.line) == (str(path), line)


def test_dependencies_empty_and_missing(tmp_path):
    for name in ("e.dp", "e.conllu"):
        (tmp_path / name).write_text("\n\n")
        with pytest.raises(InputError, match="no sentences") as info:
            read_dependencies(tmp_path / name)
        assert info.value.path == str(tmp_path / name)
    with pytest.raises(InputError, match="no such") as info:
        read_conllu(tmp_path / "missing.conllu")
    assert info.value.path == str(tmp_path / "missing.conllu")
    with pytest.raises(InputError, match="no such"):
        read_dependencies(tmp_path / "missing")
    with pytest.raises(InputError, match="no dependency file matches"):
        read_dependencies(str(tmp_path / "*.nothing"))


def test_format_sniffed_for_other_extensions(tmp_path):
    (tmp_path / "x.txt").write_text(CONLLU)
    assert read_dependencies(tmp_path / "x.txt") == parse_conllu(CONLLU)
    (tmp_path / "y.txt").write_text("a\tDT\t2\nb\tNN\t0\n")
    assert read_dependencies(tmp_path / "y.txt")[0].heads == (2, 0)
    # the same guess answers is_conllu_file (the probe's choice of reader); a .dp file, a folder,
    # a constituency treebank and a corpus name are not CoNLL-U
    (tmp_path / "z.dp").write_text(CONLLU)
    (tmp_path / "t.mrg").write_text("( (S (NP (DT a)) (VP (VBZ b))) )\n")
    assert is_conllu_file(tmp_path / "x.txt") and is_conllu_file(tmp_path / "missing.conllu")
    (tmp_path / "folder.conllu").mkdir()
    assert not any(
        is_conllu_file(p)
        for p in (
            tmp_path / "y.txt",
            tmp_path / "z.dp",
            tmp_path / "t.mrg",
            tmp_path,
            tmp_path / "folder.conllu",
            "ptb-sample:dev",
        )
    )


def test_write_conllu_round_trips(ptb_dep, tmp_path):
    sample = ptb_dep[:300] + parse_conllu(CONLLU)
    path = tmp_path / "out.conllu"
    write_conllu(sample, path)
    back = read_conllu(path)
    assert [(s.words, s.heads, s.punct) for s in back] == [(s.words, s.heads, s.punct) for s in sample]
    assert back[-2:] == sample[-2:]  # UPOS tags survive
    parsed = conllu.parse(path.read_text())
    assert len(parsed) == 302
    assert [t["head"] for t in parsed[0]] == list(ptb_dep[0].heads)
    assert parsed[0][7]["deprel"] == "root" and parsed[0][0]["deprel"] == "dep"
    assert parsed[0][0]["upos"] == "PROPN" and parsed[0][0]["xpos"] == "NNP"
    assert parsed[0][2]["upos"] == "PUNCT"
    buffer = io.StringIO()
    write_conllu(sample, buffer)
    assert buffer.getvalue() == path.read_text()


def test_ud_ewt(shared_data):
    ewt = shared_data / "ud-ewt"
    dev = read_conllu(ewt / "en_ewt-ud-dev.conllu")
    assert len(dev) == 2_001 and len(read_conllu(ewt / "en_ewt-ud-test.conllu")) == 2_077
    assert sum(map(len, dev)) == 25_147  # syntactic words (multiword ranges, empty nodes skipped)
    assert all(s.heads.count(0) == 1 for s in dev)
    buffer = io.StringIO()
    write_conllu(dev, buffer)
    assert parse_conllu(buffer.getvalue()) == dev


# --- raw text and corpora ------------------------------------------------------------------------


def test_read_text(tmp_path, caplog):
    path = tmp_path / "t.txt"
    path.write_text("The dog  barks .\n\n   \n 61 cats\n")
    with caplog.at_level(logging.INFO):
        assert read_text(path) == [["The", "dog", "barks", "."], ["61", "cats"]]
    assert "2 blank line(s) skipped" in caplog.text
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    with pytest.raises(InputError, match="no sentences") as info:
        read_text(empty)
    assert info.value.path == str(empty)
    with pytest.raises(InputError, match="no such") as info:
        read_text(tmp_path / "missing.txt")
    assert info.value.path == str(tmp_path / "missing.txt")
    with pytest.raises(InputError, match=r"^.+: a folder, not a text file \(one sentence per line\)$") as info:
        read_text(tmp_path)
    assert info.value.path == str(tmp_path)


def test_load_corpus(tmp_path, ptb_gold):
    sample = load_corpus("ptb-sample")
    assert len(sample) == 3914 and " ".join(sample[0]) == FIRST_WORDS
    assert sample == [t.leaves() for t in ptb_gold]
    (tmp_path / "a.txt").write_text("The <unk> rose 1.5 %\n")
    (tmp_path / "b.txt").write_text("Mr. Vinken\n")
    expected = [["the", "<unk>", "rose", "N", "%"], ["mr.", "vinken"]]
    assert load_corpus(f"{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}") == expected
    assert load_corpus(str(tmp_path / "*.txt")) == expected
    assert load_corpus(str(tmp_path / "a.txt"), Preprocessing(lowercase=False, digits_to_n=False)) == [
        ["The", "<unk>", "rose", "1.5", "%"]
    ]
    with pytest.raises(InputError, match="no text file matches"):
        load_corpus(str(tmp_path / "*.nothing"))
    with pytest.raises(InputError, match="no such"):
        load_corpus(str(tmp_path / "missing.txt"))


def test_load_corpus_ptb_lm(shared_data):
    train = load_corpus(str(shared_data / "ptb-lm" / "ptb.train.txt"))
    assert len(train) == 42_068 and sum(map(len, train)) == 887_521
    assert train[1] == [
        "pierre",
        "<unk>",
        "N",
        "years",
        "old",
        "will",
        "join",
        "the",
        "board",
        "as",
        "a",
        "nonexecutive",
        "director",
        "nov.",
        "N",
    ]
