"""A study's plugins on the workers: checked in a child process at submission (`check`), imported by the
driver and every trial before they build anything (`activate`)."""
