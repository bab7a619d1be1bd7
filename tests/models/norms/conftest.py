import os

import torch

# Without a GPU the Triton kernels of models/norms/mixed_triton.py run under Triton's interpreter, on CPU
# tensors. Triton decides at decoration time, so this must happen before that module is imported; only
# test_mixed_triton.py imports it on a machine without CUDA (models.norms.mixed imports it for CUDA
# inputs only).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
