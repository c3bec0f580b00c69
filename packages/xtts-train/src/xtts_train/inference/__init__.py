"""What a trained run is used for, above the training machinery: the vocoder applied to a
run's features (`vocoding`: `Waveforms`, `Vocoding`) and a long text spoken as decoded
pieces joined with their pauses (`long_form`). The compiled decoding programs themselves
are the model's (`models.text_to_mel.decoding`, `streaming`): the trainer's evals decode
too."""
