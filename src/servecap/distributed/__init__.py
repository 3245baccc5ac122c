"""Run many independent simulations on one machine or a cluster, behind one small seam.

:class:`Executor` has one verb, ``map(fn, items)``: apply a top-level function to each item and
return one :class:`TaskOutcome` per item, in the items' order. Three implementations:

- ``serial`` — in this process (tests, debugging, one-item sweeps);
- ``process`` — a local process pool (the default for sweeps);
- ``ray`` — a Ray cluster (``pip install 'servecap[distributed]'``), local or at an address.

Items travel to workers as values (drawn request arrays, specs), never file paths, so a remote
worker needs nothing but the installed package. A worker that dies costs only its own item:
the others' results are kept, and the dead item is retried, then reported as failed.
"""

from servecap.distributed.executor import Executor as Executor
from servecap.distributed.executor import TaskOutcome as TaskOutcome
from servecap.distributed.registry import EXECUTORS as EXECUTORS
from servecap.distributed.registry import make_executor as make_executor
