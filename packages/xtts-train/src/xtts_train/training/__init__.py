"""The training machinery, which knows nothing of the model it runs: compiled steps (one
program per static shape, retrace = error), the composed update (`transforms`, `optim`),
the concurrent warm-up and the persistent compile cache, the compiler choice per device,
`tf.distribute`, memory estimates, and `trainer.fit`, the loop."""
