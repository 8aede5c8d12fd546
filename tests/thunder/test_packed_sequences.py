"""Packed sequences (``pack_padded_sequence`` -> an RNN -> ``pad_packed_sequence``) compile: the
packed data's length and the batch sizes are values read from data, so one program serves
every set of lengths, with eager's outputs, states and gradients."""

import warnings

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pack_sequence, pad_packed_sequence

import thunder

CACHES = ["constant values", "symbolic values"]


class Encoder(torch.nn.Module):
    def __init__(self, rnn: torch.nn.Module, enforce_sorted: bool, total_length: int | None):
        super().__init__()
        self.rnn = rnn
        self.enforce_sorted = enforce_sorted
        self.total_length = total_length

    def forward(self, x, lengths):
        packed = pack_padded_sequence(
            x, lengths, batch_first=True, enforce_sorted=self.enforce_sorted
        )
        out, state = self.rnn(packed)
        padded, out_lengths = pad_packed_sequence(
            out, batch_first=True, total_length=self.total_length
        )
        return padded, state, out_lengths


def _rnns():
    return {
        "lstm": lambda: torch.nn.LSTM(4, 5, batch_first=True),
        "gru_2_layers_bidirectional": lambda: torch.nn.GRU(
            4, 3, num_layers=2, bidirectional=True, batch_first=True
        ),
        "rnn_tanh": lambda: torch.nn.RNN(4, 6, batch_first=True),
    }


def _leaves(value):
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _leaves(v)]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("enforce_sorted, total_length", [(False, None), (True, 7)])
@pytest.mark.parametrize("rnn", list(_rnns()))
def test_packed_rnn_like_eager(rnn, enforce_sorted, total_length, cache):
    torch.manual_seed(0)
    model = Encoder(_rnns()[rnn](), enforce_sorted, total_length)
    jm = thunder.jit(model, cache=cache)
    batches = [[6, 2, 4], [5, 5, 1], [3, 2, 2], [6, 6, 6]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compiled: no eager run, no split
        for lengths in batches:
            if enforce_sorted:
                lengths = sorted(lengths, reverse=True)
            x = torch.randn(3, 6, 4, requires_grad=True)
            lengths_t = torch.tensor(lengths)
            expected = model(x, lengths_t)
            got = jm(x, lengths_t)
            for g, e in zip(_leaves(got), _leaves(expected), strict=True):
                assert g.shape == e.shape and g.dtype == e.dtype
                torch.testing.assert_close(g, e)
            floats = [t for t in _leaves(expected) if t.is_floating_point()]
            cotangents = [torch.randn_like(t) for t in floats]
            wrt = [x, *model.parameters()]
            grads_e = torch.autograd.grad(floats, wrt, cotangents)
            floats_j = [t for t in _leaves(got) if t.is_floating_point()]
            grads_j = torch.autograd.grad(floats_j, wrt, cotangents)
            for g, e in zip(grads_j, grads_e, strict=True):
                torch.testing.assert_close(g, e)
    assert thunder.compile_stats(jm).compilations == 1


def test_pack_sequence_of_a_list_like_eager():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4)

    def f(a, b, c):
        out, (h, _) = lstm(pack_sequence([a, b, c], enforce_sorted=False))
        padded, lengths = pad_packed_sequence(out)
        return padded.sum(0), h, lengths

    jf = thunder.jit(f)
    for n in (4, 6, 2):
        seqs = [torch.randn(k, 3) for k in (n, 3, 5)]
        expected, got = f(*seqs), jf(*seqs)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e)
    assert thunder.compile_stats(jf).eager_fallbacks == 0
