"""Damaged and foreign model folders: :func:`syntaxformer.load_parser` (and
:func:`syntaxformer.parsing.load_model` under it) raise one :class:`InputError` line naming the file and
what is wrong, and ``syntaxformer parse --model`` prints that line and exits with status 1, without a
traceback. Each folder is a copy of an untrained ``tiny`` Tree Transformer with one file spoiled."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from syntaxformer.cli import main
from syntaxformer.errors import InputError
from syntaxformer.models import REGISTRY
from syntaxformer.parser import load_parser

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[2]


def _truncate_weights(folder: Path) -> None:
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])


def _text_for_weights(folder: Path) -> None:
    (folder / "model.safetensors").write_text("not a safetensors file\n")


def _weights_of_another_model(folder: Path, other: Path) -> None:
    shutil.copy(other / "model.safetensors", folder / "model.safetensors")


def _config_not_json(folder: Path) -> None:
    (folder / "config.json").write_text('{"model_type": "tree-transformer",')


def _config_a_list(folder: Path) -> None:
    (folder / "config.json").write_text("[1, 2]")


def _unknown_model_type(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "no-such-model"}))


def _config_value(folder: Path, key: str, value) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, key: value}))


def _pair_classifier(folder: Path) -> None:
    (folder / "config.json").unlink()
    REGISTRY["gaussian-transformer"].config_class().save_pretrained(folder)


def _no_tokenizer(folder: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)


def _damaged_tokenizer(folder: Path) -> None:
    (folder / "tokenizer.json").write_text('{"version": ')


#: spoil(folder, structformer folder) -> None, the file the message names, what it says
CASES = {
    "truncated weights": (
        lambda f, sf: _truncate_weights(f),
        "model.safetensors",
        "truncated or damaged safetensors file (Error while deserializing header",
    ),
    "text as weights": (
        lambda f, sf: _text_for_weights(f),
        "model.safetensors",
        "truncated or damaged safetensors file (Error while deserializing header",
    ),
    "weights of another model": (
        _weights_of_another_model,
        "model.safetensors",
        "the weights are not those of config.json's model: ",
    ),
    "config not JSON": (lambda f, sf: _config_not_json(f), "config.json", "not a readable JSON file: "),
    "config not an object": (lambda f, sf: _config_a_list(f), "config.json", "expected a JSON object"),
    "unknown model_type": (
        lambda f, sf: _unknown_model_type(f),
        "config.json",
        "unknown model_type 'no-such-model': neither a syntaxformer model (",
    ),
    "a config value of the wrong kind": (
        lambda f, sf: _config_value(f, "hidden_dropout_prob", "x"),
        "config.json",
        "invalid model configuration: hidden_dropout_prob must be a number, got 'x'",
    ),
    "a fraction for a count": (
        lambda f, sf: _config_value(f, "num_hidden_layers", 2.0),
        "config.json",
        "invalid model configuration: num_hidden_layers must be a whole number, got 2.0",
    ),
    "no attention heads": (
        lambda f, sf: _config_value(f, "num_attention_heads", 0),
        "config.json",
        "invalid model configuration: num_attention_heads must be a positive whole number, got 0",
    ),
    "a pair classifier": (
        lambda f, sf: _pair_classifier(f),
        "config.json",
        "a 'gaussian-transformer-nli' model is not a language model; a folder of one is needed (",
    ),
    "no tokenizer": (lambda f, sf: _no_tokenizer(f), "", "no tokenizer (tokenizer.json) in the model folder"),
    "damaged tokenizer": (
        lambda f, sf: _damaged_tokenizer(f),
        "",
        "cannot load the tokenizer (tokenizer.json): ",
    ),
}


@pytest.fixture
def spoiled(tiny_model, tmp_path):
    """Factory: the path of a copy of the tiny Tree Transformer folder spoiled as ``CASES[case]``,
    the path its error names, and the message."""

    def make(case: str) -> tuple[Path, str, str]:
        spoil, file, message = CASES[case]
        folder = tmp_path / "model"
        shutil.copytree(tiny_model("tree-transformer"), folder)
        spoil(folder, tiny_model("structformer"))
        return folder, str(folder / file) if file else str(folder), message

    return make


def test_the_copied_folder_loads(tiny_model, tmp_path):
    """What the cases spoil: a copy of the tiny model folder parses."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_model("tree-transformer"), folder)
    assert load_parser(folder).parse("the old man sat").leaves() == ["the", "old", "man", "sat"]


@pytest.mark.parametrize("case", list(CASES))
def test_load_parser_raises_one_line_naming_the_file(spoiled, case):
    folder, named, message = spoiled(case)
    with pytest.raises(InputError) as error:
        load_parser(folder)
    text = str(error.value)
    assert text.startswith(f"{named}: {message}"), text
    assert "\n" not in text and error.value.path == named


@pytest.mark.parametrize("case", list(CASES))
def test_parse_command_prints_one_line_and_exits_1(spoiled, case, capsys, monkeypatch, tmp_path):
    folder, named, message = spoiled(case)
    monkeypatch.setattr(sys, "stdin", io.StringIO("the old man sat\n"))
    assert main(["parse", "--model", str(folder), "--input", "-", "--out", str(tmp_path / "parsed")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"syntaxformer parse: error: {named}: {message}")
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert not (tmp_path / "parsed").exists()


def test_weights_of_another_model_name_what_differs(spoiled):
    folder, _, _ = spoiled("weights of another model")
    with pytest.raises(InputError, match=r"\d+ weights missing \(.+\); \d+ unexpected weights \(structformer\."):
        load_parser(folder)


@pytest.mark.parametrize("case", ["truncated weights", "weights of another model", "damaged tokenizer"])
def test_parse_process_stderr_is_the_one_line(spoiled, case, tmp_path):
    """As a process: the libraries print nothing (no progress bar, no loading report) besides the line."""
    folder, named, message = spoiled(case)
    out = str(tmp_path / "parsed")
    result = subprocess.run(
        [sys.executable, "-m", "syntaxformer.cli", "parse", "--model", str(folder), "--input", "-", "--out", out],
        input="the old man sat\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"syntaxformer parse: error: {named}: {message}"), result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("architecture", ["tree-transformer", "structformer", "on-lstm-san", "gaussian-transformer"])
@pytest.mark.parametrize("heads", [2.0, 0, -2, True])
def test_configurations_name_a_count_that_is_not_a_positive_whole_number(architecture, heads):
    """Built directly (``AutoConfig``, ``--set``), not only through the loader: the key is named."""
    config_class = REGISTRY[architecture].config_class
    with pytest.raises(ValueError, match=rf"^num_attention_heads must be a positive whole number, got {heads!r}$"):
        config_class(num_attention_heads=heads)
    assert config_class(num_attention_heads=2, hidden_size=64).num_attention_heads == 2


@pytest.mark.parametrize("architecture", ["tree-transformer", "structformer", "on-lstm-san", "gaussian-transformer"])
def test_configurations_say_the_same_thing_of_a_width_the_heads_do_not_divide(architecture):
    """Every multi-head configuration words it alike: 64 dimensions do not split into 3 heads."""
    config_class = REGISTRY[architecture].config_class
    with pytest.raises(ValueError, match=r"^hidden_size 64 is not a multiple of num_attention_heads 3$"):
        config_class(num_attention_heads=3, hidden_size=64)


@pytest.mark.parametrize("architecture", ["on-lstm", "lstm"])
@pytest.mark.parametrize("layers", [2.0, 0, True])
def test_recurrent_configurations_name_a_layer_count_that_is_not_a_positive_whole_number(architecture, layers):
    config_class = REGISTRY[architecture].config_class
    with pytest.raises(ValueError, match=rf"^num_layers must be a positive whole number, got {layers!r}$"):
        config_class(num_layers=layers)


def test_the_on_lstm_configuration_names_the_width_in_hidden_sizes():
    with pytest.raises(ValueError, match=r"^hidden_sizes\[1\] must be a positive whole number, got 20\.0$"):
        REGISTRY["on-lstm"].config_class(num_layers=3, hidden_sizes=[20, 20.0, 400])
    with pytest.raises(ValueError, match=r"^layer widths \[20, 25, 400\] must be multiples of chunk_size 10$"):
        REGISTRY["on-lstm"].config_class(num_layers=3, hidden_sizes=[20, 25, 400])


def test_the_on_lstm_configuration_does_not_check_hidden_size_beside_hidden_sizes():
    """``hidden_sizes`` replaces ``hidden_size``: only the widths used are checked."""
    config = REGISTRY["on-lstm"].config_class(num_layers=1, hidden_sizes=[400], hidden_size=None, parse_layer=0)
    assert config.layer_sizes == [400]
    with pytest.raises(ValueError, match=r"^hidden_size must be a positive whole number, got None$"):
        REGISTRY["on-lstm"].config_class(hidden_size=None)
