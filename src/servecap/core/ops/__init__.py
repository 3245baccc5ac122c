"""A step as the sum of its operations, each timed through one seam (``timers``): measured kernel
tables where they cover the shape, the roofline elsewhere (docs/simulator.md, "The step as
operations")."""

from servecap.core.ops.explain import explain_decode_step
from servecap.core.ops.operation import ROOFLINE, Operation, StepExplanation
from servecap.core.ops.step import OperationStep

__all__ = ["ROOFLINE", "Operation", "OperationStep", "StepExplanation", "explain_decode_step"]
