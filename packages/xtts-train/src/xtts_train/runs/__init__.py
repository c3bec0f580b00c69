"""What a training run writes and how it is judged: the run writer and its checkpoints,
run statistics, eval media, the evals a run makes while training (one kind per task), and
the free-running evaluation of held-out text."""
