"""MLflow tracking for trials: the tracker (tracker.py), its runs, spool, delivery and deadlines."""
