"""liger.frontend: PyTorch models into the liger dialect.

    python -m liger.frontend import CONFIG.json -o layer.mlir [--backward]

The path of a model (docs/torch-compile-backend.md):

- `capture`: a Hugging Face config -> a model with random weights -> aten
  graphs (torch.export) of one decoder layer and of the lm_head + loss;
- `recognize`: torch subgraphs of unpatched models (HF's RMSNorm, rotate-half
  RoPE, gated MLPs, softmax, cross-entropy, the lm_head + loss, PEFT LoRA,
  SDPA) -> `Record`s, one liger op each, with a report of what matched and
  why a near-miss was left;
- `importer`: a graph and its records -> a liger-dialect module (token
  dimensions dynamic; what is not imported becomes function arguments and
  results);
- `backward`: the gradient functions of an imported module, from the
  dialect's gradient ops;
- `check`: runs an imported module on the CPU reference against PyTorch.

Importing this package needs torch; `liger` alone does not.
"""

from typing import List, Optional, Sequence, Tuple

from .capture import (Capture, CaptureError, build_model, capture_decoder_layer,
                      capture_lm_head_loss, config_dtype, load_config)
from .importer import Function, Imported, import_graph
from .recognize import Line, Miss, Recognition, recognize
from .records import OPS, OpSpec, Record

__all__ = ["Capture", "CaptureError", "Function", "Imported", "Line", "Miss", "OPS", "OpSpec",
           "Record", "Recognition", "build_model", "capture_decoder_layer",
           "capture_lm_head_loss", "capture_model", "config_dtype", "import_graph",
           "load_config", "module_text", "recognize"]


def capture_model(config, dtype: Optional[str] = None, device: str = "meta",
                  tokens: Optional[Tuple[int, int]] = None) -> List[Capture]:
    """The decoder layer and the lm_head + loss of a config (a path or a config object).

    dtype: 'f32', 'bf16' or 'f16' (default: the config's); device 'meta'
    builds no weights (enough for the graphs), 'cpu' random ones; tokens:
    static (batch, sequence) sizes, or None for dynamic ones.
    """
    if isinstance(config, str):
        config = load_config(config)
    model = build_model(config, dtype or config_dtype(config), device)
    return [capture_decoder_layer(model, tokens), capture_lm_head_loss(model, tokens)]


def module_text(imported: Sequence[Imported]) -> str:
    """One module holding the functions of several imported graphs."""
    return "\n".join(i.mlir for i in imported)
