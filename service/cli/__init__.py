"""The `normlab` command line (commands.py) and the Python client it talks to the API with (client.py)."""
