import pytest
import torch

from workers.training.mixing import BatchMixer


def _batch(batch=16, classes=10):
    x = torch.randn(batch, 3, 8, 8, generator=torch.Generator().manual_seed(0))  # (B, C, H, W)
    y = torch.arange(batch) % classes
    return x, y


@pytest.mark.parametrize("mixup,cutmix", [(0.8, 0.0), (0.0, 1.0), (0.8, 1.0)])
def test_mixing_keeps_image_shape_and_returns_probability_targets(mixup, cutmix):
    x, y = _batch()
    mixer = BatchMixer(num_classes=10, mixup_alpha=mixup, cutmix_alpha=cutmix, seed=3)
    for _ in range(5):
        mixed, targets = mixer(x, y)
        assert mixed.shape == x.shape
        assert targets.shape == (16, 10)
        assert torch.allclose(targets.sum(-1), torch.ones(16))
        assert (targets >= 0).all()


def test_mixup_is_a_convex_combination_of_two_images_with_matching_target_weights():
    x = torch.randn(10, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    y = torch.arange(10)  # distinct labels: each target row names its partner
    mixed, targets = BatchMixer(num_classes=10, mixup_alpha=0.8, seed=1)(x, y)
    lam = targets[torch.arange(10), y]
    for i in range(10):
        if lam[i] == 1.0:  # paired with itself
            assert torch.allclose(mixed[i], x[i])
            continue
        partner = int(torch.tensor([targets[i, j] if j != i else -1.0 for j in range(10)]).argmax())
        assert targets[i, partner] == pytest.approx(1 - lam[i].item())
        assert torch.allclose(mixed[i], lam[i] * x[i] + (1 - lam[i]) * x[partner], atol=1e-6)
    assert not torch.equal(mixed, x)


def test_cutmix_pastes_a_box_and_weights_targets_by_the_pasted_area():
    x = torch.zeros(4, 1, 8, 8)
    x[1] = 1.0  # only image 1 is bright: pasted boxes from it show up as ones
    y = torch.tensor([0, 1, 2, 3])
    mixer = BatchMixer(num_classes=4, cutmix_alpha=1.0, seed=0)
    for _ in range(10):
        mixed, targets = mixer(x, y)
        changed = (mixed != x).float()
        for row in range(4):
            if row == 1:
                continue
            pasted_share = changed[row].mean().item()
            if pasted_share > 0:  # the partner was image 1: the share of its label equals the box area
                assert targets[row, 1].item() == pytest.approx(pasted_share)


def test_mixer_state_replays_the_same_mixing():
    x, y = _batch()
    mixer = BatchMixer(num_classes=10, mixup_alpha=0.8, cutmix_alpha=1.0, seed=7)
    mixer(x, y)
    state = mixer.state_dict()
    first = mixer(x, y)
    replay = BatchMixer(num_classes=10, mixup_alpha=0.8, cutmix_alpha=1.0, seed=123)
    replay.load_state_dict(state)
    second = replay(x, y)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


def test_mixer_without_any_alpha_is_rejected():
    with pytest.raises(ValueError):
        BatchMixer(num_classes=10)
