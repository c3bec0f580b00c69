"""The autoregressive text-to-mel model: `model.TextToMel` (text + a reference clip's
latents → mel frames), its `layers`, its `losses` and `alignment` (the guided-attention
loss and alignment score), and the compiled free-running `decoding`."""
