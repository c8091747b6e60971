"""Evaluating a model that reads a dependency tree per sentence (the structural-position prior,
DESIGN.md §3.2): ``perplexity --trees`` and ``probe --trees`` (gold, induced), equal to a hand loop
over sentences with their own heads; missing, unneeded and mismatched trees are one-line errors."""

import json

import pytest
import torch

from syntaxformer.cli import main
from syntaxformer.data.trees import gold_tree_sentences, token_heads
from syntaxformer.errors import InputError

torch.set_num_threads(1)


def _write_dp(sentences, path):
    path.write_text(
        "\n".join("".join(f"{w}\t{t}\t{h}\n" for w, t, h in zip(s.words, s.tags, s.heads)) for s in sentences)
    )


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A tiny structural-position model trained 3 steps with gold trees on 40 sentences of
    ptb-sample:dev, a tiny plain one (prior none) on the same words, a tiny untrained StructFormer, and
    6 further sentences: ``test.dp`` (with their trees) and ``test.txt`` (their words, one per line)."""
    from syntaxformer.data.dependency import read_dependencies
    from syntaxformer.data.tokenization import build_word_tokenizer, save_tokenizer
    from syntaxformer.models import MODELS, make_config
    from syntaxformer.tasks.run import train

    root = tmp_path_factory.mktemp("evaltrees")
    _write_dp(read_dependencies("ptb-sample:dev")[:40], root / "train.dp")
    _write_dp(read_dependencies("ptb-sample:dev")[40:46], root / "test.dp")
    for name in ("train", "test"):
        words, _ = gold_tree_sentences(str(root / f"{name}.dp"))
        (root / f"{name}.txt").write_text("".join(" ".join(w) + "\n" for w in words))
    common = dict(
        model="tree-transformer",
        preset="tiny",
        add_cls=True,
        min_freq=1,
        max_steps=3,
        batch_size=8,
        eval_every=0,
        seed=0,
        quiet=True,
        threads=1,
    )
    sp = train(
        out=str(root / "sp"),
        prior="structural-position",
        trees="gold",
        corpus=str(root / "train.dp"),
        overrides={"structural_max_relative": 4},
        **common,
    )
    plain = train(out=str(root / "plain"), prior="none", corpus=str(root / "train.txt"), **common)
    tokenizer = build_word_tokenizer(
        [w for name in ("train", "test") for w in gold_tree_sentences(str(root / f"{name}.dp"))[0]]
    )  # no [CLS]
    torch.manual_seed(0)
    sf = MODELS["structformer"](make_config("structformer", "tiny", len(tokenizer)))
    sf.save_pretrained(root / "sf")
    save_tokenizer(tokenizer, root / "sf")
    return {"sp": sp, "plain": plain, "sf": root / "sf", "test": root / "test.dp", "text": root / "test.txt"}


def _hand_perplexity(folder, sentences, heads):
    """exp(mean cross-entropy) with one call per masked word; ``heads``: per sentence its heads, or a
    function ``(sentence, word) -> heads`` of the copy masking that word."""
    from syntaxformer.parsing import load_model

    model, tokenizer, _ = load_model(folder, device="cpu")
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for s, words in enumerate(sentences):
            enc = tokenizer([words], is_split_into_words=True)
            ids = torch.tensor(enc["input_ids"][0])
            positions = [t for t, w in enumerate(enc.word_ids(0)) if w is not None]
            for w, p in enumerate(positions):
                word_heads = heads(s, w) if callable(heads) else heads[s]
                tree = torch.tensor(token_heads(word_heads, enc.word_ids(0)))
                masked = ids.clone()
                masked[p] = tokenizer.mask_token_id
                logits = model(masked[None], structure_inputs={"heads": tree[None]}).logits[0, p]
                total += float(torch.nn.functional.cross_entropy(logits.double()[None], ids[p][None]))
                n += 1
    return float(torch.tensor(total / n).exp()), n


def test_perplexity_with_gold_trees_is_the_hand_loop(folders, capsys):
    from syntaxformer.workflows.perplexity import evaluate_folder

    result = evaluate_folder(
        folders["sp"], str(folders["test"]), batch_tokens=64, device="cpu", trees="gold"
    )  # small batches: rows of several sentences share a batch
    words, heads = gold_tree_sentences(str(folders["test"]))
    expected, n = _hand_perplexity(folders["sp"], words, heads)
    assert result["trees"] == "gold" and result["n_tokens"] == n and result["n_sentences"] == 6
    assert abs(result["perplexity"] - expected) <= 1e-6 * expected
    code = main(
        [
            "perplexity",
            "--model",
            str(folders["sp"]),
            "--corpus",
            str(folders["test"]),
            "--trees",
            "gold",
            "--device",
            "cpu",
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["trees"] == "gold" and abs(report["perplexity"] - expected) <= 1e-6 * expected


def test_perplexity_with_induced_trees_of_the_sentence(folders):
    from syntaxformer.sources.induced import induced_heads
    from syntaxformer.workflows.perplexity import evaluate_folder

    trees = f"induced:{folders['sf']}"
    result = evaluate_folder(folders["sp"], str(folders["text"]), device="cpu", trees=trees, induced_from="sentence")
    words, gold = gold_tree_sentences(str(folders["test"]))
    induced = induced_heads(str(folders["sf"]), words)
    expected, _ = _hand_perplexity(folders["sp"], words, induced)
    assert result["trees"] == trees and result["induced_from"] == "sentence"
    assert abs(result["perplexity"] - expected) <= 1e-6 * expected
    if induced != gold:  # other trees, another perplexity: the heads are read
        assert result["perplexity"] != _hand_perplexity(folders["sp"], words, gold)[0]


def test_perplexity_with_induced_trees_of_each_masked_copy(folders, capsys):
    """The default: copy w of a sentence reads the StructFormer's heads of that sentence with word w
    shown as [MASK] (one sentence, one masked word per call here; batched and flattened there)."""
    from syntaxformer.sources.induced import induced_heads
    from syntaxformer.workflows.perplexity import evaluate_folder

    trees = f"induced:{folders['sf']}"
    result = evaluate_folder(folders["sp"], str(folders["text"]), batch_tokens=64, device="cpu", trees=trees)
    words, _ = gold_tree_sentences(str(folders["test"]))
    expected, n = _hand_perplexity(
        folders["sp"], words, lambda s, w: induced_heads(str(folders["sf"]), [words[s]], masked=[w])[0]
    )
    assert result["induced_from"] == "masked" and result["n_tokens"] == n
    assert abs(result["perplexity"] - expected) <= 1e-6 * expected
    unmasked = induced_heads(str(folders["sf"]), words)
    copies = [induced_heads(str(folders["sf"]), [words[0]], masked=[w])[0] for w in range(len(words[0]))]
    assert any(c != unmasked[0] for c in copies)  # masking a word changes the induced tree
    assert abs(result["perplexity"] - _hand_perplexity(folders["sp"], words, unmasked)[0]) > 1e-6 * expected
    code = main(
        [
            "perplexity",
            "--model",
            str(folders["sp"]),
            "--corpus",
            str(folders["text"]),
            "--trees",
            trees,
            "--device",
            "cpu",
        ]
    )
    assert code == 0 and "of each masked copy ([MASK] included)" in capsys.readouterr().out


def test_missing_and_unneeded_trees_are_one_line_errors(folders, capsys):
    from syntaxformer.workflows.perplexity import evaluate_folder

    with pytest.raises(InputError, match="needs a dependency tree per sentence: pass --trees"):
        evaluate_folder(folders["sp"], "no-such-corpus.txt", device="cpu")  # before the corpus is read
    with pytest.raises(InputError, match="reads no trees"):
        evaluate_folder(folders["plain"], str(folders["test"]), device="cpu", trees="gold")
    for model in ("sp", "plain"):
        args = ["perplexity", "--model", str(folders[model]), "--corpus", str(folders["test"]), "--device", "cpu"]
        code = main(args if model == "sp" else args + ["--trees", "gold"])
        err = capsys.readouterr().err
        assert code == 1 and "--trees" in err and err.count("\n") == 1


def _probe_args(folders, out, *extra):
    """The probe test's small settings (tests/tasks/test_probing.py) on the 40 training sentences."""
    return [
        "probe",
        "--model",
        str(folders["sp"]),
        "--out",
        str(out),
        "--treebank",
        "ptb-sample:dev",
        "--max-sentences",
        "40",
        "--task",
        "SentLen",
        "--task",
        "BShift",
        "--classifier",
        "logreg",
        "--json",
        *extra,
    ]


def test_probe_with_gold_trees(folders, tmp_path, capsys):
    from syntaxformer.data import load_gold_trees
    from syntaxformer.parsing import load_model
    from syntaxformer.probing.features import sentence_vectors
    from syntaxformer.workflows.probe import gold_dependency_heads

    code = main(_probe_args(folders, tmp_path / "probe", "--trees", "gold"))
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["trees"] == "gold" and set(report["tasks"]) == {"SentLen", "BShift"}
    layers = report["tasks"]["SentLen"]["layers"]
    assert len(layers["untrained"]) == len(layers["trained"]) == 4  # embeddings and the tiny preset's 3 layers
    # the vectors are the means of the layers' outputs with each sentence's own heads
    gold = load_gold_trees("ptb-sample:dev")[:3]
    heads = gold_dependency_heads("ptb-sample:dev", gold)
    model, tokenizer, _ = load_model(folders["sp"], device="cpu")
    words = [t.leaves() for t in gold]
    layers, _ = sentence_vectors(model.eval(), tokenizer, words, batch_size=2, structures=[{"heads": h} for h in heads])
    for s in range(3):
        enc = tokenizer([words[s]], is_split_into_words=True)
        tree = torch.tensor([token_heads(heads[s], enc.word_ids(0))])
        with torch.no_grad():
            alone = model(
                torch.tensor(enc["input_ids"]), structure_inputs={"heads": tree}, output_hidden_states=True
            ).hidden_states
        for layer, h in enumerate(alone):
            assert torch.allclose(torch.from_numpy(layers[layer][s]), h[0].mean(0), atol=1e-5)


def test_probe_with_induced_trees(folders, tmp_path, monkeypatch):
    """The vectors the probe fits on are the trained model's layer means over each sentence forwarded
    alone with the StructFormer's spanning-tree heads of that sentence (read here from
    ``model_structures``, not through ``--trees``' own reader)."""
    import syntaxformer.workflows.probe as probe  # where the probe calls sentence_vectors
    from syntaxformer.parsing import load_model, model_structures
    from syntaxformer.structures import DecoderOptions
    from syntaxformer.workflows.probe import run_probe

    calls = []
    real = probe.sentence_vectors

    def spy(model, tokenizer, sentences, batch_size=64, structures=None):
        result = real(model, tokenizer, sentences, batch_size, structures=structures)
        calls.append((model, [list(w) for w in sentences], result[0]))
        return result

    monkeypatch.setattr(probe, "sentence_vectors", spy)
    trees = f"induced:{folders['sf']}"
    report = run_probe(
        tmp_path / "probe",
        model=folders["sp"],
        treebank="ptb-sample:dev",
        tasks=["SentLen"],
        classifiers=["logreg"],
        max_sentences=40,
        trees=trees,
    )
    assert report["trees"] == trees and len(report["tasks"]["SentLen"]["layers"]["trained"]) == 4
    assert len(calls) == 2  # the trained model, then its untrained twin
    _, words, layers = calls[0]
    assert len(words) == 40
    model, tokenizer, _ = load_model(folders["sp"], device="cpu")
    sf, sf_tokenizer, _ = load_model(folders["sf"], device="cpu")
    picked = [0, 17, 39]
    structures = model_structures(sf.eval(), sf_tokenizer, [words[s] for s in picked], normalise=False)
    for s, structure in zip(picked, structures):
        heads = structure.heads(DecoderOptions())
        enc = tokenizer([words[s]], is_split_into_words=True)
        tree = torch.tensor([token_heads(heads, enc.word_ids(0))])
        with torch.no_grad():
            alone = model.eval()(
                torch.tensor(enc["input_ids"]), structure_inputs={"heads": tree}, output_hidden_states=True
            ).hidden_states
        assert len(alone) == len(layers) == 4
        for layer, h in enumerate(alone):
            assert torch.allclose(torch.from_numpy(layers[layer][s]), h[0].mean(0), atol=1e-5), (s, layer)


def test_probe_missing_unneeded_and_mismatched_trees(folders, tmp_path, capsys, monkeypatch):
    import syntaxformer.workflows.probe as trees_module  # where the probe reads gold_tree_sentences
    from syntaxformer.workflows.probe import gold_dependency_heads, match_dependency_trees, run_probe

    code = main(_probe_args(folders, tmp_path / "a"))
    err = capsys.readouterr().err
    assert code == 1 and "pass --trees" in err and err.count("\n") == 1
    assert not (tmp_path / "a").exists()  # refused before any work
    plain = _probe_args(folders, tmp_path / "b", "--trees", "gold")
    plain[2] = str(folders["plain"])
    code = main(plain)
    err = capsys.readouterr().err
    assert code == 1 and "reads no trees" in err and err.count("\n") == 1
    with pytest.raises(
        InputError,
        match=r"^x\.dp, sentence 2: --trees gold: the dependency tree's words "
        r"differ .* word 2: 'e' vs 'd'",
    ):
        match_dependency_trees("x.dp", [["a", "b"], ["c", "d"]], [["a", "b"], ["c", "e"]], [[2, 0], [2, 0]])
    with pytest.raises(InputError, match="x.dp, sentence 2: --trees gold: no dependency tree"):
        match_dependency_trees("x.dp", [["a", "b"], ["c", "d"]], [["a", "b"]], [[2, 0]])
    with pytest.raises(InputError, match="ptb-sample only"):
        gold_dependency_heads("trees.mrg", [])
    # dependency files out of step with the constituency trees: the first sentence is named
    real = trees_module.gold_tree_sentences
    monkeypatch.setattr(trees_module, "gold_tree_sentences", lambda source: tuple(x[1:] for x in real(source)))
    with pytest.raises(InputError, match="ptb-sample:dev, sentence 1: --trees gold: the dependency tree's words"):
        run_probe(
            tmp_path / "c",
            model=folders["sp"],
            treebank="ptb-sample:dev",
            tasks=["SentLen"],
            classifiers=["logreg"],
            max_sentences=40,
            trees="gold",
        )


def test_probe_without_trees_and_bad_trees_value(folders, tmp_path, capsys):
    from syntaxformer.workflows.probe import run_probe

    report = run_probe(
        tmp_path / "plain",
        model=folders["plain"],
        treebank="ptb-sample:dev",
        tasks=["SentLen"],
        classifiers=["logreg"],
        max_sentences=20,
    )
    assert report["trees"] is None and len(report["tasks"]["SentLen"]["layers"]["trained"]) == 4
    for command in ("probe", "perplexity"):
        args = [command, "--model", "no-such-folder", "--trees", "silver"]
        code = main(args + (["--out", str(tmp_path / "x")] if command == "probe" else ["--corpus", "x"]))
        err = capsys.readouterr().err
        assert code == 1 and "--trees must be gold or induced:MODEL_DIR" in err and err.count("\n") == 1


def test_masked_input_inducer_parses_the_inputs_as_the_model_reads_them(folders):
    """Rows with one [MASK] each: the inducer's token heads are the StructFormer's heads of the sentence
    as the model reads it (a word outside its vocabulary is [UNK]) with that word masked
    (``induced_heads(masked=...)``, another tokenizer: no [CLS]); padding and [CLS] get no head; the
    row without a mask gets the unmasked sentence's tree."""
    from syntaxformer.data.trees import NO_TREE, token_heads
    from syntaxformer.parsing import load_model
    from syntaxformer.sources.induced import MaskedInputInducer, induced_heads

    _, tokenizer, _ = load_model(folders["sp"], device="cpu")
    words, _ = gold_tree_sentences(str(folders["test"]))
    inducer = MaskedInputInducer(tokenizer, trees=f"induced:{folders['sf']}")
    enc = tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    ids, mask = enc["input_ids"].clone(), enc["attention_mask"]
    masked = [w % len(s) for w, s in zip([1, 3, 0, 5, 2], words)] + [None]
    for row, w in enumerate(masked):
        if w is not None:
            ids[row, enc.word_ids(row).index(w)] = tokenizer.mask_token_id
    heads = inducer(ids, mask)["heads"]
    assert heads.shape == ids.shape and heads.dtype == torch.long
    unknown = 0
    for row, (sentence, w) in enumerate(zip(words, masked)):
        read = tokenizer.convert_ids_to_tokens(
            [i for i, x in zip(enc["input_ids"][row].tolist(), enc.word_ids(row)) if x is not None]
        )  # the words as the model reads them
        unknown += read.count(tokenizer.unk_token)
        expected = token_heads(induced_heads(str(folders["sf"]), [read], masked=[w])[0], enc.word_ids(row))
        assert heads[row].tolist() == expected + [NO_TREE] * (ids.shape[1] - len(expected)), f"row {row}"
    assert enc.word_ids(0)[0] is None and heads[0, 0] == NO_TREE  # [CLS]
    assert unknown > 0  # some test words are outside the trained model's vocabulary
    from syntaxformer.data.tokenization import build_wordpiece_tokenizer

    with pytest.raises(InputError, match="one token per word"):
        MaskedInputInducer(build_wordpiece_tokenizer(words * 20, vocab_size=200), trees=f"induced:{folders['sf']}")
    with pytest.raises(InputError, match="needs --trees or --phrases induced"):
        MaskedInputInducer(tokenizer, trees="gold")


def test_training_with_trees_of_the_masked_inputs(folders, tmp_path, monkeypatch):
    """``induced_from="masked"`` (the default): every step's and every validation batch's trees are the
    source's parse of that batch's inputs; recorded in training.json. ``"sentence"``: the trees read
    once from the unmasked sentences."""
    from syntaxformer.sources.induced import MaskedInputInducer
    from syntaxformer.tasks.language_model import Trainer
    from syntaxformer.tasks.run import train

    seen = []
    real = Trainer.model_loss

    def spy(self, model, batch):
        seen.append((batch.input_ids.clone(), batch.attention_mask.clone(), batch.structure_inputs["heads"].clone()))
        return real(self, model, batch)

    monkeypatch.setattr(Trainer, "model_loss", spy)
    common = dict(
        model="tree-transformer",
        preset="tiny",
        prior="structural-position",
        corpus=str(folders["text"]),
        add_cls=True,
        min_freq=1,
        max_steps=2,
        batch_size=4,
        valid_fraction=0.34,
        eval_every=0,
        seed=0,
        quiet=True,
        threads=1,
        trees=f"induced:{folders['sf']}",
        overrides={"structural_max_relative": 4},
    )
    out = train(out=str(tmp_path / "masked"), **common)
    record = json.loads((out / "training.json").read_text())
    assert record["data"]["induced_from"] == "masked" and record["data"]["trees"] == f"induced:{folders['sf']}"
    from syntaxformer.parsing import load_model

    _, tokenizer, _ = load_model(out, device="cpu")
    inducer = MaskedInputInducer(tokenizer, trees=f"induced:{folders['sf']}")
    assert len(seen) >= 3  # two training steps and the validation batch(es)
    assert any((inputs == tokenizer.mask_token_id).any() for inputs, _, _ in seen)
    for inputs, attention_mask, heads in seen:
        assert torch.equal(heads, inducer(inputs, attention_mask)["heads"])
    seen.clear()
    out = train(out=str(tmp_path / "sentence"), induced_from="sentence", **common)
    assert json.loads((out / "training.json").read_text())["data"]["induced_from"] == "sentence"
    assert any(
        not torch.equal(heads, inducer(inputs, attention_mask)["heads"]) for inputs, attention_mask, heads in seen
    )
