import os

import torch

# Without a GPU the Triton kernels of models/norms/mixed_triton.py and autonorm_triton.py run under
# Triton's interpreter, on CPU tensors. Triton decides at decoration time, so this must happen before
# those modules are imported; on a machine without CUDA only test_mixed_triton.py and
# test_autonorm_triton.py import them (the layers import them for CUDA inputs only).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
