"""Structural priors on self-attention: the constituent prior (Tree Transformer) and the attention
kernels chosen by a config string (``ATTENTION_FUNCTIONS["eager" | "sdpa"]``)."""
from .attention import ATTENTION_FUNCTIONS
from .constituent import ConstituentAttention, ConstituentPrior

__all__ = ["ATTENTION_FUNCTIONS", "ConstituentAttention", "ConstituentPrior"]
