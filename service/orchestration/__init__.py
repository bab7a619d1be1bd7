"""Studies on the cluster: the reconcile loop, the Ray job dispatcher behind its protocol, cancelling, and
the MLflow runs an ended study leaves."""
