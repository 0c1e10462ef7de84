"""nn.Module -> waferflow IR. The only package that imports torch.

``trace`` turns a module and example inputs into an IR ``Graph`` (inference or a
whole training step); ``load_model`` builds the models of the zoo by name.
"""

from waferflow.frontend.convert import UnknownOpWarning
from waferflow.frontend.tracer import trace
from waferflow.frontend.zoo import ModelBundle, list_models, load_model

__all__ = ["ModelBundle", "UnknownOpWarning", "list_models", "load_model", "trace"]
