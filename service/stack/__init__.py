"""`normlab serve`: the embedded stack on one machine (MLflow, a Ray head, the API), its child processes,
signals and private files."""
