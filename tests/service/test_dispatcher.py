"""The dispatcher names each driver attempt's Ray job after its study and attempt, and says in one line how a
driver that recorded no outcome ended (Ray's job server is faked here; tests/e2e use a real one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from service.dispatcher import JobState, RayJobDispatcher, submission_id_for


@dataclass
class FakeJobClient:
    """What RayJobDispatcher uses of ray.job_submission.JobSubmissionClient."""

    jobs: dict[str, SimpleNamespace] = field(default_factory=dict)
    submitted: list[dict] = field(default_factory=list)

    def get_job_info(self, job_id: str) -> SimpleNamespace:
        if job_id not in self.jobs:
            raise RuntimeError(f"Job {job_id} does not exist")
        return self.jobs[job_id]

    def submit_job(self, **request) -> str:
        self.submitted.append(request)
        self.jobs[request["submission_id"]] = SimpleNamespace(message="", driver_exit_code=None)
        return request["submission_id"]


class _Dispatcher(RayJobDispatcher):
    def __init__(self, client: FakeJobClient) -> None:
        super().__init__(dashboard_url="http://ray.invalid:8265")
        self.fake = client

    def _client(self) -> FakeJobClient:
        return self.fake


def test_the_first_attempt_keeps_the_study_derived_id_and_later_ones_get_their_own():
    assert submission_id_for("abc") == submission_id_for("abc", 1) == "normlab-study-abc"
    assert submission_id_for("abc", 2) == "normlab-study-abc-attempt-2"
    assert len({submission_id_for("abc", n) for n in (1, 2, 3)}) == 3
    with pytest.raises(ValueError, match="from 1"):
        submission_id_for("abc", 0)


def test_each_attempt_is_submitted_once_as_its_own_job():
    client = FakeJobClient()
    dispatcher = _Dispatcher(client)
    first = dispatcher.submit("abc", {}, attempt=1)
    second = dispatcher.submit("abc", {}, attempt=2)
    again = dispatcher.submit("abc", {}, attempt=2)  # a retried tick
    assert (first, second, again) == ("normlab-study-abc", "normlab-study-abc-attempt-2", second)
    assert [r["submission_id"] for r in client.submitted] == [first, second]
    assert client.submitted[1]["metadata"] == {"normlab_study_id": "abc", "normlab_attempt": "2"}
    assert client.submitted[1]["entrypoint"].endswith("-m workers.driver --study-id abc")


@pytest.mark.parametrize("exit_code", [-9, 137])  # python's own code, and the shell's 128 + 9
def test_a_killed_driver_is_described_by_rays_first_line_and_its_signal(exit_code):
    client = FakeJobClient()
    client.jobs["j"] = SimpleNamespace(
        message=f"Job entrypoint command failed with exit code {exit_code}, last available logs (truncated "
        "to 20,000 chars):\nepoch 3 ...\n",
        driver_exit_code=exit_code,
    )
    reason = _Dispatcher(client).end_reason("j", JobState.FAILED)
    assert reason == (
        f"Ray job j ended failed: Job entrypoint command failed with exit code {exit_code} "
        "(killed by SIGKILL)"
    )


def test_an_ordinary_exit_code_names_no_signal():
    client = FakeJobClient()
    client.jobs["j"] = SimpleNamespace(
        message="Job entrypoint command failed with exit code 1", driver_exit_code=1
    )
    assert _Dispatcher(client).end_reason("j", JobState.FAILED).endswith("exit code 1")


def test_a_job_the_cluster_forgot_and_one_without_details_still_get_a_reason():
    dispatcher = _Dispatcher(FakeJobClient())
    assert "unknown to the cluster" in dispatcher.end_reason("gone", JobState.MISSING)
    assert dispatcher.end_reason("gone", JobState.STOPPED).startswith("Ray job gone ended stopped (details")
