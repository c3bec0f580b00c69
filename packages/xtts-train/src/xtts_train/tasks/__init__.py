"""What the trainer trains (`train.task`): each task owns its model, batches, losses and
their config section, its evals and its start-of-run needs (`text_to_mel`, `vocoder`), and
`registry` names them (`fit`, `build_steps` for a config's task)."""
