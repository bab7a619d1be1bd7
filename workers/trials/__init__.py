"""What runs in a trial's process: the Tune trainable, its relay to a warm trial host, the trial's config
keys and plan (which the study driver builds and the trial reads), and the stop signal between them."""
