"""The training machinery, which knows of a model only through its task (`tasks`: the
model, its batches, losses and evals): compiled steps (one program per static shape,
retrace = error), the composed update (`transforms`, `optim`), the concurrent warm-up and
the persistent compile cache, the compiler choice per device, `tf.distribute`, memory
estimates, and `trainer.fit`, the loop."""
