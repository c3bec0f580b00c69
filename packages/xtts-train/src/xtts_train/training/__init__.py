"""The training machinery, which knows of a model only through the `Task` protocol
(`task`; the tasks themselves are `xtts_train.tasks`'): compiled steps (one program per
static shape, retrace = error), the composed update (`transforms`, `optim`),
`tf.distribute`, the batch planner, `init_from` (a run's start from another run's
weights), and `trainer.fit_task`, the loop. The compiler choice, compile cache, warm-up
and memory estimates are `compile`'s."""
