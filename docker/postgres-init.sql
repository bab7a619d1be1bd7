-- One server, two databases: NormLab's study state and MLflow's tracking store.
CREATE DATABASE mlflow OWNER normlab;
