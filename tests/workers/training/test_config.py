import pytest

from workers.training.config import TrainConfig, model_config


def _trial(**extra):
    config = {
        "method": "autonorm_s",
        "dataset": "digits",
        "model": "vit_lite_tiny",
        "knobs": {"tau": 0.7, "t_freeze": 3, "eps_h": 0.2, "width_expansion": 2.0, "lr": 2e-3},
        "lr": 1e-3,
        "epochs": 4,
        "seed": 5,
        "study_id": "s1",
        "phase": "tune",
        "trial_key": "s1-autonorm_s-5",
        "mlflow_tracking_uri": "http://127.0.0.1:5000",
        "mlflow_experiment_id": "1",
        "mlflow_parent_run_id": "abc",
    }
    config.update(extra)
    return config


def test_trial_config_skips_orchestration_keys_and_reads_freeze_knobs():
    cfg = TrainConfig.from_trial_config(_trial())
    assert (cfg.method, cfg.dataset, cfg.epochs, cfg.seed) == ("autonorm_s", "digits", 4, 5)
    assert (cfg.t_freeze, cfg.eps_h) == (3, 0.2)


def test_a_hyperparameter_among_the_knobs_overrides_the_top_level_value():
    assert TrainConfig.from_trial_config(_trial()).lr == 2e-3


def test_unknown_trial_config_keys_and_unknown_knobs_are_errors():
    with pytest.raises(ValueError, match="unknown trial config keys"):
        TrainConfig.from_trial_config(_trial(epoch=3))
    with pytest.raises(ValueError, match="unknown knobs"):
        TrainConfig.from_trial_config(_trial(knobs={"temperature": 1.0}))


def test_mixing_flags_become_alphas():
    cfg = TrainConfig.from_trial_config(_trial(mixup=True, cutmix=False))
    assert (cfg.mixup, cfg.cutmix) == (0.8, 0.0)


def test_freeze_knobs_default_to_the_paper_values():
    cfg = TrainConfig()
    assert (cfg.t_freeze, cfg.eps_h) == (10, 0.1)


def test_model_config_layers_dataset_fields_norm_knobs_then_overrides():
    cfg = TrainConfig.from_trial_config(_trial(model_overrides={"depth": 3, "mlp_ratio": 4.0}))
    fields = model_config(cfg, norm_kind="autonorm", model_fields={"num_classes": 10, "image_size": 8})
    assert fields["num_classes"] == 10 and fields["norm"] == "autonorm"
    assert fields["norm_options"] == {"tau": 0.7}
    assert fields["depth"] == 3
    assert fields["mlp_ratio"] == 4.0  # the explicit override wins over the width_expansion knob


def test_tau_is_only_passed_to_gated_norms():
    cfg = TrainConfig.from_trial_config(_trial())
    assert "norm_options" not in model_config(cfg, norm_kind="layernorm", model_fields={})


@pytest.mark.parametrize("bad", [{"epochs": 0}, {"eval_split": "train"}, {"label_smoothing": 1.0}])
def test_invalid_budgets_are_rejected(bad):
    with pytest.raises(ValueError):
        TrainConfig(**bad)


@pytest.mark.parametrize(
    "epochs, knobs",
    [(4, {"t_freeze": 4}), (4, {"t_freeze": 9}), (10, {}), (1, {"t_freeze": 1}), (4, {"t_freeze": 0})],
)
def test_autonorm_s_refuses_a_t_freeze_it_could_never_act_on(epochs, knobs):
    with pytest.raises(ValueError, match="needs 1 <= t_freeze < epochs"):
        TrainConfig(method="autonorm_s", epochs=epochs, knobs=knobs)


def test_autonorm_s_accepts_a_freeze_before_its_last_epoch_and_other_methods_ignore_t_freeze():
    assert TrainConfig(method="autonorm_s", epochs=11).t_freeze == 10  # the paper default fits
    assert TrainConfig(method="autonorm_s", epochs=4, knobs={"t_freeze": 3}).t_freeze == 3
    assert TrainConfig(method="autonorm", epochs=2).t_freeze == 10  # no freeze schedule to refuse


def test_a_trial_config_is_refused_the_same_way():
    with pytest.raises(ValueError, match="t_freeze below 4"):
        TrainConfig.from_trial_config(_trial(knobs={"t_freeze": 4}))


def test_freeze_signal_and_scope_default_to_train_batches_and_one_global_decision():
    cfg = TrainConfig.from_trial_config(_trial())
    assert (cfg.freeze_signal, cfg.freeze_scope) == ("train", "global")
    chosen = TrainConfig.from_trial_config(
        _trial(knobs={"t_freeze": 2, "freeze_signal": "val", "freeze_scope": "per_layer"})
    )
    assert (chosen.freeze_signal, chosen.freeze_scope) == ("val", "per_layer")


@pytest.mark.parametrize("knobs", [{"freeze_signal": "test"}, {"freeze_scope": "layer"}])
def test_unknown_freeze_signals_and_scopes_are_refused(knobs):
    with pytest.raises(ValueError, match="must be one of"):
        TrainConfig.from_trial_config(_trial(knobs={"t_freeze": 2, **knobs}))


def test_the_post_freeze_gate_defaults_to_sampling_and_reaches_only_autonorm_layers():
    assert TrainConfig.from_trial_config(_trial()).post_freeze_gate == "sample"
    cfg = TrainConfig.from_trial_config(_trial(knobs={"t_freeze": 2, "post_freeze_gate": "expected"}))
    assert cfg.post_freeze_gate == "expected"
    fields = model_config(cfg, norm_kind="autonorm", model_fields={})
    assert fields["norm_options"] == {"post_freeze_gate": "expected"}
    assert "norm_options" not in model_config(cfg, norm_kind="layernorm", model_fields={})


def test_an_unknown_post_freeze_gate_is_refused():
    with pytest.raises(ValueError, match="post_freeze_gate must be one of sample, expected, hard"):
        TrainConfig.from_trial_config(_trial(knobs={"t_freeze": 2, "post_freeze_gate": "argmax"}))


def test_a_method_s_fixed_norm_options_come_first_then_its_knobs_then_the_spec_s_own():
    cfg = TrainConfig.from_trial_config(
        _trial(method="autonorm", knobs={"tau": 0.7}, model_overrides={"norm_options": {"eps": 1e-4}})
    )
    fields = model_config(
        cfg, norm_kind="autonorm", model_fields={}, method_options={"tau": 2.0, "selector_hidden": 16}
    )
    assert fields["norm_options"] == {"tau": 0.7, "selector_hidden": 16, "eps": 1e-4}


def test_a_plugin_knob_with_a_norm_option_reaches_the_layer_that_takes_it():
    from normlab import REGISTRY, Knob, NormKind

    REGISTRY.norms.add(NormKind("test_scaled", ("scale",), source="test-plugin"))
    REGISTRY.knobs.add(
        Knob(
            "test_scale",
            "float",
            "s",
            0.0,
            2.0,
            methods=("frozen_ln",),
            norm_option="scale",
            source="test-plugin",
        )
    )
    try:
        cfg = TrainConfig.from_trial_config(_trial(method="frozen_ln", knobs={"test_scale": 1.5}))
        assert model_config(cfg, norm_kind="test_scaled", model_fields={})["norm_options"] == {"scale": 1.5}
        assert "norm_options" not in model_config(cfg, norm_kind="layernorm", model_fields={})
    finally:
        REGISTRY.norms.remove_source("test-plugin")
        REGISTRY.knobs.remove_source("test-plugin")
