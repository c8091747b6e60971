"""Parsing with a trained model: a model folder and word lists in, trees (and dependencies) out.

The one path from a model to structures, used by ``syntaxformer parse``, ``induce``, ``show`` and the
evaluation recipes:

1. :func:`load_model` reads a folder written by ``syntaxformer train`` (``save_pretrained``
   safetensors + tokenizer + ``training.json``) through the Hugging Face Auto classes;
2. :func:`model_structures` runs the model's ``induce`` once per batch (no masking: the unmasked
   sentence, as the Tree Transformer paper parses) and returns, per sentence, the typed structures of
   :mod:`syntaxformer.structures` over **words** (link probabilities ``[L, n-1]``; syntactic
   distances ``[n-1]`` and heights ``[n]``; a dependency distribution ``[n, n+1]``);
3. :func:`decode` turns them into trees (and heads) with each structure's own decoder. Nothing here
   knows a model by name.

Words are normalised with :func:`syntaxformer.data.preprocess.normalise_word` (lower-case, a word
with a digit becomes ``N``: the rule the training corpora went through) before tokenisation; the
trees returned keep the words as given.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import torch
from nltk import Tree
from safetensors import SafetensorError, safe_open
from transformers import CONFIG_MAPPING, MODEL_FOR_MASKED_LM_MAPPING, AutoConfig, AutoModelForMaskedLM, AutoTokenizer
from transformers.utils import logging as hf_logging

import syntaxformer.models  # noqa: F401  (registers the models with the Auto classes)
from syntaxformer.data.batching import pad_batch
from syntaxformer.data.preprocess import normalise_word
from syntaxformer.data.tokenization import encode
from syntaxformer.decoding.spans import spans_to_tree
from syntaxformer.errors import InputError
from syntaxformer.models.registry import REGISTRY
from syntaxformer.runtime import resolve_device  # noqa: F401  (re-exported)
from syntaxformer.structures import (  # noqa: F401  (re-exported)
    DecoderOptions,
    Structures,
    min_layer_of,
    save_decoder_options,
    saved_decoder_options,
)

logger = logging.getLogger(__name__)


def read_training_record(folder: str | Path) -> dict:
    """The folder's ``training.json`` (written by the trainer) parsed, or ``{}`` when there is none.

    Raises:
        InputError: the file exists but is not readable JSON (names the file).
    """
    path = Path(folder) / "training.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"unreadable training record: {e}", path=path) from None


@contextlib.contextmanager
def library_output(verbose: bool = False) -> Iterator[None]:
    """Within the block, the libraries' own output while a model loads: with ``verbose`` transformers'
    progress bars (its "Loading weights" bar) are drawn; without it neither they nor transformers'
    messages below errors are shown. Transformers' settings (progress bars, verbosity) are restored
    after the block."""
    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    if verbose:
        hf_logging.enable_progress_bar()
    else:
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars != hf_logging.is_progress_bar_enabled():
            (hf_logging.enable_progress_bar if bars else hf_logging.disable_progress_bar)()


def _one_line(error: BaseException, limit: int = 200) -> str:
    """A library's error message on one line, at most ``limit`` characters."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_value_types(values: dict, config_class, path: Path) -> None:
    """Raise :class:`InputError` for a ``config.json`` value whose kind differs from the default's: a
    string, list or object where the configuration's default is a number, a fraction or boolean where it
    is a whole number, or a non-boolean where it is a boolean (``"hidden_size": "x"`` or
    ``"num_hidden_layers": 2.0`` would otherwise fail deep inside the model's construction)."""
    defaults = config_class().to_dict()
    for key, value in values.items():
        default = defaults.get(key)
        if isinstance(default, bool):
            wrong, kind = value is not None and not isinstance(value, bool), "true or false"
        elif isinstance(default, int):
            wrong, kind = (
                value is not None and (isinstance(value, bool) or not isinstance(value, int)),
                "a whole number",
            )
        elif isinstance(default, float):
            wrong, kind = isinstance(value, (str, list, dict)), "a number"
        else:
            continue
        if wrong:
            raise InputError(f"invalid model configuration: {key} must be {kind}, got {value!r}", path=path)


def read_model_config(folder: str | Path):
    """The configuration of the language model in ``folder`` (its ``config.json``).

    Returns:
        The ``PretrainedConfig`` of a model type that has a language model (``AutoModelForMaskedLM``).
    Raises:
        InputError: no ``config.json`` (not a model folder); one that is not a JSON object; an unknown
            ``model_type``; a model type with no language model (e.g. a sentence-pair classifier); a
            configuration the model type rejects. Each names the file.
    """
    folder = Path(folder)
    path = folder / "config.json"
    if not path.is_file():
        raise InputError("not a model folder (no config.json)", path=folder)
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"not a readable JSON file: {_one_line(e)}", path=path) from None
    if not isinstance(values, dict):
        raise InputError("expected a JSON object", path=path)
    model_type = values.get("model_type")
    language_models = sorted({a.config_class.model_type for a in REGISTRY.values() if a.language_model})
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        raise InputError(
            f"unknown model_type {model_type!r}: neither a syntaxformer model ({', '.join(language_models)}) "
            "nor a transformers one",
            path=path,
        )
    _check_value_types(values, CONFIG_MAPPING[model_type], path)
    try:
        config = AutoConfig.from_pretrained(folder)
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise InputError(f"invalid model configuration: {_one_line(e)}", path=path) from None
    if type(config) not in MODEL_FOR_MASKED_LM_MAPPING:
        architectures = ", ".join(values.get("architectures") or [])
        what = f"a {architectures} ({model_type!r})" if architectures else f"a {model_type!r} model"
        raise InputError(
            f"{what} is not a language model; a folder of one is needed ({', '.join(language_models)})", path=path
        )
    return config


def _check_weights_file(folder: Path) -> None:
    """Raises InputError naming ``folder/model.safetensors`` when it is there but is no readable
    safetensors file (truncated, damaged, another format); an absent one is the loader's to name."""
    path = folder / "model.safetensors"
    if not path.is_file():
        return
    try:
        with safe_open(str(path), framework="pt") as weights:
            weights.keys()
    except (SafetensorError, OSError) as e:
        raise InputError(f"truncated or damaged safetensors file ({_one_line(e)})", path=path) from None


def _weight_problems(loading: Mapping) -> str:
    """What ``from_pretrained(output_loading_info=True)`` found wrong, in words ("" when nothing)."""

    def some(keys) -> str:
        names = sorted(k if isinstance(k, str) else k[0] for k in keys)
        return ", ".join(names[:2]) + (", ..." if len(names) > 2 else "")

    problems = [
        f"{len(loading[field])} {what} ({some(loading[field])})"
        for field, what in (
            ("missing_keys", "weights missing"),
            ("unexpected_keys", "unexpected weights"),
            ("mismatched_keys", "weights of another shape"),
        )
        if loading.get(field)
    ]
    if loading.get("error_msgs"):
        problems.append(_one_line(loading["error_msgs"][0]))
    return "; ".join(problems)


def load_tokenizer(folder: str | Path):
    """The tokenizer saved in a model folder (``tokenizer.json``, ``tokenizer_config.json``).

    Raises:
        InputError: the folder holds no tokenizer, or one that cannot be loaded (names the folder).
    """
    folder = Path(folder)
    if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise InputError("no tokenizer (tokenizer.json) in the model folder", path=folder)
    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception as e:  # the tokenizers library raises a bare Exception for a damaged tokenizer.json
        raise InputError(f"cannot load the tokenizer (tokenizer.json): {_one_line(e)}", path=folder) from None


def load_model(
    folder: str | Path,
    device: str | torch.device | None = "cpu",
    attn_implementation: str | None = None,
    verbose: bool = False,
):
    """Load a model folder written by ``syntaxformer train`` (or ``save_pretrained``).

    The one model loader of the package (``parse``, ``induce``, ``show``, ``perplexity``, ``compare``).

    Args:
        folder: holds ``config.json``, ``model.safetensors``, the tokenizer files and, when written
            by the trainer, ``training.json``.
        device: where to put the model (float32, evaluation mode); None = CUDA if available, else CPU
            (:func:`resolve_device`).
        attn_implementation: override the saved attention backend ("eager" or "sdpa").
        verbose: show the libraries' progress bars and messages while loading (:func:`library_output`).

    Returns:
        ``(model, tokenizer, info)``: ``info`` is the parsed ``training.json`` (``{}`` if absent,
        :func:`read_training_record`).

    Raises:
        InputError: in one line naming the file: the folder does not exist or holds no model; a
            ``config.json`` that is not JSON, of an unknown model type or of a model that is not a
            language model (:func:`read_model_config`); weights missing, truncated or damaged, or not
            those of the configured model (missing, unexpected or differently shaped weights); no or
            a damaged tokenizer (:func:`load_tokenizer`); an unreadable ``training.json``; a bad or
            absent device.
    """
    folder = Path(folder)
    read_model_config(folder)
    device = resolve_device(device)
    info = read_training_record(folder)
    _check_weights_file(folder)
    # float32 whatever the saved dtype (the shipped model is float16): transformers 4 loaded in the
    # default dtype, transformers 5 defaults to the checkpoint's dtype ("auto")
    kwargs = {"dtype": torch.float32}
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    with library_output(verbose):
        try:
            model, loading = AutoModelForMaskedLM.from_pretrained(
                folder, output_loading_info=True, ignore_mismatched_sizes=True, **kwargs
            )
        except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as e:
            raise InputError(f"cannot load the model: {_one_line(e)}", path=folder) from None
        problems = _weight_problems(loading)
        if problems:
            weights = folder / "model.safetensors"
            raise InputError(
                f"the weights are not those of config.json's model: {problems}",
                path=weights if weights.is_file() else folder,
            )
        tokenizer = load_tokenizer(folder)
    model.to(device).eval()
    return model, tokenizer, info


def resolve_decoder_options(folder: str | Path, options: DecoderOptions | Mapping | None = None) -> DecoderOptions:
    """The decoder settings to parse with a model folder.

    Args:
        folder: the model folder (its ``decoder.json``, or the report beside it, hold the settings it
            was scored with: :func:`~syntaxformer.structures.saved_decoder_options`).
        options: None = the folder's saved settings; a mapping = the settings a user chose (flags), put
            over the saved ones (:meth:`~syntaxformer.structures.DecoderOptions.with_choices`); a
            :class:`~syntaxformer.structures.DecoderOptions` = exactly these, whatever is saved.
    Raises:
        InputError: an unreadable or invalid saved setting, or an invalid choice.
    """
    if isinstance(options, DecoderOptions):
        return options
    saved, _ = saved_decoder_options(folder)
    return saved.with_choices(options)


def _device(model) -> torch.device:
    return next(model.parameters()).device


def induces_structure(model) -> bool:
    """Whether ``model`` induces structure: it has ``induce`` and its ``induces_structure`` is true
    (a model of this package; False for ``prior="none"``, a BERT, an attention-less model)."""
    return callable(getattr(model, "induce", None)) and bool(getattr(model, "induces_structure", False))


def check_induces_structure(model) -> None:
    """Raises InputError unless ``model`` induces structure (has ``induce`` and ``induces_structure``;
    e.g. not a plain Transformer, ``prior="none"``, nor a BERT folder)."""
    if not callable(getattr(model, "induce", None)):
        raise InputError(
            f"cannot parse with a {type(model).__name__}: it has no induce() method "
            "(a model of syntaxformer.models.MODELS that induces structure is needed)"
        )
    if not getattr(model, "induces_structure", True):
        prior = getattr(model.config, "prior", None)
        raise InputError(
            f"this {type(model).__name__} induces no structure"
            + (f" (config.prior={prior!r} records none; 'none' is a plain Transformer)" if prior else "")
        )


@torch.inference_mode()
def model_structures(
    model,
    tokenizer,
    sentences: Sequence[Sequence[str]],
    batch_size: int = 64,
    normalise: bool = True,
    masked: Sequence[int | None] | None = None,
) -> list[Structures]:
    """Run ``model.induce`` on ``sentences`` and collect its structures per sentence, over words.

    Sentences are sorted by length into batches (little padding) and returned in input order. The
    structures' own ``to_words`` maps them from tokens to words.

    Args:
        model: a model that induces structure (``induce(input_ids, attention_mask)``), evaluation mode.
        tokenizer: its tokenizer (one token per word, or WordPiece where the structure allows it).
        sentences: lists of words (at least one word each).
        batch_size: sentences per forward pass.
        normalise: apply :func:`normalise_word` before tokenisation (the training corpora's rule).
        masked: per sentence, the 0-based word the model sees as ``[MASK]`` (every token of it), or None
            for none; None (default): every sentence unmasked. The structures still cover every word.
            This is how a structure is induced for one masked copy of the masked-LM perplexity protocol
            (:func:`syntaxformer.sources.induced.masked_copy_structures`).

    Returns:
        One :class:`~syntaxformer.structures.Structures` per sentence, in input order.

    Raises:
        InputError: a model that induces no structure, an empty sentence (naming its 1-based number),
            a tokenizer the structure cannot map to words, a batch size below 1, or ``masked`` with a
            tokenizer without ``[MASK]``, not one entry per sentence, or naming no word of its sentence.
    """
    check_induces_structure(model)
    if batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    for i, words in enumerate(sentences):
        if len(words) == 0:
            raise InputError("empty sentence: nothing to parse", sentence=i + 1)
    inputs = [[normalise_word(w) for w in words] if normalise else list(words) for words in sentences]
    ids, word_ids = encode(tokenizer, inputs)
    if masked is not None:
        ids = _mask_words(ids, word_ids, masked, tokenizer)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    results: list[Structures | None] = [None] * len(ids)
    device = _device(model)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        input_ids, attention_mask = pad_batch([ids[i] for i in batch], tokenizer.pad_token_id)  # (B, N), (B, N)
        induced = model.induce(input_ids.to(device), attention_mask.to(device))
        for row, i in enumerate(batch):
            results[i] = Structures(list(sentences[i]), [s.to_words(word_ids[i], sentence=i + 1) for s in induced[row]])
    return results  # type: ignore[return-value]


def _mask_words(
    ids: list[list[int]], word_ids: list[list[int | None]], masked: Sequence[int | None], tokenizer
) -> list[list[int]]:
    """``ids`` with every token of word ``masked[i]`` of sentence ``i`` replaced by ``[MASK]``
    (:func:`model_structures`'s ``masked``)."""
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if mask_id is None:
        raise InputError("the tokenizer has no [MASK] token: a masked word cannot be shown to the model")
    if len(masked) != len(ids):
        raise InputError(f"{len(masked)} masked words for {len(ids)} sentences")
    out = []
    for i, (sentence_ids, wids, w) in enumerate(zip(ids, word_ids, masked)):
        if w is not None and w not in wids:
            raise InputError(f"word {w + 1} is not in the sentence to be masked", sentence=i + 1)
        out.append([mask_id if w is not None and word == w else t for t, word in zip(sentence_ids, wids)])
    return out


def decode(
    structures: Sequence[Structures], options: DecoderOptions = DecoderOptions()
) -> tuple[list[Tree], list[list[int]] | None]:
    """Trees (and dependency heads, where the model induces them) for many sentences.

    Returns:
        ``(trees, heads)``: one ``nltk.Tree`` per sentence (leaves = the words; internal nodes ``S``
        for the root and ``X`` below); ``heads`` is None when no sentence has a dependency structure.
    """
    trees = [spans_to_tree(s.words, s.spans(options)) for s in structures]
    heads = [s.heads(options) for s in structures]
    return trees, (None if all(h is None for h in heads) else heads)  # type: ignore[return-value]
