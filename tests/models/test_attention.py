"""Attention's explicit form (plain matmuls and a softmax, used by the compiled seed-batched step) computes
what the fused SDPA kernels compute, with and without a mask, forward and backward."""

import pytest
import torch
import torch.nn.functional as F

from models.layers import Attention, explicit_attention


def _qkv(generator, shape=(3, 2, 7, 8)):
    return [
        torch.randn(shape, generator=generator, dtype=torch.float64, requires_grad=True) for _ in range(3)
    ]


@pytest.mark.parametrize("masked", [False, True])
def test_explicit_attention_equals_sdpa_forward_and_backward(masked):
    generator = torch.Generator().manual_seed(0)
    q, k, v = _qkv(generator)
    # causal, plus one padded key: every query keeps at least itself
    mask = torch.ones(7, 7, dtype=torch.bool).tril() if masked else None
    if mask is not None:
        mask[4:, 2] = False
    ours = explicit_attention(q, k, v, mask, dropout=0.0)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ours, theirs)
    grad_out = torch.randn(ours.shape, generator=generator, dtype=torch.float64)
    ours_grads = torch.autograd.grad(ours, (q, k, v), grad_out)
    theirs_grads = torch.autograd.grad(theirs, (q, k, v), grad_out)
    for mine, reference in zip(ours_grads, theirs_grads, strict=True):
        torch.testing.assert_close(mine, reference)


def test_explicit_attention_drops_weights_only_when_asked():
    generator = torch.Generator().manual_seed(1)
    q, k, v = (t.detach() for t in _qkv(generator))
    plain = explicit_attention(q, k, v, None, dropout=0.0)
    torch.manual_seed(0)
    dropped = explicit_attention(q, k, v, None, dropout=0.5)
    assert not torch.allclose(plain, dropped)


def test_the_attention_module_gives_the_same_output_either_way():
    torch.manual_seed(0)
    attention = Attention(dim=16, heads=4).eval()
    x = torch.randn(2, 5, 16)
    fused = attention(x)
    attention.explicit_math = True
    torch.testing.assert_close(attention(x), fused, rtol=1e-5, atol=1e-6)
