"""Small models defined in the repository, used by the demo, the tests and the benchmarks."""

from thunder.models.conv import ConvBlock
from thunder.models.gpt import GPT, GPTConfig

__all__ = ["GPT", "ConvBlock", "GPTConfig"]
