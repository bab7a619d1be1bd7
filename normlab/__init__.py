"""NormLab's registry: one record per method, norm kind, backbone, dataset and knob.

The floor every layer stands on: plain Python, no torch, no pydantic, nothing of models, studies, workers
or service. The built-ins register here exactly as a user's plugin does (`normlab.plugin`): a method is a
`Method` record, a norm layer a `NormKind` whose `layer` is the torch class, a dataset a `Dataset` record
whose builder workers.data calls. The API process, which never imports torch or a plugin's code, sees a
plugin's records as facts (`registry.overlay`), reported by a child process that imported it.
"""

from normlab.records import Backbone, Dataset, Knob, Method, NormKind, Record
from normlab.registry import REGISTRY, Registry, RegistryError, Section, UnknownName

__all__ = [
    "REGISTRY",
    "Backbone",
    "Dataset",
    "Knob",
    "Method",
    "NormKind",
    "Record",
    "Registry",
    "RegistryError",
    "Section",
    "UnknownName",
]
