import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread_and_seed() -> None:
    # The CI machine is shared: one thread keeps timings and results stable.
    torch.set_num_threads(1)
    torch.manual_seed(0)
