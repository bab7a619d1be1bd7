import itertools

import pytest
import torch

from models import build_model
from models.blocks import ResidualUnit
from models.layers import DropPath


def test_vit_lite_maps_images_to_class_logits_with_a_class_token_and_positions() -> None:
    model = build_model("vit_lite_tiny", {"num_classes": 7})
    x = torch.randn(3, 1, 8, 8)
    assert model(x).shape == (3, 7)
    assert model.embed(x).shape == (3, (8 // 2) ** 2 + 1, 32)
    assert model.pos_embed.shape == (1, 17, 32)


@pytest.mark.parametrize(("head", "out"), [("sequence", (2, 5)), ("token", (2, 9, 5)), ("lm", (2, 9, 40))])
def test_encoder_heads_have_the_documented_output_shapes(head: str, out: tuple[int, ...]) -> None:
    model = build_model("encoder_tiny", {"head": head, "num_classes": 5, "vocab_size": 40})
    assert model(torch.randint(1, 40, (2, 9))).shape == out


def test_encoder_ignores_pad_tokens_in_attention_and_pooling() -> None:
    model = build_model("encoder_tiny", {"vocab_size": 30}).eval()
    tokens = torch.tensor([[5, 6, 7, 0, 0]])
    other_pads = torch.tensor([[5, 6, 7, 0, 0]])
    with torch.no_grad():
        base = model(tokens)
        # Changing what sits at pad positions' embeddings cannot matter: they are masked and not pooled.
        model.token_embed.weight[0].normal_()
        torch.testing.assert_close(model(other_pads), base)


def test_lm_head_is_causal_so_later_tokens_do_not_change_earlier_outputs() -> None:
    model = build_model("encoder_tiny", {"head": "lm", "vocab_size": 30}).eval()
    a = torch.tensor([[3, 4, 5, 6]])
    b = torch.tensor([[3, 4, 9, 9]])
    with torch.no_grad():
        torch.testing.assert_close(model(a)[:, :2], model(b)[:, :2])


def test_tabular_transformer_makes_one_token_per_feature_plus_a_class_token() -> None:
    model = build_model("tabular_tiny", {"num_features": 6, "num_outputs": 2})
    x = torch.randn(4, 6)
    assert model.embed(x).shape == (4, 7, 32)
    assert model(x).shape == (4, 2)


def test_drop_path_follows_a_linear_depth_schedule_and_layer_scale_starts_at_1e_4() -> None:
    model = build_model("vit_lite_paper")
    rates = [block.mlp.drop_path.drop_prob for block in model.blocks]
    assert rates[0] == 0.0 and rates[-1] == pytest.approx(0.1)
    assert all(b > a for a, b in itertools.pairwise(rates))
    assert torch.all(model.blocks[0].attn.layer_scale.gamma == 1e-4)
    no_ls = build_model("vit_lite_tiny", {"layer_scale_init": None})
    assert isinstance(no_ls.blocks[0].attn.layer_scale, torch.nn.Identity)


def test_drop_path_drops_whole_samples_in_training_and_is_identity_in_eval() -> None:
    drop = DropPath(0.5)
    x = torch.ones(200, 3, 4)
    y = drop(x)
    per_sample = y.flatten(1)
    assert set(per_sample.unique().tolist()) <= {0.0, 2.0}
    assert (per_sample == 0).all(1).any() and (per_sample == 2).all(1).any()
    assert torch.equal(drop.eval()(x), x)


@pytest.mark.parametrize("placement", ["pre", "post", "output", "none"])
def test_norm_placement_puts_the_norm_where_documented(placement: str) -> None:
    branch = torch.nn.Linear(4, 4)
    unit = ResidualUnit(4, branch, torch.nn.LayerNorm, placement, skip_scale=0.5).eval()
    h = torch.randn(2, 3, 4)
    norm = unit.norm
    expected = {
        "pre": h + 0.5 * branch(norm(h)),
        "post": norm(h + 0.5 * branch(h)),
        "output": h + 0.5 * norm(branch(h)),
        "none": h + 0.5 * branch(h),
    }[placement]
    torch.testing.assert_close(unit(h), expected)
    assert isinstance(norm, torch.nn.Identity) == (placement == "none")


def test_branch_knobs_set_width_activation_and_matrix_count() -> None:
    two = build_model("vit_lite_tiny", {"mlp_ratio": 3, "activation": "relu"}).blocks[0].mlp.branch
    assert two.fc_up.out_features == 96 and isinstance(two.act, torch.nn.ReLU)
    one = build_model("vit_lite_tiny", {"branch": "one_matrix", "activation": "tanh"}).blocks[0].mlp.branch
    assert one.fc_up.out_features == 32 and isinstance(one.fc_down, torch.nn.Identity)


def test_init_scale_multiplies_the_branch_weight_init() -> None:
    small = build_model("vit_lite_paper", {"init_scale": 0.1}).blocks[0].mlp.branch.fc_up.weight.std().item()
    base = build_model("vit_lite_paper").blocks[0].mlp.branch.fc_up.weight.std().item()
    assert small / base == pytest.approx(0.1, rel=0.05)


@pytest.mark.parametrize("norm", ["layernorm", "autonorm", "dyt", "adanorm", "film", "random"])
def test_a_tiny_vit_learns_a_fixed_batch_with_every_norm(norm: str) -> None:
    torch.manual_seed(0)
    model = build_model("vit_lite_tiny", {"norm": norm, "num_classes": 4, "dropout": 0.0})
    x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 4, (16,))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # Measured: final/initial loss 0.5 (autonorm, slowest) down to 1e-4 (film).
    assert losses[-1] < 0.75 * losses[0]
