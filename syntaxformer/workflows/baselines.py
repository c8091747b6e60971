"""Structure-free baselines of a treebank, scored by one protocol (``syntaxformer baselines``).

Left- and right-branching, random binary (mean and standard deviation over :data:`N_SEEDS` seeds)
and balanced binary trees; left and right dependency chains when gold dependencies are given
(``ptb-sample`` has them). Definitions: :mod:`syntaxformer.evaluation.baselines`; protocols:
:mod:`syntaxformer.evaluation.protocols` (default ``prpn``).
"""

from __future__ import annotations

import time

from syntaxformer.data import load_gold_trees, ptb_sample_part
from syntaxformer.data.dependency import read_dependencies
from syntaxformer.evaluation.baselines import run_baselines
from syntaxformer.evaluation.dependency import PROTOCOL as DEPENDENCY_PROTOCOL
from syntaxformer.evaluation.protocols import DEFAULT_PROTOCOL, get_protocol
from syntaxformer.workflows.evaluate import protocol_fields

#: Number of seeds of the random baseline: seed ``S`` uses seeds S .. S + 4.
N_SEEDS = 5


def random_seeds(seed: int) -> tuple[int, ...]:
    """The seeds of the random baseline for ``seed``: ``seed .. seed + N_SEEDS - 1``."""
    return tuple(range(seed, seed + N_SEEDS))


def baselines_report(
    treebank: str = "ptb-sample", dependencies: str | None = None, seed: int = 0, protocol: str = "prpn"
) -> dict:
    """Score every baseline against ``treebank`` (and the chains against its dependencies).

    Args:
        treebank: ``'ptb-sample'`` (or a half) or a treebank path (file, folder, glob).
        dependencies: gold dependencies for the chains (``'ptb-sample'``, a ``.conllu`` file, ``.dp``
            files); None = ptb-sample's when ``treebank`` is ptb-sample, else no chains.
        seed: first seed of the random baseline (:func:`random_seeds`).
        protocol: the constituency protocol, a key of
            :data:`~syntaxformer.evaluation.protocols.PROTOCOLS` (default ``prpn``).

    Returns:
        :func:`~syntaxformer.evaluation.baselines.run_baselines`'s dict plus ``meta`` (treebank,
        dependencies, n_sentences, seed, seeds, protocol (its rules), protocol_name,
        protocol_source, dependency_protocol, seconds).

    Raises:
        InputError: unknown protocol, unreadable treebank or dependencies.
    """

    chosen = get_protocol(protocol)
    start = time.perf_counter()
    gold_trees = load_gold_trees(treebank)
    dependencies_source = dependencies
    if dependencies_source is None and ptb_sample_part(treebank) is not None:
        dependencies_source = treebank  # ptb-sample (or a half) has gold dependencies too
    gold_dependencies = None
    if dependencies_source is not None:
        gold_dependencies = read_dependencies(dependencies_source)
    seeds = random_seeds(seed)
    result = run_baselines(
        gold_trees,
        seeds=seeds,
        gold_dependencies=gold_dependencies,
        protocol=None if chosen.name == DEFAULT_PROTOCOL else chosen,
    )
    result["meta"] = {
        "treebank": str(treebank),
        "dependencies": dependencies_source,
        "n_sentences": len(gold_trees),
        "seed": seed,
        "seeds": list(seeds),
        **protocol_fields(chosen),
        "dependency_protocol": DEPENDENCY_PROTOCOL if gold_dependencies is not None else None,
        "seconds": round(time.perf_counter() - start, 3),
    }
    return result
