"""The one sentence-pair classification head: the feature joins and the MLP against
hand-computed values, the zero-init mark, the logic classifier as a Hugging Face model (Auto classes,
the earlier folder format), and the logic and NLI models sharing the head."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForSequenceClassification

from syntaxformer.blocks.pair_head import PairClassificationHead, pair_features
from syntaxformer.errors import InputError
from syntaxformer.models import ENCODERS, build_encoder, encoder_use, make_encoder_config
from syntaxformer.models.gaussian_transformer import (
    PRESETS,
    GaussianTransformerConfig,
    GaussianTransformerForSequencePairClassification,
)
from syntaxformer.models.mean_pool_pair import MeanPoolForSequencePairClassification, MeanPoolPairConfig
from syntaxformer.tasks.pair import LEGACY_CONFIG_NAME, MODEL_TYPE, PairClassifier, PairClassifierConfig

U = torch.tensor([[1.0, -2.0], [0.5, 3.0]])  # (B=2, D=2)
V = torch.tensor([[3.0, 0.5], [0.5, -1.0]])


def test_bowman_features_are_u_v_product_absolute_difference():
    assert torch.equal(
        pair_features(U, V, "bowman"),
        torch.tensor(
            [
                [1.0, -2.0, 3.0, 0.5, 3.0, -1.0, 2.0, 2.5],
                [0.5, 3.0, 0.5, -1.0, 0.25, -3.0, 0.0, 4.0],
            ]
        ),
    )


def test_match_features_are_u_v_absolute_difference_product():
    assert torch.equal(
        pair_features(U, V, "match"),
        torch.tensor(
            [
                [1.0, -2.0, 3.0, 0.5, 2.0, 2.5, 3.0, -1.0],
                [0.5, 3.0, 0.5, -1.0, 0.0, 4.0, 0.25, -3.0],
            ]
        ),
    )


def test_concat_features_and_unknown_kind():
    assert torch.equal(pair_features(U, V, "concat"), torch.tensor([[1.0, -2.0, 3.0, 0.5], [0.5, 3.0, 0.5, -1.0]]))
    with pytest.raises(ValueError, match="unknown pair features"):
        pair_features(U, V, "sum")
    with pytest.raises(ValueError, match="unknown activation"):
        PairClassificationHead(2, 2, 3, 0.0, activation="relu")


def _set(head: PairClassificationHead, dense_w, dense_b, out_w, out_b) -> PairClassificationHead:
    with torch.no_grad():
        head.dense.weight.copy_(torch.tensor(dense_w))
        head.dense.bias.copy_(torch.tensor(dense_b))
        head.out.weight.copy_(torch.tensor(out_w))
        head.out.bias.copy_(torch.tensor(out_b))
    return head.eval()


@pytest.mark.parametrize("activation", ["elu", "gelu"])
def test_head_logits_by_hand(activation):
    # D = 1, u = 2, v = -1: bowman features [2, -1, -2, 3]; two hidden units:
    # h1 = sum of the features = 2, h2 = the product feature + 0.5 = -1.5
    head = _set(
        PairClassificationHead(1, 2, 2, dropout=0.5, features="bowman", activation=activation),
        [[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]],
        [0.0, 0.5],
        [[1.0, 0.0], [1.0, -2.0]],
        [0.0, 0.25],
    )
    if activation == "elu":
        a1, a2 = 2.0, math.exp(-1.5) - 1.0  # ELU: x for x > 0, e^x - 1 otherwise
    else:
        a1, a2 = (x * 0.5 * (1.0 + math.erf(x / math.sqrt(2.0))) for x in (2.0, -1.5))  # GELU: x Φ(x)
    expected = torch.tensor([[a1, a1 - 2.0 * a2 + 0.25]])
    assert torch.allclose(head(torch.tensor([[2.0]]), torch.tensor([[-1.0]])), expected, atol=1e-6)


def test_zero_init_output_marks_only_the_output_layer():
    marked = PairClassificationHead(3, 4, 2, 0.1, zero_init_output=True)
    assert marked.out.zero_init is True and not hasattr(marked.dense, "zero_init")
    assert not hasattr(PairClassificationHead(3, 4, 2, 0.1).out, "zero_init")


def _nli_models():
    gaussian = GaussianTransformerForSequencePairClassification(
        GaussianTransformerConfig(vocab_size=30, **PRESETS["tiny"], classifier_features="match")
    )
    mean_pool = MeanPoolForSequencePairClassification(MeanPoolPairConfig(vocab_size=30, hidden_size=8))
    return gaussian, mean_pool


def test_logic_and_nli_models_share_the_head_class():
    torch.manual_seed(0)
    gaussian, mean_pool = _nli_models()
    logic = _logic_model()
    assert type(logic.classifier) is type(gaussian.classifier) is type(mean_pool.classifier) is PairClassificationHead
    assert (logic.classifier.features, gaussian.classifier.features, mean_pool.classifier.features) == (
        "bowman",
        "match",
        "match",
    )
    assert isinstance(logic.classifier.activation, torch.nn.ELU)
    assert isinstance(gaussian.classifier.activation, torch.nn.GELU)
    # the NLI models' output layer is zero-initialised by their _init_weights (initial loss ln 3) ...
    for model in (gaussian, mean_pool):
        assert not model.classifier.out.weight.any() and not model.classifier.out.bias.any()
        assert model.classifier.dense.weight.any()
    # ... the logic classifier's keeps PyTorch's default (post_init changes nothing)
    assert logic.classifier.out.weight.any()


def _logic_model(seed: int = 1) -> PairClassifier:
    torch.manual_seed(seed)
    config = make_encoder_config("on-lstm", "tiny", vocab_size=15, pad_token_id=0)
    return PairClassifier(
        PairClassifierConfig("on-lstm", config.to_dict(), 7, "last", 10, preset="tiny", labels=list("abcdefg"))
    ).eval()


IDS = torch.tensor([[4, 5, 6, 0], [7, 8, 9, 10], [4, 4, 0, 0], [11, 12, 13, 0]])  # two pairs


def _logits(model):
    with torch.no_grad():
        return model(IDS, (IDS != 0).long())


def test_post_init_keeps_the_construction_weights_and_random_stream():
    """The HF model's post_init must not re-initialise: the same seed gives the same weights as the
    parts built alone (encoder, then the head), and leaves torch's generator at the same point."""
    model = _logic_model(seed=3)
    after_model = torch.rand(4)
    torch.manual_seed(3)
    config = model.config
    encoder = build_encoder("on-lstm", ENCODERS["on-lstm"].config_class.from_dict(config.encoder_config))
    head = PairClassificationHead(encoder_use("on-lstm").width(encoder.config), 10, 7, 0.2)
    assert torch.equal(torch.rand(4), after_model)
    for key, value in encoder.state_dict().items():
        assert torch.equal(model.encoder.state_dict()[key], value), key
    for key, value in head.state_dict().items():
        assert torch.equal(model.classifier.state_dict()[key], value), key


def test_save_pretrained_writes_config_json_and_loads_with_the_auto_classes(tmp_path):
    model = _logic_model()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "config.json").is_file() and (tmp_path / "model.safetensors").is_file()
    assert not (tmp_path / LEGACY_CONFIG_NAME).exists()
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == MODEL_TYPE == "syntaxformer-pair-classifier"
    assert (saved["encoder"], saved["pooling"], saved["mlp_hidden"], saved["dropout"]) == ("on-lstm", "last", 10, 0.2)
    assert saved["labels"] == list("abcdefg") and saved["id2label"]["6"] == "g"
    config = AutoConfig.from_pretrained(tmp_path)
    assert type(config) is PairClassifierConfig and config.num_labels == 7
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert type(loaded) is PairClassifier and not loaded.training
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert torch.equal(_logits(loaded), _logits(model))


def test_an_earlier_format_folder_loads_to_the_same_predictions(tmp_path):
    """The earlier folder format: ``pair_classifier.json`` (the dataclass's fields) and
    ``model.safetensors`` with the MLP as ``mlp.1.*`` (first Linear) and ``mlp.4.*`` (second)."""
    model = _logic_model(seed=5)
    config = model.config
    (tmp_path / LEGACY_CONFIG_NAME).write_text(
        json.dumps(
            dict(
                encoder="on-lstm",
                encoder_config=config.encoder_config,
                num_labels=7,
                pooling="last",
                mlp_hidden=10,
                dropout=0.2,
                preset="tiny",
                labels=list("abcdefg"),
            )
        )
    )
    old_names = {
        "classifier.dense.weight": "mlp.1.weight",
        "classifier.dense.bias": "mlp.1.bias",
        "classifier.out.weight": "mlp.4.weight",
        "classifier.out.bias": "mlp.4.bias",
    }
    state = {old_names.get(k, k): v.contiguous() for k, v in model.state_dict().items()}
    assert {"mlp.1.weight", "mlp.1.bias", "mlp.4.weight", "mlp.4.bias"} <= set(state)
    save_file(state, str(tmp_path / "model.safetensors"))
    torch.manual_seed(99)  # another initialisation: every weight must come from the file
    loaded = PairClassifier.from_pretrained(tmp_path)
    assert loaded.config.encoder == "on-lstm" and loaded.config.labels == list("abcdefg")
    assert torch.equal(loaded.classifier.dense.weight, model.classifier.dense.weight)
    assert torch.equal(loaded.classifier.out.bias, model.classifier.out.bias)
    assert torch.equal(_logits(loaded), _logits(model))
    assert torch.equal(_logits(loaded).argmax(-1), _logits(model).argmax(-1))


def test_not_a_pair_classifier_folder(tmp_path):
    with pytest.raises(InputError, match="not a pair-classifier folder"):
        PairClassifier.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mean-pool-pair"}))
    with pytest.raises(InputError, match="model_type"):
        PairClassifier.from_pretrained(tmp_path)
