"""waferflow: compile PyTorch models onto wafer-scale dataflow chips and score the result."""

from waferflow.errors import WaferflowError

__version__ = "0.1.0"

__all__ = ["WaferflowError", "__version__"]
