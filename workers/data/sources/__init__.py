"""Raw-array loaders, one module per kind of source (offline files, Hugging Face, web)."""
