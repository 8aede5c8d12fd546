"""torch.distributions inside a jitted function, as eager runs them: with argument validation on
(torch's default), a parameter or value outside its constraint (a NaN or negative scale, a
probability above 1, a class index out of range) raises eager's ValueError on every call that has
one, whatever the calls before it had; valid inputs give eager's values and gradients.

The validation is a decision on tensor data (``if not torch._is_all_true(valid): raise``) whose
message prints the tensor: the call runs split by torch.compile there, and dynamo's first
torch.compile switches validation off process-wide (its TorchPatcher), which the split call must
not inherit.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import torch
from torch import distributions as D

import thunder

NAN = float("nan")


@pytest.fixture(autouse=True)
def _validating() -> Iterator[None]:
    # Another test's torch.compile in this process may have switched it off (for eager too).
    before = D.Distribution._validate_args
    D.Distribution.set_default_validate_args(True)
    yield
    D.Distribution.set_default_validate_args(before)


def _copies(args: Sequence[Any]) -> list[Any]:
    return [
        a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
        for a in args
    ]


def _matches_eager(
    fn: Callable[..., Any], calls: Sequence[Sequence[Any]], cache: str | None = None
) -> None:
    """Each call of the jitted ``fn`` raises eager's ValueError where eager raises, else gives
    eager's values (and gradients of the arguments that require grad)."""
    jf = thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)
    for args in calls:
        ours, theirs = _copies(args), _copies(args)
        try:
            want = fn(*theirs)
        except ValueError as e:
            with pytest.raises(ValueError) as raised, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                jf(*ours)
            assert str(raised.value) == str(e)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = jf(*ours)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, equal_nan=True)
        wrt_ours = [a for a in ours if isinstance(a, torch.Tensor) and a.requires_grad]
        wrt_theirs = [a for a in theirs if isinstance(a, torch.Tensor) and a.requires_grad]
        if want.requires_grad and wrt_theirs:
            cot = torch.randn_like(want)
            got_grads = torch.autograd.grad(got, wrt_ours, cot)
            want_grads = torch.autograd.grad(want, wrt_theirs, cot)
            for g, w in zip(got_grads, want_grads):
                torch.testing.assert_close(g, w)


def _r(*shape: int, seed: int, grad: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def _scale(seed: int, grad: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(3, generator=g) + 0.5).requires_grad_(grad)


NAN_SCALE = torch.tensor([1.0, NAN, 1.0])
NEGATIVE_SCALE = torch.tensor([1.0, -1.0, 1.0])


def _normal_log_prob(loc: torch.Tensor, scale: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return D.Normal(loc, scale).log_prob(x)


def _normal_entropy(loc: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return D.Normal(loc, scale).entropy() + loc


def _normal_rsample(loc: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    torch.manual_seed(0)
    return D.Normal(loc, scale).rsample((2,))


def _independent_log_prob(loc: torch.Tensor, scale: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return D.Independent(D.Normal(loc, scale), 1).log_prob(x)


def _scale_calls(with_x: bool, first_invalid: bool) -> list[list[torch.Tensor]]:
    scales = [_scale(0, grad=True), NAN_SCALE, _scale(1, grad=True), NEGATIVE_SCALE, _scale(2)]
    if first_invalid:
        scales = [NAN_SCALE, *scales]
    return [
        [_r(3, seed=i, grad=True), s, *([_r(3, seed=i + 10)] if with_x else [])]
        for i, s in enumerate(scales)
    ]


@pytest.mark.parametrize("first_invalid", [False, True], ids=["valid_first", "invalid_first"])
@pytest.mark.parametrize("cache", [None, "symbolic values"])
@pytest.mark.parametrize(
    "fn, with_x",
    [
        (_normal_log_prob, True),
        (_normal_entropy, False),
        (_normal_rsample, False),
        (_independent_log_prob, True),
    ],
    ids=["normal_log_prob", "normal_entropy", "normal_rsample", "independent_log_prob"],
)
def test_normal_validates_its_scale_on_every_call(fn, with_x, cache, first_invalid):
    _matches_eager(fn, _scale_calls(with_x, first_invalid), cache)


def _categorical_log_prob(logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return D.Categorical(logits=logits).log_prob(x)


def _categorical_probs_entropy(probs: torch.Tensor) -> torch.Tensor:
    return D.Categorical(probs=probs).entropy()


def _categorical_sample(logits: torch.Tensor) -> torch.Tensor:
    torch.manual_seed(0)
    return D.Categorical(logits=logits).sample((5,))


@pytest.mark.parametrize("first_invalid", [False, True], ids=["valid_first", "invalid_first"])
def test_categorical_validates_logits_probs_and_values(first_invalid):
    logits = [
        (_r(4, seed=0, grad=True), torch.tensor(1)),
        (torch.tensor([0.0, NAN, 0.0, 0.0]), torch.tensor(1)),
        (_r(4, seed=1, grad=True), torch.tensor(5)),  # out of the support
        (_r(4, seed=2, grad=True), torch.tensor(2)),
    ]
    _matches_eager(_categorical_log_prob, logits[1:] + logits[:1] if first_invalid else logits)
    probs = [
        (torch.rand(4) + 0.1,),
        (torch.tensor([0.5, -0.1, 0.2, 0.4]),),
        (torch.rand(4) + 0.1,),
    ]
    _matches_eager(_categorical_probs_entropy, probs[1:] + probs[:1] if first_invalid else probs)
    samples = [(_r(4, seed=3),), (torch.tensor([0.0, NAN, 0.0, 0.0]),), (_r(4, seed=4),)]
    _matches_eager(_categorical_sample, samples[1:] + samples[:1] if first_invalid else samples)


def _bernoulli_log_prob(p: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return D.Bernoulli(probs=p).log_prob(x)


@pytest.mark.parametrize("first_invalid", [False, True], ids=["valid_first", "invalid_first"])
def test_bernoulli_validates_probs_and_values(first_invalid):
    g = torch.Generator().manual_seed(0)
    calls = [
        (torch.rand(3, generator=g).requires_grad_(), torch.tensor([0.0, 1.0, 1.0])),
        (torch.tensor([0.5, 1.5, 0.2]), torch.tensor([0.0, 1.0, 1.0])),
        (torch.rand(3, generator=g), torch.tensor([0.0, 0.5, 1.0])),  # not in {0, 1}
        (torch.rand(3, generator=g).requires_grad_(), torch.tensor([1.0, 0.0, 1.0])),
    ]
    _matches_eager(_bernoulli_log_prob, calls[1:] + calls[:1] if first_invalid else calls)


def _mvn(loc: torch.Tensor, cov: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    d = D.MultivariateNormal(loc, cov)
    return d.log_prob(x) + d.entropy()


@pytest.mark.parametrize("first_invalid", [False, True], ids=["valid_first", "invalid_first"])
def test_multivariate_normal_validates_its_covariance(first_invalid):
    def cov(seed: int) -> torch.Tensor:
        a = _r(3, 3, seed=seed)
        return (a @ a.T + 3 * torch.eye(3)).requires_grad_()

    calls = [
        (_r(3, seed=0, grad=True), cov(1), _r(3, seed=2)),
        (_r(3, seed=3), -cov(4).detach(), _r(3, seed=5)),
        (_r(3, seed=6, grad=True), cov(7), _r(3, seed=8)),
        (_r(3, seed=9), torch.full((3, 3), NAN), _r(3, seed=10)),
        (_r(3, seed=11, grad=True), cov(12), _r(3, seed=13)),
    ]
    _matches_eager(_mvn, calls[1:] + calls[:1] if first_invalid else calls)


def test_split_call_leaves_the_callers_validation_setting():
    jf = thunder.jit(_normal_log_prob)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError):
            jf(torch.zeros(3), NAN_SCALE, torch.zeros(3))
    assert D.Distribution._validate_args is True
    with pytest.raises(ValueError):
        _normal_log_prob(torch.zeros(3), NAN_SCALE, torch.zeros(3))


_FIRST_SPLIT_CALL = """
import warnings
import torch
from torch import distributions as D
import thunder

def fn(loc, scale, x):
    return D.Normal(loc, scale).log_prob(x)

warnings.simplefilter("ignore")
jf = thunder.jit(fn)
jf(torch.zeros(3), torch.ones(3), torch.zeros(3))
try:
    jf(torch.zeros(3), torch.tensor([1.0, float("nan"), 1.0]), torch.zeros(3))
except ValueError:
    print("raised")
else:
    print("returned")
"""


def test_first_split_call_of_the_process_validates():
    # Dynamo's TorchPatcher runs once per process, at its first torch.compile: a fresh process.
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _FIRST_SPLIT_CALL], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "raised"
