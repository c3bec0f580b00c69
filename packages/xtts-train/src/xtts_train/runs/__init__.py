"""What a training run writes and how it is read back: the run writer and its checkpoints
(`run_writer`), reading a run's config, weights and reference clip (`loading`), run
statistics, eval media, and the evals a run makes while training (one kind per task; the
trainer's tasks call them, so they sit below `training`)."""
