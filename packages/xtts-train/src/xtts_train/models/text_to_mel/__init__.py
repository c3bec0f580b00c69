"""The autoregressive text-to-mel model: `model.TextToMel` (text + a reference clip's
latents → mel frames), its `layers`, the frame-group arithmetic of the reduction factor
(`frames`), the autoregressive loop of inference (`generation`), its `losses` and
`alignment` (the guided-attention loss and alignment score), the compiled free-running
`decoding`, and its `streaming` a chunk at a time."""
