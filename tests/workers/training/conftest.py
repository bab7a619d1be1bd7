import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tests share two cores with other work; one thread also keeps CPU arithmetic reproducible."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
