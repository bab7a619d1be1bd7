"""The worker side reads its environment in one place; where a variable is unset it falls back to the
defaults the service's settings use too (studies.stack_defaults, their one owner)."""

from pathlib import Path

import pytest

from service.settings import Settings
from studies.stack_defaults import DEFAULT_CHECKPOINT_EVERY_S, DEFAULT_DATA_DIR, DEFAULT_WARM_IDLE_S
from workers.settings import WorkerSettings


def test_the_environment_sets_every_path_and_service_address():
    settings = WorkerSettings.from_env(
        {
            "NORMLAB_DATA_DIR": "/srv/normlab",
            "NORMLAB_OFFLINE_DATA": "/srv/offline",
            "DATABASE_URL": "postgresql+psycopg://db/normlab",
            "MLFLOW_TRACKING_URI": "http://mlflow:5000",
        }
    )
    assert settings == WorkerSettings(
        data_dir=Path("/srv/normlab"),
        offline_data_dir=Path("/srv/offline"),
        database_url="postgresql+psycopg://db/normlab",
        tracking_uri="http://mlflow:5000",
    )


def test_unset_or_empty_variables_fall_back_to_the_defaults():
    settings = WorkerSettings.from_env({"NORMLAB_DATA_DIR": "", "DATABASE_URL": ""})
    assert settings.data_dir == Path(DEFAULT_DATA_DIR).expanduser()
    assert settings.offline_data_dir == Path(DEFAULT_DATA_DIR).expanduser() / "offline"
    assert settings.database_url is None and settings.tracking_uri is None


def test_the_service_defaults_to_the_same_data_dir():
    assert DEFAULT_DATA_DIR == "~/.normlab"
    assert Settings.model_fields["data_dir"].default == Path(DEFAULT_DATA_DIR)


def test_warm_trial_hosts_are_on_unless_switched_off():
    assert WorkerSettings.from_env({}).trial_hosts is True
    assert WorkerSettings.from_env({"NORMLAB_TRIAL_HOSTS": "0"}).trial_hosts is False
    assert WorkerSettings.from_env({"NORMLAB_TRIAL_HOSTS": "off"}).trial_hosts is False
    assert Settings.model_fields["trial_hosts"].default is True


def test_a_trial_hosts_value_that_is_no_switch_is_refused_by_name():
    import pytest

    with pytest.raises(ValueError, match="maybe"):
        WorkerSettings.from_env({"NORMLAB_TRIAL_HOSTS": "maybe"})


def test_a_driver_uses_a_warm_driver_server_only_where_one_is_named():
    assert WorkerSettings.from_env({}).warm_driver_socket is None
    assert WorkerSettings.from_env({"NORMLAB_WARM_DRIVER_SOCKET": ""}).warm_driver_socket is None
    named = WorkerSettings.from_env({"NORMLAB_WARM_DRIVER_SOCKET": "/tmp/d/drivers.sock"})
    assert named.warm_driver_socket == Path("/tmp/d/drivers.sock")
    assert Settings.model_fields["warm_drivers"].default is True


def test_training_ahead_is_on_unless_switched_off():
    assert WorkerSettings.from_env({}).train_ahead is True
    assert WorkerSettings.from_env({"NORMLAB_TRAIN_AHEAD": "0"}).train_ahead is False
    assert Settings.model_fields["train_ahead"].default is True


def test_a_trial_checkpoints_every_ten_seconds_of_training_unless_told_otherwise():
    assert WorkerSettings.from_env({}).checkpoint_every_s == DEFAULT_CHECKPOINT_EVERY_S == 10.0
    assert WorkerSettings.from_env({"NORMLAB_CHECKPOINT_EVERY_S": "0"}).checkpoint_every_s == 0.0
    assert WorkerSettings.from_env({"NORMLAB_CHECKPOINT_EVERY_S": "2.5"}).checkpoint_every_s == 2.5
    assert Settings.model_fields["checkpoint_every_s"].default == DEFAULT_CHECKPOINT_EVERY_S


def test_warm_processes_are_released_after_ten_idle_minutes_unless_told_otherwise():
    assert WorkerSettings.from_env({}).warm_idle_s == DEFAULT_WARM_IDLE_S == 600.0
    assert WorkerSettings.from_env({"NORMLAB_WARM_IDLE_S": "0"}).warm_idle_s == 0.0
    assert Settings.model_fields["warm_idle_s"].default == DEFAULT_WARM_IDLE_S


@pytest.mark.parametrize("value", ["-1", "soon", "nan"])
def test_a_checkpoint_interval_that_is_no_number_of_seconds_is_refused_naming_the_value(value):
    with pytest.raises(ValueError, match=f"number of seconds.*{value!r}"):
        WorkerSettings.from_env({"NORMLAB_CHECKPOINT_EVERY_S": value})
