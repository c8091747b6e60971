"""Argument helpers shared by several commands (the only module other command modules import)."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import inspect
import json
import re
import types
import typing

from syntaxformer.errors import InputError

#: a help text that states its option's default itself: "default: X", "(default)", "X, default)"
STATES_DEFAULT = re.compile(r"\(default\b[^)]*\)|\bdefault\s*[:)]", re.IGNORECASE)
#: a help text's closing statement of its default, ``(default: ...)`` (a command that changes the default
#: replaces it)
STATED_DEFAULT = re.compile(r"\s*\(default\b[^)]*\)\s*$", re.IGNORECASE)
#: the help text :class:`HelpFormatter` gives an option that has none, so argparse prints its note
_NOTE_ONLY = "(no text)"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """The help of every command: each option's text ends with its default, ``(default: 0.001)``, or
    with ``(required)`` / ``(one of --input, --treebank is required)``; an option without a text shows
    that alone. Nothing is added to a flag (``store_true`` and the like), to a text that states the
    default itself (:data:`STATES_DEFAULT`: e.g. ``default: the model's``, ``bert (default)``), or for
    a default of None, whose text says in words what happens when the option is absent; an empty list
    shows as ``none``."""

    #: the options of a required mutually exclusive group, by action: the group's option names
    #: (:class:`CommandParser` fills it in)
    alternatives: dict = {}

    def _note(self, action: argparse.Action) -> str | None:
        """What the help adds to ``action``'s text (without parentheses), or None."""
        if action.help is argparse.SUPPRESS or action.nargs == 0:  # hidden, or a flag
            return None
        if action in self.alternatives:
            return f"one of {', '.join(self.alternatives[action])} is required"
        if action.required:
            return "required"
        text = "" if action.help in (None, _NOTE_ONLY) else action.help
        if STATES_DEFAULT.search(text) or action.default is None or action.default is argparse.SUPPRESS:
            return None
        return "default: none" if action.default == [] else "default: %(default)s"

    def _get_help_string(self, action: argparse.Action) -> str:
        note = self._note(action)
        text = "" if action.help in (None, _NOTE_ONLY) else action.help
        return text if note is None else f"{text} ({note})".strip()

    def _format_action(self, action: argparse.Action) -> str:
        if not action.help and self._note(action) is not None:  # no text: the note alone
            action = copy.copy(action)
            action.help = _NOTE_ONLY
        return super()._format_action(action)


class CommandParser(argparse.ArgumentParser):
    """The parser of every command and sub-command: :class:`HelpFormatter` unless another formatter
    is given (``syntaxformer.cli.build_parser`` makes the sub-commands with it)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def _get_formatter(self):
        formatter = super()._get_formatter()
        if isinstance(formatter, HelpFormatter):
            formatter.alternatives = {
                action: [name for member in group._group_actions for name in member.option_strings[:1]]
                for group in self._mutually_exclusive_groups
                if group.required
                for action in group._group_actions
            }
        return formatter


def add_device_argument(parser) -> None:
    """``--device``, the same in every command that runs a model: a torch device, absent = CUDA if
    available, else the CPU (:func:`syntaxformer.runtime.resolve_device`)."""
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")


def add_decoder_arguments(parser) -> None:
    """The decoder flags shared by ``parse``, ``induce``, ``show``, ``heads``, ``prune`` and ``probe``.

    Every flag defaults to "not given": a model folder is then decoded with the settings saved with it
    (``decoder.json``, written by ``induce``; :func:`syntaxformer.structures.saved_decoder_options`).
    """
    g = parser.add_argument_group(
        "decoding (default: the settings saved with the model, else Algorithm 1, threshold 0.8)"
    )
    g.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="Algorithm 1 break threshold: a weakest link below it splits the span (default: the model's, else 0.8)",
    )
    g.add_argument(
        "--min-layer",
        type=int,
        default=None,
        help="Algorithm 1 minimum layer, 0-based: lower layers are never used (default: the "
        "model's, else the decoder's, see syntaxformer.decoding.tree_transformer)",
    )
    g.add_argument(
        "--descend-rule",
        choices=["paper", "official"],
        default=None,
        help="official = also the public code's rule: a child span whose weakest link is "
        "> 0.7 descends one layer before recursing (default: the model's, else paper)",
    )
    g.add_argument(
        "--layer",
        type=int,
        default=None,
        help="parse from this single layer (0-based) with the top-down greedy split "
        "(paper Figure 4(b)) instead of Algorithm 1 (default: the model's decoder, else Algorithm 1)",
    )
    g.add_argument(
        "--dependency",
        choices=["mst", "argmax"],
        default=None,
        help="StructFormer dependency decoder: mst = Chu-Liu-Edmonds maximum spanning tree "
        "(always a tree), argmax = the public code's rule (default: the model's, else mst)",
    )


def decoder_options(args) -> dict:
    """The decoder settings the flags choose: a dict of the fields given (absent = the model's saved
    setting), for :meth:`~syntaxformer.structures.DecoderOptions.with_choices`.

    Raises:
        InputError: ``--layer`` together with ``--min-layer`` (two decoders' options).
    """
    from syntaxformer.decoding.tree_transformer import OFFICIAL_DESCEND_THRESHOLD

    if args.layer is not None and args.min_layer is not None:
        raise InputError("--layer (single-layer decoder) and --min-layer (Algorithm 1) exclude each other")
    choices = dict(layer=args.layer, threshold=args.threshold, min_layer=args.min_layer, dependency=args.dependency)
    choices = {key: value for key, value in choices.items() if value is not None}
    if args.descend_rule is not None:
        choices["descend_threshold"] = OFFICIAL_DESCEND_THRESHOLD if args.descend_rule == "official" else None
    return choices


def add_structure_input_arguments(parser, gold_trees: str, gold_phrases: str, note: str = "") -> None:
    """``--trees`` and ``--phrases``, the per-sentence structures some priors read (``train``,
    ``perplexity``, ``probe``; :func:`parse_structure_sources` parses them when the command runs).

    Args:
        parser: the command's parser or argument group.
        gold_trees: what ``--trees gold`` reads in this command.
        gold_phrases: what ``--phrases gold`` reads in this command.
        note: a sentence added to both helps (e.g. what the untrained twin gets).
    """
    note = f" {note}" if note else ""
    parser.add_argument(
        "--trees",
        default=None,
        metavar="gold|induced:MODEL_DIR",
        help="a dependency tree per sentence, for a prior that reads one (structural-position; "
        f"required there, refused for other models).{note} gold = {gold_trees}; induced:MODEL_DIR = the "
        "maximum-spanning-tree heads of a trained StructFormer for each sentence (default: none)",
    )
    parser.add_argument(
        "--phrases",
        default=None,
        metavar="gold|induced:MODEL_DIR",
        help="a constituency tree per sentence, cut at mgsa_tree_level into the phrases of the "
        f"multi-granularity prior's 'tree' heads (required there, refused for other models).{note} gold = {gold_phrases}; "
        "induced:MODEL_DIR = the trees a trained parser (Tree Transformer, StructFormer or ON-LSTM) induces "
        "for each sentence (as parse decodes them) (default: none)",
    )


def parse_structure_sources(args: argparse.Namespace) -> None:
    """Replace ``args.trees`` / ``args.phrases`` (``add_structure_input_arguments``) by their parsed
    values (:class:`~syntaxformer.data.structure_source.StructureSource`, the same strings), once, when
    the command starts, before any model is loaded.

    A command's ``run`` calls it rather than argparse's ``type=``: a bad value is then an
    :class:`InputError`, printed as one line with exit status 1 like every other bad input, where
    argparse would print its usage and exit with status 2.

    Raises:
        InputError: ``--trees / --phrases must be gold or induced:MODEL_DIR, got ...``.
    """
    from syntaxformer.data.structure_source import StructureSource  # cli/: imports at call time

    args.trees = StructureSource.parse(args.trees, "--trees")
    args.phrases = StructureSource.parse(args.phrases, "--phrases")


def config_override(text: str) -> tuple[str, object]:
    """``--set KEY=VALUE``: a model config field and its value, read as JSON (``128``, ``0.2``,
    ``"official"``, ``null``); a value that is not JSON is kept as the bare string.

    Raises:
        argparse.ArgumentTypeError: no ``=`` in ``text``.
    """
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value  # a bare string
    return key.strip(), parsed


# ---------------------------------------------------------------------------------------------------
# Options from dataclass fields
# ---------------------------------------------------------------------------------------------------


def option_flag(f: dataclasses.Field) -> str:
    """The command-line option of a dataclass field: its ``flag`` metadata, else ``--`` and the field's
    name with dashes (``min_freq``: ``--min-freq``)."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _docstring_help(cls: type, name: str) -> str:
    """The text of field ``name`` in a ``name [default]: text`` line of the docstring of ``cls`` or a
    base (a field documented the older way, without ``help`` metadata), else ``""``."""
    for klass in cls.__mro__:
        doc = inspect.cleandoc(klass.__dict__.get("__doc__") or "")
        found = re.search(rf"^\s*{name} \[[^\]\n]*\]:\s*(.+?)(?=^\s*\w+ \[|^\s*$|\Z)", doc, re.M | re.S)
        if found:
            return " ".join(found.group(1).split()).replace("``", "")
    return ""


def _field_type(hint) -> tuple[type, int | None]:
    """``(element type, nargs)`` of a field's type: ``int | None`` -> ``(int, None)``,
    ``tuple[float, float]`` -> ``(float, 2)``."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        return args[0], len(args)
    if args and typing.get_origin(hint) in (typing.Union, types.UnionType):
        return _field_type(args[0])
    return hint, None


def _default(f: dataclasses.Field):
    """The field's default value (a fresh one from its factory; MISSING when it has none)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def add_field_argument(parser, cls: type, f: dataclasses.Field, hint, default=dataclasses.MISSING) -> argparse.Action:
    """The option of one field of the dataclass ``cls`` (:func:`add_dataclass_arguments`): a bool is a
    flag (``--x``, or ``--x`` / ``--no-x`` when its default is True or None), a tuple takes as many
    values, a dict is ``--set KEY=VALUE`` given again for each key (:func:`config_override`), ``X | None``
    takes an X; ``choices`` and ``metavar`` from the metadata. ``default`` replaces the field's."""
    default = _default(f) if default is dataclasses.MISSING else default
    text = (f.metadata.get("help") or _docstring_help(cls, f.name)).replace("%", "%%")
    kind, nargs = _field_type(hint)
    kwargs = dict(dest=f.name, help=text)
    if kind is bool:
        action = argparse.BooleanOptionalAction if default is not False else "store_true"
        added = parser.add_argument(option_flag(f), action=action, default=default, **kwargs)
        added.help = text  # argparse would append "(default: ...)" to a flag
        return added
    if kind is dict:
        kwargs.update(action="append", type=config_override, metavar="KEY=VALUE")
        default = list((default or {}).items())
    else:
        kwargs.update(type=kind, nargs=nargs)
        default = list(default) if isinstance(default, tuple) else default
    if "flag" in f.metadata:  # e.g. --architecture ARCHITECTURE, not MODEL (the field's name)
        kwargs["metavar"] = f.metadata["flag"].lstrip("-").replace("-", "_").upper()
    for key in ("choices", "metavar"):
        if key in f.metadata:
            kwargs[key] = f.metadata[key]
    if default is dataclasses.MISSING:
        return parser.add_argument(option_flag(f), required=True, **kwargs)
    return parser.add_argument(option_flag(f), default=default, **kwargs)


def add_dataclass_arguments(
    parser, cls: type, *, only=None, skip=(), defaults: dict | None = None, grouped: bool = True
) -> dict[str, argparse.Action]:
    """One option per field of the dataclass ``cls`` (:func:`add_field_argument`; help, flag, choices and
    metavar from the field's metadata, :func:`syntaxformer.training.arguments.option`), in field order,
    in one argument group per dataclass that declares fields (titled by its ``option_group``, else its
    name) unless ``grouped`` is False.

    Args:
        parser: the command's parser (or a group, with ``grouped=False``).
        cls: the dataclass.
        only: the names of the fields to add (None: all but ``skip``).
        skip: the names of fields that get no option.
        defaults: per field name, the option's default instead of the field's (e.g. None: "the
            recipe's").
    Returns:
        The options added, by field name.
    """
    hints = typing.get_type_hints(cls)
    defaults = defaults or {}
    groups: dict[type, object] = {}
    added = {}
    for f in dataclasses.fields(cls):
        if (only is not None and f.name not in only) or f.name in skip:
            continue
        target = parser
        if grouped:
            owner = next(k for k in reversed(cls.__mro__) if f.name in getattr(k, "__annotations__", {}))
            if owner not in groups:
                groups[owner] = parser.add_argument_group(owner.__dict__.get("option_group", owner.__name__))
            target = groups[owner]
        added[f.name] = add_field_argument(target, cls, f, hints[f.name], defaults.get(f.name, dataclasses.MISSING))
    return added


def dataclass_values(ns: argparse.Namespace, cls: type) -> dict:
    """The values of the fields of ``cls`` that ``ns`` holds (:func:`add_dataclass_arguments`' options),
    as the dataclass takes them: a tuple field's list as a tuple, a dict field's ``KEY=VALUE`` pairs as
    a dict."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if not hasattr(ns, f.name):
            continue
        value = getattr(ns, f.name)
        kind, nargs = _field_type(hints[f.name])
        if kind is dict:
            value = dict(value or [])
        elif nargs is not None and value is not None:
            value = tuple(value)
        values[f.name] = value
    return values
