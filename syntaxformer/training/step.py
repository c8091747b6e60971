"""The training step's work on the device, chosen once per run: a step runner.

A step runner takes a batch and does what one optimizer step does to the model: zero the gradients,
the training loss (forward), backward, gradient clipping, the optimizer step; it returns the loss,
detached and not read. The loop seeds the step's dropout before it and steps the schedule after it
(:meth:`~syntaxformer.training.loop.TrainingLoop.device_step`). :func:`make_step_runner` picks the
runner from the run's ``step_graph`` (DESIGN.md, "The training step on an accelerator"):

* ``"none"`` (:class:`EagerStep`): the step as PyTorch runs it, operator by operator.
* ``"compile"`` (:class:`CompiledStep`): the training loss (forward; its backward by AOT autograd)
  compiled by ``torch.compile(fullgraph=True, dynamic=False)``, one graph per batch shape
  (``mode="reduce-overhead"``, CUDA graphs, on CUDA); backward, clipping and the fused Adam step run
  eagerly after it.
* ``"cuda-graph"`` (:class:`CudaGraphStep`, CUDA only): the whole step (forward, backward, clipping, the
  fused Adam update with ``capturable`` and the learning rate read from a device tensor) captured by
  ``torch.cuda.graph`` once per batch shape, after :data:`CUDA_GRAPH_WARMUP` eager steps of that shape on
  a side stream, then replayed: one launch a step. Batches of few shapes (``fixed_shapes``) keep the
  number of graphs small. With bfloat16 autocast (``bf16``) its cache of cast weights is off
  (``autocast_cache``), as PyTorch's notes on CUDA graphs ask: every cast is a captured kernel, made
  again at each replay from the updated weights.

Where a graph cannot be made (not CUDA, several processes, an optimiser that cannot be captured), the
eager runner is chosen with one log line saying why; a capture or compilation that fails at a step
falls back to it in the loop, with one log line. :func:`use_tf32` (``tf32``) lets CUDA's float32
matrix products use TensorFloat-32. On the CPU neither option changes anything.
"""

from __future__ import annotations

import logging

import torch

from syntaxformer.errors import InputError

logger = logging.getLogger(__name__)

#: ``step_graph`` values
STEP_GRAPHS = ("none", "compile", "cuda-graph")
#: eager steps of a batch shape (on a side stream) before its CUDA graph is captured
CUDA_GRAPH_WARMUP = 3


def use_tf32(device: torch.device, on: bool) -> bool:
    """Let float32 matrix products and convolutions on CUDA use TensorFloat-32 when ``on`` and
    ``device`` is CUDA (``torch.backends.cuda.matmul.allow_tf32``, ``torch.backends.cudnn.allow_tf32``;
    process-wide). Returns whether it did; elsewhere nothing changes (the CPU has no TF32)."""
    if not on or device.type != "cuda":
        return False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return True


def shape_key(batch) -> tuple:
    """The shapes and dtypes of a batch's tensors (and of its dict fields'), by field name: one graph each."""
    key = []
    for name, value in sorted(batch.values().items()):
        items = sorted(value.items()) if isinstance(value, dict) else [("", value)]
        for sub, x in items:
            if isinstance(x, torch.Tensor):
                key.append((name, sub, tuple(x.shape), x.dtype))
    return tuple(key)


def _copy_batch(source, target) -> None:
    """Copy every tensor of batch ``source`` into the same-shaped tensor of ``target`` (its static buffers)."""
    for name, value in source.values().items():
        into = getattr(target, name)
        pairs = [(value[k], into[k]) for k in value] if isinstance(value, dict) else [(value, into)]
        for x, y in pairs:
            if isinstance(x, torch.Tensor):
                y.copy_(x, non_blocking=True)


def _cloned(batch):
    """A copy of ``batch`` with every tensor cloned (a graph's static inputs)."""
    cloned = {}
    for name, value in batch.values().items():
        if isinstance(value, dict):
            value = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in value.items()}
        elif isinstance(value, torch.Tensor):
            value = value.clone()
        cloned[name] = value
    return type(batch)(**cloned)


class EagerStep:
    """``step_graph="none"``: zero the gradients, the training loss
    (:meth:`~syntaxformer.training.loop.TrainingLoop.training_loss_of`), backward, clipping and the
    optimiser step (:meth:`~syntaxformer.training.loop.TrainingLoop.backward_and_update`), as PyTorch runs
    them; no value is read on the host.

    Args:
        loop: the training loop.
    """

    name = "none"

    def __init__(self, loop):
        self.loop = loop

    def __call__(self, batch) -> torch.Tensor:
        """One step on ``batch``; returns its loss (detached)."""
        loop = self.loop
        loss = loop.training_loss_of(batch)
        loop.optimizer.zero_grad(set_to_none=True)
        loop.backward_and_update(loss)
        return loss.detach()


class CompiledStep:
    """``step_graph="compile"``: zero the gradients, the loss compiled by ``torch.compile``, backward,
    clipping and the optimiser step (:meth:`~syntaxformer.training.loop.TrainingLoop.backward_and_update`).

    Args:
        loop: the training loop (its ``training_loss_of``, ``backward_and_update``, ``optimizer``, ``device``).
        backend: a ``torch.compile`` backend (None: inductor, ``mode="reduce-overhead"`` on CUDA; e.g.
            ``"aot_eager"`` where inductor is slow to compile).
    """

    name = "compile"

    def __init__(self, loop, backend: str | None = None):
        self.loop = loop
        options = dict(fullgraph=True, dynamic=False)
        if backend is not None:
            options["backend"] = backend
        elif loop.device.type == "cuda":
            options["mode"] = "reduce-overhead"
        self._loss = torch.compile(loop.training_loss_of, **options)

    def __call__(self, batch) -> torch.Tensor:
        """One step on ``batch``; returns its loss (detached, a copy the next step does not overwrite)."""
        loop = self.loop
        if loop.device.type == "cuda":
            torch.compiler.cudagraph_mark_step_begin()
        loop.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(batch.to(loop.device))
        loop.backward_and_update(loss)
        return loss.detach().clone()

    def loss(self, batch) -> torch.Tensor:
        """The compiled loss of ``batch`` (on the loop's device; compiled at the first call of a shape)."""
        # autograd functions whose backward calls autograd (torch.autograd.grad) are traced only when told to
        with torch._dynamo.config.patch(trace_autograd_ops=True):
            return self._loss(batch)


class CudaGraphStep:
    """``step_graph="cuda-graph"``: the whole step captured per batch shape and replayed (module docstring).

    Args:
        loop: the training loop (its ``training_loss_of``, ``backward_and_update``, ``seed_dropout``,
            ``optimizer``, ``device``); the optimiser's groups are made ``capturable``.
        warmup: eager steps of a shape before its capture.
    """

    name = "cuda-graph"

    def __init__(self, loop, warmup: int = CUDA_GRAPH_WARMUP):
        self.loop, self.warmup = loop, warmup
        self._graphs: dict[tuple, tuple] = {}  # shape key -> (graph, static batch, static loss)
        self._eager: dict[tuple, int] = {}  # shape key -> eager steps taken
        loop.autocast_cache = False  # bf16: no cached casts across the capture (module docstring)
        groups = loop.optimizer.param_groups
        for group in groups:
            group["capturable"] = True
        self._lrs = [torch.zeros((), device=loop.device) for _ in groups]  # the captured updates read these
        self._side = torch.cuda.Stream(loop.device)

    def __call__(self, batch) -> torch.Tensor:
        """One step on ``batch``; returns its loss (detached, a copy the next replay does not overwrite)."""
        loop = self.loop
        batch = batch.to(loop.device)
        key = shape_key(batch)
        if key not in self._graphs:
            if self._eager.get(key, 0) < self.warmup:
                self._eager[key] = self._eager.get(key, 0) + 1
                return self._side_stream_step(batch)
            self._graphs[key] = self._capture(batch)
            loop.seed_dropout()  # the replay draws the dropout of this step, as the eager step would
        graph, static, loss = self._graphs[key]
        _copy_batch(batch, static)
        for lr, group in zip(self._lrs, loop.optimizer.param_groups):
            lr.fill_(group["lr"])
        graph.replay()
        return loss.clone()

    def _side_stream_step(self, batch) -> torch.Tensor:
        """An eager step on the side stream (warm-up: lazy initialisations happen outside any capture)."""
        loop, current = self.loop, torch.cuda.current_stream(self.loop.device)
        self._side.wait_stream(current)
        with torch.cuda.stream(self._side):
            loop.optimizer.zero_grad(set_to_none=True)
            loss = loop.training_loss_of(batch)
            loop.backward_and_update(loss)
            loss = loss.detach()
        current.wait_stream(self._side)
        return loss

    def _capture(self, batch) -> tuple:
        """Capture the step of ``batch``'s shape: ``(graph, its static batch, its static loss)``. The
        optimiser reads the learning rates from device tensors while captured (floats again after)."""
        loop = self.loop
        static = _cloned(batch)
        groups = loop.optimizer.param_groups
        floats = [group["lr"] for group in groups]
        for lr, group in zip(self._lrs, groups):
            lr.fill_(group["lr"])
            group["lr"] = lr
        graph = torch.cuda.CUDAGraph()
        loop.optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize(loop.device)
        try:
            with torch.cuda.graph(graph):
                loss = loop.training_loss_of(static)
                loop.backward_and_update(loss)
                loss = loss.detach()
        finally:
            for group, lr in zip(groups, floats):
                group["lr"] = lr
        return graph, static, loss


def make_step_runner(loop, mode: str, backend: str | None = None):
    """The step runner of ``step_graph`` ``mode`` for ``loop``: the eager one for "none", and, with one
    log line saying why, where the mode cannot run (:data:`STEP_GRAPHS`; module docstring).

    Args:
        loop: the training loop (after its build and resume).
        mode: "none", "compile" or "cuda-graph".
        backend: ``torch.compile``'s backend for "compile" (None: inductor).
    Returns:
        an :class:`EagerStep`, a :class:`CompiledStep` or a :class:`CudaGraphStep`.
    Raises:
        InputError: an unknown ``mode``.
    """
    if mode not in STEP_GRAPHS:
        raise InputError(f"--step-graph must be one of {', '.join(STEP_GRAPHS)}, got {mode!r}")
    if mode == "none":
        return EagerStep(loop)
    reason = None
    if not getattr(loop, "step_graphable", False):
        reason = f"{type(loop).__name__} keeps state across steps"
    elif loop.world > 1:
        reason = "several processes (DistributedDataParallel)"
    elif mode == "cuda-graph" and loop.device.type != "cuda":
        reason = f"no CUDA device: the run is on {loop.device}"
    elif mode == "cuda-graph" and not all("capturable" in g for g in loop.optimizer.param_groups):
        reason = f"{type(loop.optimizer).__name__} cannot be captured"
    if reason is not None:
        logger.warning("--step-graph %s: the eager step instead (%s)", mode, reason)
        return EagerStep(loop)
    return CompiledStep(loop, backend) if mode == "compile" else CudaGraphStep(loop)


__all__ = [
    "STEP_GRAPHS",
    "CUDA_GRAPH_WARMUP",
    "use_tf32",
    "shape_key",
    "EagerStep",
    "CompiledStep",
    "CudaGraphStep",
    "make_step_runner",
]
