"""The one settings class: every knob of the service, read from the environment (or `.env`).

Names follow the deployment conventions: `DATABASE_URL`, `MLFLOW_TRACKING_URI` and `RAY_ADDRESS` as the
tools themselves spell them, everything else `NORMLAB_*` (e.g. `NORMLAB_API_PORT`). Every listener binds
to loopback unless told otherwise.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from studies.limits import DEFAULT_TRIAL_MEMORY_GIB, StudyLimits
from studies.stack_defaults import (
    DEFAULT_CHECKPOINT_EVERY_S,
    DEFAULT_DATA_DIR,
    DEFAULT_TRAIN_AHEAD,
    DEFAULT_TRIAL_HOSTS,
    DEFAULT_WARM_IDLE_S,
)

__all__ = ["RAY_PORT_OFFSETS", "RAY_PORT_RANGE", "Settings", "get_settings"]

_LOOPBACK = "127.0.0.1"
_MLFLOW_USERNAME = "normlab"  # the local MLflow's admin, unless MLFLOW_TRACKING_USERNAME names another

# Where each port of the local Ray head lies in the range NORMLAB_RAY_PORT_BASE starts (B + offset): the
# GCS at B, the rest just above it, the workers' ports filling the range up to B + RAY_PORT_RANGE - 1.
RAY_PORT_RANGE = 1000
RAY_PORT_OFFSETS = {
    "ray_gcs_port": 0,
    "ray_dashboard_port": 1,
    "ray_dashboard_agent_listen_port": 2,
    "ray_dashboard_agent_grpc_port": 3,
    "ray_node_manager_port": 4,
    "ray_object_manager_port": 5,
    "ray_metrics_export_port": 6,
    "ray_runtime_env_agent_port": 7,
    "ray_dashboard_metrics_port": 8,
    "ray_min_worker_port": 10,
    "ray_max_worker_port": RAY_PORT_RANGE - 1,
}


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="NORMLAB_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )

    # Where the SQLite database, the API token, MLflow's store and the dataset cache live.
    data_dir: Path = Field(Path(DEFAULT_DATA_DIR), validation_alias=_env("NORMLAB_DATA_DIR"))

    # Metadata database; None -> SQLite file `normlab.db` under data_dir. PostgreSQL:
    # postgresql+psycopg://user:password@host:5432/db
    database_url: str | None = Field(None, validation_alias=_env("DATABASE_URL", "NORMLAB_DATABASE_URL"))
    auto_migrate: bool = True  # run Alembic migrations to head when the API starts

    # The catalog's reports (what scripts/run_catalog.py writes) that the /catalog page shows; None -> the
    # source tree's reports/. The Docker image ships the repository's in /opt/normlab/reports and sets it.
    catalog_reports_dir: Path | None = None

    # MLflow tracking server; None -> http://{mlflow_host}:{mlflow_port}.
    mlflow_tracking_uri: str | None = Field(
        None, validation_alias=_env("MLFLOW_TRACKING_URI", "NORMLAB_MLFLOW_TRACKING_URI")
    )
    # Where a browser opens MLflow's UI, for the links NormLab prints and serves; None -> the tracking URI.
    # Set it when the services reach MLflow by a name a browser cannot (compose: http://mlflow:5000).
    mlflow_ui_url: str | None = None
    mlflow_host: str = _LOOPBACK  # where `normlab serve` binds the MLflow server it starts
    mlflow_port: int = Field(5000, ge=1, le=65535)
    mlflow_backend_store_uri: str | None = None  # None -> sqlite:///{data_dir}/mlflow.db
    mlflow_artifacts_dir: Path | None = None  # None -> {data_dir}/mlartifacts
    # The MLflow server `normlab serve` starts runs MLflow's basic-auth app (service.stack.mlflow_auth): every
    # request but /health needs a user and password, which the API, the study drivers and their trials
    # send. False: it answers every local process without credentials, as before.
    mlflow_auth: bool = True
    # The user and password of that server's admin (MLflow's client reads the same two variables); no
    # password -> generated into the data dir on its first start (service.auth.ensure_mlflow_credentials).
    mlflow_username: str = Field(
        _MLFLOW_USERNAME, validation_alias=_env("MLFLOW_TRACKING_USERNAME", "NORMLAB_MLFLOW_USERNAME")
    )
    mlflow_password: SecretStr | None = Field(
        None, validation_alias=_env("MLFLOW_TRACKING_PASSWORD", "NORMLAB_MLFLOW_PASSWORD")
    )

    # Ray cluster for study jobs; None -> `normlab serve` starts a local head with the ports below.
    ray_address: str | None = Field(None, validation_alias=_env("RAY_ADDRESS", "NORMLAB_RAY_ADDRESS"))
    ray_host: str = _LOOPBACK  # node IP of the local head
    # Every port the local head and its agents listen on is one of the settings below: Ray would pick the
    # others at random, and then two stacks on one machine can land on each other's ports. Set
    # NORMLAB_RAY_PORT_BASE=B to give a stack the contiguous range B..B+999 (RAY_PORT_OFFSETS: GCS B,
    # dashboard B+1, agents, managers and metrics B+2..B+8, workers B+10..B+999); a port set explicitly
    # wins over the base. Unset, the defaults below: 6390-6397, the dashboard on 8265, workers 10002-10999.
    ray_port_base: int | None = Field(None, ge=1024, le=65535 - RAY_PORT_RANGE + 1)
    ray_gcs_port: int = Field(6390, ge=1, le=65535)  # not Ray's 6379: Redis often holds that port
    ray_dashboard_host: str = _LOOPBACK
    ray_dashboard_port: int = Field(8265, ge=1, le=65535)  # also the Ray Jobs API
    # The dashboard agent's HTTP server, through which the Jobs API starts every job. Not Ray's 52365:
    # that lies in Linux's ephemeral range (32768-60999), where any outgoing connection may hold it.
    ray_dashboard_agent_listen_port: int = Field(6391, ge=1, le=65535)
    ray_dashboard_agent_grpc_port: int = Field(6392, ge=1, le=65535)  # the dashboard agent's gRPC server
    ray_node_manager_port: int = Field(6393, ge=1, le=65535)  # the raylet
    ray_object_manager_port: int = Field(6394, ge=1, le=65535)
    ray_metrics_export_port: int = Field(6395, ge=1, le=65535)  # Prometheus metrics of the node
    ray_runtime_env_agent_port: int = Field(6396, ge=1, le=65535)
    # The dashboard's own Prometheus metrics (Ray's DASHBOARD_METRIC_PORT, 44227 unless told: one port for
    # every stack on the machine, in the ephemeral range).
    ray_dashboard_metrics_port: int = Field(6397, ge=1, le=65535)
    # Where a browser opens Ray's dashboard (the study pages link each job); None -> ray_dashboard_url.
    ray_ui_url: str | None = None
    # Ray's client server (`ray.init("ray://127.0.0.1:PORT")`) runs only when a port is set: NormLab never uses it.
    ray_client_server_port: int | None = Field(None, ge=1024, le=65535)
    # Each of Ray's worker processes (the study's driver, Tune's trials, the warm trial hosts) listens on
    # one port of this range.
    ray_min_worker_port: int = Field(10002, ge=1, le=65535)
    ray_max_worker_port: int = Field(10999, ge=1, le=65535)
    ray_num_cpus: int | None = Field(None, ge=1)  # None: Ray detects the machine's CPUs
    ray_num_gpus: int | None = Field(None, ge=0)
    # The local head's session files (Ray makes the dir 0777: keep it under a dir only you can enter, and
    # short: it holds unix sockets). None: /tmp/normlab-<uid>/ray-<gcs port>, under a private 0700 parent.
    ray_temp_dir: Path | None = None
    # Token for Ray's token authentication (Ray 2.52 and newer, hence the dependency's floor). Whether Ray
    # turns it on by itself depends on the version and on how the cluster starts (`ray start` no, a local
    # ray.init() in recent releases yes); NormLab sets RAY_AUTH_MODE=token everywhere, so it is always on.
    # None -> generated into the data dir on first run (service.auth.ensure_ray_auth_token).
    ray_auth_token: SecretStr | None = None

    # HTTP API.
    api_host: str = _LOOPBACK
    api_port: int = Field(8000, ge=1, le=65535)
    api_url: str | None = None  # what the CLI calls; None -> http://{api_host}:{api_port}
    # Bearer token for mutating endpoints; None -> generated into the data dir on first run.
    api_token: SecretStr | None = None
    # Host headers the API answers besides its own names (loopback, api_host, the host of api_url): names or
    # addresses (any port), `*.example.org` for its subdomains, `*` for every host. Other hosts get a 400, so
    # a web page cannot read the API through DNS rebinding (service.api.host_check). Comma-separated.
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Seconds a request's whole body may take to arrive, from the API's first read of it; a slower one is
    # answered 408 and its connection closed, so stalled clients cannot hold connections and file
    # descriptors (service.api.body_timeout). A 256 kB spec in 30 s needs under 9 kB/s.
    body_timeout_s: float = Field(30.0, gt=0)
    # Connections plus requests in progress the API serves at once; past it a new request is answered 503
    # at once. Half the usual soft limit of 1,024 open files, leaving room for the stack's own.
    api_max_connections: int = Field(512, ge=1)

    # Limits that protect the cluster (checked when a study is submitted).
    max_trials_per_study: int = Field(500, ge=1, validation_alias=_env("NORMLAB_MAX_TRIALS"))
    # 100 seeds: a sequential design's cap, which its looks rarely reach (studies.limits says more).
    max_seeds_per_study: int = Field(100, ge=1, validation_alias=_env("NORMLAB_MAX_SEEDS"))
    max_epochs_per_trial: int = Field(500, ge=1, validation_alias=_env("NORMLAB_MAX_EPOCHS"))
    # The memory one trial may use (studies.limits): a spec whose largest trial is estimated above it
    # (studies.sizing: parameters with gradients and AdamW state, and one batch's activations) is a 422.
    # RAM per CPU trial: a node's RAM divided by the trials it runs at once.
    trial_memory_gib: float = Field(DEFAULT_TRIAL_MEMORY_GIB, gt=0)
    # Memory of one of the cluster's GPUs (the smallest, if they differ). Unset: no GPU is declared, so
    # resources.gpu "auto" is sized as a CPU trial and an explicit GPU share against 80 GiB.
    gpu_memory_gib: float | None = Field(None, gt=0)
    max_spec_bytes: int = Field(256_000, ge=1024)  # larger POST bodies are refused before parsing
    # How long a request waits for a turn at the database (the API runs a bounded number of database units
    # at once, service.api.load_shedding) before it is answered 503 with Retry-After: a burst sheds load
    # instead of queueing into lock and pool timeouts.
    db_queue_timeout_s: float = Field(10.0, gt=0)

    # Readiness (/readyz, the serve banner, `normlab status`): the data dir's filesystem must keep this much
    # free, since a full disk fails every database write and checkpoint.
    min_free_disk_mb: int = Field(200, ge=0)
    # How long readiness reuses its answer to "does Ray's job server take a job" (a submission that Ray's
    # job agent checks and refuses, so it starts nothing; each leaves a traceback in the dashboard's log).
    ray_probe_cache_s: float = Field(10.0, ge=0)

    # Background loop (service.orchestration.reconcile): how often it looks for queued studies, how many run at once.
    poll_interval_s: float = Field(2.0, gt=0)
    max_running_studies: int = Field(1, ge=1)
    # Drivers per study: one that dies without recording the study's outcome (job failed, stopped or lost)
    # is resubmitted, resuming the study's Tune experiments, until the study has had this many.
    max_study_attempts: int = Field(3, ge=1)
    # Studies whose driver the service finds gone when it starts (the stack was stopped under them):
    # `resume` submits a driver that continues them from their Tune storage (not counted against
    # max_study_attempts), `cancel` cancels them.
    interrupted_studies: Literal["resume", "cancel"] = "resume"
    # A driver submission Ray refuses or does not answer is recorded on the study (its failed submissions,
    # with Ray's words) and tried again after submit_backoff_s, doubling per failure up to
    # submit_backoff_max_s; the study fails with Ray's last words once one driver attempt has failed to
    # submit this many times (8 with the defaults: after about 10 minutes).
    max_submit_failures: int = Field(8, ge=1)
    submit_backoff_s: float = Field(5.0, ge=0)
    submit_backoff_max_s: float = Field(300.0, ge=0)
    # Where to announce a study's end (succeeded, failed or cancelled): the reconcile loop POSTs one JSON
    # object per ended study (id, name, status, error, links) to this URL, e.g. a Slack or Mattermost
    # incoming webhook or an ntfy topic; a failed POST is tried again on the next tick. None: no
    # announcements. Studies that ended over notify_window_s before a POST could reach the URL are not
    # announced late.
    notify_url: str | None = Field(None, pattern=r"^https?://")
    notify_window_s: float = Field(3600.0, gt=0)
    # CPU trials train on warm trial hosts (workers.trials.host): per node, long-lived processes that keep
    # torch and the loaded datasets between studies. The first CPU study's driver starts them.
    # False: every trial trains in its own Tune trial process, as GPU trials always do.
    trial_hosts: bool = DEFAULT_TRIAL_HOSTS
    # On a warm trial host, a trial that no scheduler can stop early (final and grid trials, tuning without
    # ASHA) trains its next epoch while Tune takes its report, and waits for Tune's answer only before it
    # writes that epoch's checkpoint or logs it. False: it waits for Tune after every epoch.
    train_ahead: bool = DEFAULT_TRAIN_AHEAD
    # A trial checkpoints its last epoch and, before it, an epoch only once this many seconds have passed
    # since its previous checkpoint (a failed trial redoes at most that much training); 0: every epoch.
    # Each checkpoint is a file write, its copy into Tune's storage and a snapshot of the experiment.
    checkpoint_every_s: float = Field(DEFAULT_CHECKPOINT_EVERY_S, ge=0)
    # Study drivers start warm (workers.driver.warm_server): where `normlab serve` starts the Ray head itself
    # (on Linux), it also starts a process that has imported the driver and forks one per study, so a study
    # does not pay the driver's imports (seconds). False: every study's job process imports and runs its
    # driver itself, as on a cluster whose head someone else started.
    warm_drivers: bool = True
    # The warm processes that hold torch or the driver's imports (trial hosts, ~0.4 GB each; the warm driver
    # server, ~0.2 GB) start with the first study that needs them and give their memory back after this many
    # seconds without work, so an idle stack holds neither; 0: once started they stay until the stack stops.
    warm_idle_s: float = Field(DEFAULT_WARM_IDLE_S, ge=0)

    # Plugins: user code a study names (studies.spec.plugins), run on every node of the cluster, and
    # datasets read from the cluster's own files. Off unless the operator turns them on; a study that
    # names one must also be sent with the plugin token (NORMLAB_PLUGIN_TOKEN, else generated into the
    # data dir; `normlab token --plugin`), which grants what the API token does plus running code.
    allow_plugins: bool = False
    plugin_token: SecretStr | None = None
    # The child process that imports and checks a submitted plugin: its time and address-space limits.
    plugin_check_timeout_s: float = Field(120.0, gt=0)
    plugin_check_memory_mb: int = Field(8192, ge=256)

    log_level: str = "info"

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, hosts: object) -> object:
        # The environment gives one string: NORMLAB_ALLOWED_HOSTS=api,normlab.example.org
        if isinstance(hosts, str):
            return [host.strip() for host in hosts.split(",") if host.strip()]
        return hosts

    @field_validator("mlflow_username", mode="before")
    @classmethod
    def _default_username(cls, name: object) -> object:
        # An exported but empty MLFLOW_TRACKING_USERNAME means "not set", as MLflow's client reads it.
        return _MLFLOW_USERNAME if isinstance(name, str) and not name.strip() else name

    @field_validator("data_dir", "mlflow_artifacts_dir", "ray_temp_dir", "catalog_reports_dir")
    @classmethod
    def _expand_user(cls, path: Path | None) -> Path | None:
        return None if path is None else path.expanduser()

    @model_validator(mode="after")
    def _derive_defaults(self) -> Settings:
        # Derived here (not in properties) so every consumer reads one resolved value.
        if self.database_url is None:
            self.database_url = f"sqlite:///{self.data_dir / 'normlab.db'}"
        if self.mlflow_tracking_uri is None:
            self.mlflow_tracking_uri = f"http://{self.mlflow_host}:{self.mlflow_port}"
        if self.mlflow_ui_url is None:
            self.mlflow_ui_url = self.mlflow_tracking_uri
        self.mlflow_ui_url = self.mlflow_ui_url.rstrip("/")
        if self.mlflow_backend_store_uri is None:
            self.mlflow_backend_store_uri = f"sqlite:///{self.data_dir / 'mlflow.db'}"
        if self.mlflow_artifacts_dir is None:
            self.mlflow_artifacts_dir = self.data_dir / "mlartifacts"
        if self.api_url is None:
            self.api_url = f"http://{self.api_host}:{self.api_port}"
        self.api_url = self.api_url.rstrip("/")
        if self.ray_port_base is not None:
            # Only the ports not set explicitly (in the environment or as arguments) follow the base.
            for name, offset in RAY_PORT_OFFSETS.items():
                if name not in self.model_fields_set:
                    setattr(self, name, self.ray_port_base + offset)
        if self.ray_min_worker_port > self.ray_max_worker_port:
            raise ValueError("ray_min_worker_port must not exceed ray_max_worker_port")
        return self

    @property
    def study_limits(self) -> StudyLimits:
        return StudyLimits(
            max_trials=self.max_trials_per_study,
            max_seeds=self.max_seeds_per_study,
            max_epochs=self.max_epochs_per_trial,
            trial_memory_gib=self.trial_memory_gib,
            gpu_memory_gib=self.gpu_memory_gib,
        )

    @property
    def ray_dashboard_url(self) -> str:
        """The Ray Jobs API address: RAY_ADDRESS when it is an http(s) URL, else the local head's."""
        if self.ray_address and self.ray_address.startswith(("http://", "https://")):
            return self.ray_address.rstrip("/")
        return f"http://{self.ray_dashboard_host}:{self.ray_dashboard_port}"

    @property
    def ray_ui_base(self) -> str:
        """Ray's dashboard as a browser opens it."""
        return (self.ray_ui_url or self.ray_dashboard_url).rstrip("/")

    @property
    def api_token_path(self) -> Path:
        return self.data_dir / "api_token"

    @property
    def plugin_token_path(self) -> Path:
        return self.data_dir / "plugin_token"

    @property
    def ray_auth_token_path(self) -> Path:
        return self.data_dir / "ray_auth_token"

    @property
    def mlflow_password_path(self) -> Path:
        return self.data_dir / "mlflow_password"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
