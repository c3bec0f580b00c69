"""How a trained run is judged: `held_out` (`evaluate`: free-running synthesis of held-out
text against its recordings, through `inference`) and the measures it reports (`scores`:
DTW distance, pairing score, duration ratio)."""
