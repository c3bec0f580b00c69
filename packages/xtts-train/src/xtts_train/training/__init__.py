"""The training machinery, which knows of a model only through its task (`tasks`: the
model, its batches, losses and evals): compiled steps (one program per static shape,
retrace = error), the composed update (`transforms`, `optim`), `tf.distribute`, the batch
planner, `init_from` (a run's start from another run's weights), and `trainer.fit`, the
loop. The compiler choice, compile cache, warm-up and memory estimates are `compile`'s."""
