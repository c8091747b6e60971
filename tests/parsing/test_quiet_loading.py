"""Loading a parser is quiet unless asked: :func:`syntaxformer.load_parser` (``verbose=False``) and
``syntaxformer parse`` (without ``--verbose``) draw no library progress bar (transformers' "Loading
weights") and leave transformers' settings as they found them; ``verbose=True`` / ``--verbose`` show the
bar. The shipped parsers carry a ``decoder.json`` equal to the decoder settings of their report (what
the fall-back to ``report.json`` gave), so loading one logs no fall-back; :func:`export_pretrained`
writes one."""

from __future__ import annotations

import io
import json
import logging
import shutil
import sys

import pytest
import torch
from transformers.utils import logging as hf_logging

from syntaxformer.cli import main
from syntaxformer.parser import load_parser
from syntaxformer.pretrained import SHIPPED, export_pretrained, pretrained_folder, shipped_parsers
from syntaxformer.structures import DECODER_FILE, DecoderOptions, saved_decoder_options

torch.set_num_threads(1)

BAR = "Loading weights"


@pytest.fixture
def bars_enabled():
    """Transformers' progress bars on (as in a fresh Python session) for the test, off again after
    (the test session's setting, tests/conftest.py)."""
    hf_logging.enable_progress_bar()
    yield
    hf_logging.disable_progress_bar()


def test_load_parser_draws_no_bar_and_restores_the_settings(bars_enabled, tiny_model, capfd):
    verbosity = hf_logging.get_verbosity()
    parser = load_parser(tiny_model("tree-transformer"))
    assert BAR not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == verbosity
    assert parser.parse("the old man sat").leaves() == ["the", "old", "man", "sat"]
    load_parser(tiny_model("tree-transformer"), verbose=True)
    assert BAR in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == verbosity


def test_parse_verbose_shows_the_bar(tiny_model, capfd, monkeypatch, tmp_path):
    """The command line turns bars off for every command; ``parse --verbose`` turns them on while the
    model loads, and they are off again after."""
    argv = ["parse", "--model", str(tiny_model("tree-transformer")), "--input", "-"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("the old man sat\n"))
    assert main(argv) == 0
    quiet = capfd.readouterr()
    assert BAR not in quiet.err and len(quiet.out.splitlines()) == 1
    monkeypatch.setattr(sys, "stdin", io.StringIO("the old man sat\n"))
    assert main([*argv, "--verbose"]) == 0
    verbose = capfd.readouterr()
    assert BAR in verbose.err and verbose.out == quiet.out
    assert not hf_logging.is_progress_bar_enabled()


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_parser_has_its_reports_decoder(name, caplog):
    if name not in shipped_parsers():
        pytest.skip(f"this installation has no weights for {name}")
    folder = pretrained_folder(name)
    report = json.loads((folder / "report.json").read_text())
    caplog.set_level(logging.INFO)
    assert saved_decoder_options(folder) == (DecoderOptions.from_dict(report["decoder"]), str(folder / DECODER_FILE))
    assert json.loads((folder / DECODER_FILE).read_text()) == DecoderOptions.from_dict(report["decoder"]).to_dict()
    load_parser(name)
    assert "report.json" not in caplog.text and "has no decoder.json" not in caplog.text


def test_export_pretrained_writes_the_decoder(tiny_model, tmp_path):
    """An induce output whose model has no decoder.json (the report's settings): the export has them."""
    induce_out = tmp_path / "induce-out"
    shutil.copytree(tiny_model("tree-transformer"), induce_out / "model")
    decoder = DecoderOptions(min_layer=1, threshold=0.7)
    (induce_out / "model" / "training.json").write_text("{}")
    (induce_out / "report.json").write_text(json.dumps({"decoder": decoder.to_dict()}))
    exported = export_pretrained(induce_out, tmp_path / "exported")
    assert saved_decoder_options(exported) == (decoder, str(exported / DECODER_FILE))
    assert load_parser(exported).options == decoder
