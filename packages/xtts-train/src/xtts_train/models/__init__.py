"""The networks xtts trains, one folder per model with its layers, losses and decoding
beside it; `dropout` is a layer they share. Nothing here knows about the training loop."""
