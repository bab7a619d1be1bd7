"""/plans: what a study would take before it is launched (studies.planning). Runs nothing, stores nothing.

The body is the spec POST /studies takes, read by the same code (JSON or YAML, the same 413/415/422s with
field paths). The store is read once, through the database gate, for earlier studies of the same dataset
and model; the plan (a few seconds of sequential simulation at most, cached) is computed in a worker
thread, off the event loop. The token is required as for a submission: a plan costs the API CPU time.
"""

from __future__ import annotations

import glob
import os
from functools import partial

import anyio
from fastapi import APIRouter, Request

from service.api.deps import AuthDep, DatabaseDep, SettingsDep
from service.api.errors import error_responses
from service.api.routes.spec_body import read_spec, spec_request_body
from service.settings import Settings
from studies.planning import Cluster, StudyPlan, plan_study, read_history

__all__ = ["cluster_of", "router"]

router = APIRouter(prefix="/plans", tags=["plans"])

_SPEC_BODY = spec_request_body(
    "A StudySpec as JSON or YAML, as POST /studies takes it (see studies/examples/)."
)


def cluster_of(settings: Settings) -> Cluster:
    """What the API knows of the cluster studies run on: the local head `normlab serve` starts (its
    NORMLAB_RAY_NUM_CPUS / _GPUS, else this machine's CPUs and NVIDIA devices), or nothing of a cluster
    elsewhere (RAY_ADDRESS) beyond those settings."""
    if settings.ray_address is None:
        gpus = settings.ray_num_gpus
        if gpus is None:
            gpus = len(glob.glob("/dev/nvidia[0-9]*"))  # what Ray would detect, without importing torch
        return Cluster(cpus=settings.ray_num_cpus or os.cpu_count(), gpus=gpus, source="the local Ray head")
    return Cluster(
        cpus=settings.ray_num_cpus,
        gpus=settings.ray_num_gpus,
        source=f"the cluster at {settings.ray_address} (NORMLAB_RAY_NUM_CPUS / _GPUS where set)",
    )


@router.post(
    "",
    response_model=StudyPlan,
    dependencies=[AuthDep],
    openapi_extra=_SPEC_BODY,
    responses=error_responses(401, 403, 413, 415, 422, 503),
    summary="Plan a study: trials per phase, GPU-hours, wall time, seeds for power (runs and stores nothing)",
)
async def plan(request: Request, database: DatabaseDep, settings: SettingsDep) -> StudyPlan:
    spec = await read_spec(request, settings)
    history = await database.read(partial(read_history, spec=spec))
    return await anyio.to_thread.run_sync(
        partial(plan_study, spec, history=history, cluster=cluster_of(settings), limits=settings.study_limits)
    )
