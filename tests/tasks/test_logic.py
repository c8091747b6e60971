"""The logic task: the reader on the real files, malformed lines, the encoders and
poolings, the pair classifier, a tiny training run that learns, resume, the report and the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from syntaxformer.blocks.pair_head import pair_features
from syntaxformer.blocks.pooling import pool_last, pool_max, pool_mean
from syntaxformer.cli import main
from syntaxformer.data.logic import (
    RELATIONS,
    LogicPair,
    count_operators,
    read_logic_file,
    read_logic_split,
    split_train_valid,
)
from syntaxformer.errors import InputError
from syntaxformer.models import ENCODERS, encoder_use, make_encoder_config
from syntaxformer.tasks.pair import PairClassifier, PairClassifierConfig

#: lines per file of ../shared/data/propositional-logic (wc -l)
TRAIN_LINES = {
    0: 30,
    1: 2319,
    2: 12451,
    3: 23252,
    4: 30373,
    5: 34152,
    6: 32952,
    7: 26671,
    8: 18962,
    9: 12634,
    10: 8181,
    11: 4894,
    12: 4831,
}
TEST_LINES = {
    0: 6,
    1: 410,
    2: 2198,
    3: 4104,
    4: 5361,
    5: 6027,
    6: 5816,
    7: 4707,
    8: 3347,
    9: 2230,
    10: 1444,
    11: 864,
    12: 853,
}


@pytest.fixture(scope="module")
def logic_data(shared_data) -> Path:
    return shared_data / "propositional-logic"


@pytest.fixture(scope="module")
def train_files(logic_data):
    return read_logic_split(logic_data, "train")


# ---------------------------------------------------------------------------------------- reader


def test_reader_counts_every_pair_of_the_real_files(logic_data, train_files):
    train = train_files
    test = read_logic_split(logic_data, "test")
    assert {n: len(p) for n, p in train.items()} == TRAIN_LINES
    assert {n: len(p) for n, p in test.items()} == TEST_LINES
    # file N holds the pairs whose longer formula has N operators; file 12 holds "12 or more" (up to 18)
    for files in (train, test):
        for n in range(12):
            assert all(p.operators == n == p.file_operators for p in files[n])
        assert min(p.operators for p in files[12]) == 12
    assert sum(p.operators == 12 for p in test[12]) == 451
    assert max(p.operators for p in test[12]) == 18
    first = test[1][0]
    assert first == LogicPair(
        "#", ("(", "d", "(", "and", "e", ")", ")"), ("(", "d", "(", "and", "c", ")", ")"), 1, 1, 1
    )
    assert first.label == RELATIONS.index("#")
    assert sorted({p.relation for n in range(7) for p in train[n]}) == sorted(RELATIONS)


def test_validation_split_is_every_tenth_pair_in_file_order(train_files):
    files = {n: train_files[n] for n in range(7)}
    train, valid = split_train_valid(files, 10)
    assert (len(train), len(valid)) == (121_977, 13_552)
    ordered = [p for n in range(7) for p in files[n]]
    assert valid[0] is ordered[9] and valid[1] is ordered[19]
    assert train[:9] == ordered[:9] and train[9] is ordered[10]


@pytest.mark.parametrize(
    "line, message",
    [
        ("#\t( a ( and b ) )", "expected 3 tab-separated fields"),
        ("?\ta\tb", "unknown relation '?'"),
        ("#\t( a ( xor b ) )\tb", "unknown token(s) 'xor'"),
        ("#\ta\t( not a", "the second formula has unbalanced brackets"),
        ("#\t) a (\tb", "the first formula has unbalanced brackets"),
        ("#\t\tb", "the first formula is empty"),
        ("", "expected 3 tab-separated fields"),
    ],
)
def test_malformed_line_is_one_error_naming_file_and_line(tmp_path, line, message):
    path = tmp_path / "train3"
    path.write_text("=\ta\ta\n" + line + "\n<\ta\t( a ( or b ) )\n")
    with pytest.raises(InputError, match=r"train3:2: ") as err:
        read_logic_file(path)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_bad_file_names_and_missing_files(tmp_path):
    (tmp_path / "pairs.txt").write_text("=\ta\ta\n")
    with pytest.raises(InputError, match="named trainN or testN"):
        read_logic_file(tmp_path / "pairs.txt")
    with pytest.raises(InputError, match="no such file"):
        read_logic_split(tmp_path, "test", [1])
    with pytest.raises(InputError, match="no such folder"):
        read_logic_split(tmp_path / "absent", "test")


def test_count_operators():
    assert count_operators("( ( not a ) ( and ( b ( or c ) ) ) )".split()) == 3
    assert count_operators(["a"]) == 0


# ---------------------------------------------------------------------------------------- encoders


def test_poolings_on_hand_made_outputs():
    hidden = torch.tensor(
        [[[1.0, -2.0], [3.0, 4.0], [100.0, 100.0]], [[5.0, 0.0], [-1.0, 2.0], [0.0, -6.0]]]
    )  # (2, 3, 2)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert torch.equal(pool_last(hidden, mask), torch.tensor([[3.0, 4.0], [0.0, -6.0]]))
    assert torch.allclose(pool_mean(hidden, mask), torch.tensor([[2.0, 1.0], [4.0 / 3, -4.0 / 3]]))
    assert torch.equal(pool_max(hidden, mask), torch.tensor([[3.0, 4.0], [5.0, 2.0]]))


def test_pair_features():
    u, v = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 0.5]])
    assert torch.equal(pair_features(u, v, "bowman"), torch.tensor([[1.0, -2.0, 3.0, 0.5, 3.0, -1.0, 2.0, 2.5]]))


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_every_encoder_gives_one_vector_per_sentence_whatever_the_padding(name):
    torch.manual_seed(0)
    config = make_encoder_config(name, "tiny", vocab_size=15, pad_token_id=0)
    model = PairClassifier(PairClassifierConfig(name, config.to_dict(), 7, encoder_use(name).pooling, 8)).eval()
    short, long = [4, 6, 9, 5], [4, 4, 7, 10, 8, 5, 5]
    ids = torch.tensor([short + [0] * 3, long])
    mask = (ids != 0).long()
    with torch.no_grad():
        together = model.encode(ids, mask)  # (2, D)
        alone = model.encode(torch.tensor([short]), torch.ones(1, 4, dtype=torch.long))
    assert together.shape == (2, encoder_use(name).width(model.encoder.config))
    assert torch.allclose(together[0], alone[0], atol=1e-5)
    logits = model(ids, mask)  # one pair: (short, long)
    assert logits.shape == (1, 7)


def test_save_and_load_give_the_same_logits(tmp_path):
    torch.manual_seed(1)
    config = make_encoder_config("on-lstm", "tiny", vocab_size=15, pad_token_id=0)
    model = PairClassifier(PairClassifierConfig("on-lstm", config.to_dict(), 7, "last", 10, preset="tiny")).eval()
    ids = torch.tensor([[4, 5, 6, 0], [7, 8, 9, 10]])
    model.save_pretrained(tmp_path)
    loaded = PairClassifier.from_pretrained(tmp_path)
    with torch.no_grad():
        assert torch.equal(model(ids, (ids != 0).long()), loaded(ids, (ids != 0).long()))
    with pytest.raises(InputError, match="not a pair-classifier folder"):
        PairClassifier.from_pretrained(tmp_path / "nothing")


# ---------------------------------------------------------------------------------------- training

#: a small, fast run (~10 s): the pairs with <= 1 operator (2,115 training, 234 validation), an LSTM of 64 units
QUICK = dict(
    encoder="lstm",
    preset="tiny",
    overrides=dict(embedding_size=32, hidden_size=64),
    max_train_operators=1,
    batch_size=32,
    lr=1e-2,
    dropout=0.0,
    max_steps=400,
    schedule="linear",
    eval_every=100,
    save_every=200,
    log_every=20,
    threads=1,
    quiet=True,
    seed=3,
    device="cpu",
)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, logic_data):
    from syntaxformer.tasks.logic import LogicArguments
    from syntaxformer.workflows.logic import run_logic_train

    out = tmp_path_factory.mktemp("logic") / "run"
    report = run_logic_train(LogicArguments(out=str(out), data=str(logic_data), **QUICK), max_test_pairs=200)
    return out, report


def test_a_tiny_run_learns_beyond_the_majority_class(quick_run, logic_data):
    out, report = quick_run
    training = report["training"]
    majority = 100 * 157 / 234  # '#' is 157 of the 234 validation pairs (67.1%)
    assert training["data"]["train_pairs"] == 2_115 and training["data"]["valid_pairs"] == 234
    first_200 = read_logic_file(logic_data / "test1")[:200]
    assert report["test"][1]["majority"] == pytest.approx(sum(p.relation == "#" for p in first_200) / 2)
    assert training["initial_valid_loss"] > training["final_valid_loss"]
    assert training["best_valid_accuracy"] > majority + 8, training["valid_history"]
    assert report["test"][1]["accuracy"] > report["test"][1]["majority"] + 8


def test_report_structure_and_files(quick_run):
    out, report = quick_run
    assert report["model"] == str(out / "best")
    assert (report["encoder"], report["preset"], report["pooling"], report["seed"]) == ("lstm", "tiny", "last", 3)
    assert sorted(report["test"]) == list(range(1, 13))
    for n, cell in report["test"].items():
        assert cell["pairs"] == min(200, TEST_LINES[n]) and cell["accuracy"] == pytest.approx(
            100 * cell["correct"] / cell["pairs"]
        )
    assert set(report["groups"]) == {"1-6", "7-9", "10-12"}
    assert report["groups"]["7-9"] == pytest.approx(sum(report["test"][n]["accuracy"] for n in (7, 8, 9)) / 3)
    assert report["training"]["best_step"] in (0, 100, 200, 300, 400)
    for name in (
        "logic.json",
        "logic.md",
        "accuracy.png",
        "accuracy.svg",
        "training.json",
        "checkpoint.pt",
        "best/model.safetensors",
        "best/config.json",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ):
        assert (out / name).is_file(), name
    saved = json.loads((out / "logic.json").read_text())
    assert saved["test"]["7"]["correct"] == report["test"][7]["correct"]
    assert "| accuracy % |" in (out / "logic.md").read_text()
    from syntaxformer.workflows.logic import summary_line

    assert "lstm (preset tiny, pooling last, seed 3)" in summary_line(report)
    assert ": recipe default, 400 steps (max_steps)" in summary_line(report)


def test_evaluate_command_reproduces_the_training_report(quick_run, logic_data, tmp_path, capsys):
    out, report = quick_run
    code = main(
        [
            "logic",
            "evaluate",
            "--model",
            str(out / "best"),
            "--corpus",
            str(logic_data),
            "--out",
            str(tmp_path),
            "--max-test-pairs",
            "200",
            "--device",
            "cpu",
            "--json",
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert {int(n): v["correct"] for n, v in printed["test"].items()} == {
        n: v["correct"] for n, v in report["test"].items()
    }
    assert printed["seed"] == 3 and (tmp_path / "accuracy.png").is_file()


def test_resume_takes_the_same_steps(tmp_path, logic_data):
    from safetensors.torch import load_file

    from syntaxformer.tasks.logic import LogicArguments, LogicTrainer

    common = dict(
        QUICK, data=str(logic_data), max_train_pairs=600, eval_every=0, save_every=6, max_steps=12, schedule_steps=12
    )
    LogicTrainer(LogicArguments(out=str(tmp_path / "straight"), **common)).train()
    LogicTrainer(LogicArguments(out=str(tmp_path / "resumed"), **{**common, "max_steps": 6})).train()
    with pytest.raises(InputError, match="pass --resume"):
        LogicTrainer(LogicArguments(out=str(tmp_path / "resumed"), **common)).train()
    LogicTrainer(LogicArguments(out=str(tmp_path / "resumed"), **{**common, "resume": True})).train()
    straight = load_file(tmp_path / "straight" / "model.safetensors")
    resumed = load_file(tmp_path / "resumed" / "model.safetensors")
    assert straight.keys() == resumed.keys()
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)
    record = json.loads((tmp_path / "resumed" / "training.json").read_text())
    assert record["steps"] == 12 and record["resumed_from_steps"] == [6]


def test_command_errors_are_one_line(tmp_path, capsys, logic_data):
    assert main(["logic", "train", "--corpus", str(tmp_path / "absent"), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("syntaxformer logic: error: ") and "no such folder" in err and "\n" not in err
    bad = tmp_path / "bad"
    bad.mkdir()
    for n in range(3):
        (bad / f"train{n}").write_text("=\ta\ta\n")
    (bad / "train1").write_text("=\ta\ta\n#\ta\t( b\n")
    code = main(
        [
            "logic",
            "train",
            "--corpus",
            str(bad),
            "--out",
            str(tmp_path / "o2"),
            "--max-train-operators",
            "2",
            "--architecture",
            "lstm",
            "--preset",
            "tiny",
            "--device",
            "cpu",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert f"{bad / 'train1'}:2: the second formula has unbalanced brackets" in err and "\n" not in err
    assert main(["logic", "train", "--corpus", str(logic_data), "--out", str(tmp_path / "o3"), "--preset", "huge"]) == 1
    assert "unknown --preset 'huge' for on-lstm" in capsys.readouterr().err
    assert (
        main(
            [
                "logic",
                "train",
                "--corpus",
                str(bad),
                "--out",
                str(tmp_path / "o4"),
                "--max-train-operators",
                "0",
                "--architecture",
                "lstm",
                "--preset",
                "tiny",
                "--set",
                "hiden_size=64",
                "--device",
                "cpu",
            ]
        )
        == 1
    )
    assert "cannot build encoder lstm / tiny: no config field hiden_size" in capsys.readouterr().err


def test_plateau_schedule_follows_torch_rule_and_counts_a_replayed_evaluation_once():
    from syntaxformer.training.plateau import PlateauSchedule

    optimizer = torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    schedule = PlateauSchedule(optimizer, factor=0.5, patience=2)
    rates = []
    for step, score in enumerate([10.0, 50.0, 50.0, 50.0, 49.0, 60.0, 60.0, 60.0, 60.0]):
        schedule.step()  # the per-optimizer-step call moves nothing
        schedule.observe(step, score)
        schedule.observe(step, 0.0)  # the same step again (an evaluation replayed after a resume): ignored
        rates.append(optimizer.param_groups[0]["lr"])
    # three evaluations in a row without a better score halve the rate (patience 2, threshold 0)
    assert rates == [1e-3, 1e-3, 1e-3, 1e-3, 5e-4, 5e-4, 5e-4, 5e-4, 2.5e-4]
    copy = PlateauSchedule(torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=2.5e-4), 0.5, 2)
    copy.load_state_dict(schedule.state_dict())
    assert (copy.rule.best, copy.rule.num_bad_epochs, copy.last_step) == (60.0, 0, 8)
    with pytest.raises(ValueError, match="factor must lie in"):
        PlateauSchedule(optimizer, factor=1.5)


def test_public_recipe_validates_each_epoch_halves_on_plateau_and_resumes_exactly(tmp_path, logic_data):
    from safetensors.torch import load_file

    from syntaxformer.tasks.logic import RECIPES, LogicArguments, LogicTrainer

    public = {k: v for k, v in RECIPES["public"].items() if k not in ("batch_size", "lr")}  # QUICK's size
    common = {
        **QUICK,
        **public,
        "recipe": "public",
        "data": str(logic_data),
        "max_train_pairs": 320,
        "plateau_patience": 0,
        "save_every": 0,
        "epochs": 6,
    }  # checkpoints only at the ends of epochs
    LogicTrainer(LogicArguments(out=str(tmp_path / "straight"), **common)).train()
    LogicTrainer(LogicArguments(out=str(tmp_path / "resumed"), **{**common, "epochs": 3})).train()
    LogicTrainer(LogicArguments(out=str(tmp_path / "resumed"), **{**common, "resume": True})).train()
    straight = json.loads((tmp_path / "straight" / "training.json").read_text())
    resumed = json.loads((tmp_path / "resumed" / "training.json").read_text())
    steps_per_epoch = 10  # 320 pairs in batches of 32
    assert [row[0] for row in straight["valid_history"]] == [steps_per_epoch * e for e in range(7)]
    assert straight["stopped"] == "epochs" and straight["steps"] == 60
    assert resumed["valid_history"] == straight["valid_history"] and resumed["resumed_from_steps"] == [30]
    # patience 0: the rate halves after every evaluation that does not beat the best so far
    accuracies = [row[2] for row in straight["valid_history"]]
    halvings = sum(a <= max(accuracies[:i]) for i, a in enumerate(accuracies) if i > 0)
    state = torch.load(tmp_path / "straight" / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(1e-2 * 0.5**halvings)
    first = load_file(tmp_path / "straight" / "model.safetensors")
    second = load_file(tmp_path / "resumed" / "model.safetensors")
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_recipe_option_sets_its_fields_and_given_options_win(tmp_path):
    from syntaxformer.cli import build_parser
    from syntaxformer.cli.logic import arguments_from_namespace

    def parsed(*extra):
        return arguments_from_namespace(
            build_parser().parse_args(["logic", "train", "--corpus", "d", "--out", str(tmp_path), *extra])
        )

    default = parsed()
    assert (default.recipe, default.epochs, default.schedule, default.eval_every, default.eval_each_epoch) == (
        "default",
        None,
        "linear",
        500,
        False,
    )
    # the default recipe's learning rate and steps are the encoder's (chosen on validation, README
    # "Recipe choice"); --lr and --max-steps win
    assert (default.encoder, default.lr, default.max_steps, default.precision) == ("on-lstm", 3e-3, 8000, "bf16")
    lstm, transformer = parsed("--architecture", "lstm"), parsed("--architecture", "transformer")
    assert (
        (lstm.lr, lstm.max_steps, lstm.precision)
        == (transformer.lr, transformer.max_steps, transformer.precision)
        == (1e-3, 4000, "fp32")
    )
    assert (parsed("--lr", "5e-4").lr, parsed("--max-steps", "700").max_steps) == (5e-4, 700)
    assert parsed("--no-bf16").precision == "fp32"
    assert parsed("--max-minutes", "10").max_steps == 8000  # a time limit on top of the steps
    from syntaxformer.tasks.logic import LogicArguments

    with pytest.raises(InputError, match="unknown --architecture"):  # no learning rate to take, the encoder's error
        LogicArguments(out=str(tmp_path), data="d", encoder="gru").check()
    public = parsed("--recipe", "public")
    assert (
        public.recipe,
        public.max_steps,
        public.epochs,
        public.schedule,
        public.eval_every,
        public.eval_each_epoch,
        public.lr,
        public.batch_size,
        public.precision,
    ) == ("public", None, 50, "plateau", 0, True, 1e-3, 128, "fp32")
    capped = parsed("--recipe", "public", "--epochs", "5", "--max-steps", "100", "--lr", "3e-3")
    assert (capped.epochs, capped.max_steps, capped.lr, capped.schedule) == (5, 100, 3e-3, "plateau")
    with pytest.raises(InputError, match="plateau has no warm-up"):
        parsed("--recipe", "public", "--warmup-steps", "10").check()
    with pytest.raises(InputError, match="plateau needs validations"):
        parsed("--schedule", "plateau", "--eval-every", "0").check()


def test_resume_check_takes_options_added_after_the_checkpoint_as_their_defaults(tmp_path):
    from dataclasses import asdict

    from syntaxformer.tasks.logic import LogicArguments
    from syntaxformer.training.checkpoint import check_resume

    args = LogicArguments(out=str(tmp_path), data="d", resume=True)
    older = {k: v for k, v in asdict(args).items() if k not in ("recipe", "plateau_factor", "eval_each_epoch")}
    check_resume(args, {"args": older, "world_size": 1}, 1, tmp_path / "checkpoint.pt")  # no error
    with pytest.raises(InputError, match=r"other options \(plateau_patience: 2 -> 5\)"):
        check_resume(
            LogicArguments(out=str(tmp_path), data="d", resume=True, plateau_patience=5),
            {"args": older, "world_size": 1},
            1,
            tmp_path / "checkpoint.pt",
        )


@pytest.mark.parametrize("encoder", ["transformer", "tree-transformer"])
def test_zero_residual_init_reaches_the_logic_encoder(encoder):
    """``--set residual_init=zero`` builds an attention encoder whose residual branches start at zero
    inside the pair classifier (its own initialisation does not overwrite them)."""
    from syntaxformer.tasks.logic import LogicArguments, build_classifier

    torch.manual_seed(0)

    def projections(m):
        return [
            mod.weight
            for name, mod in m.named_modules()  # noqa: E731
            if name.endswith(("attention.output", "ffn.fc_out"))
        ]

    zero = build_classifier(
        LogicArguments(out="-", data="-", encoder=encoder, preset="tiny", overrides={"residual_init": "zero"}), 15, 0
    )
    plain = build_classifier(LogicArguments(out="-", data="-", encoder=encoder, preset="tiny"), 15, 0)
    assert len(projections(zero)) == 2 * zero.config.encoder_config["num_hidden_layers"]
    assert all(int(w.count_nonzero()) == 0 for w in projections(zero))
    assert all(int(w.count_nonzero()) > 0 for w in projections(plain))
