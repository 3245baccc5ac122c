"""`monitor --fleet`: the autoscaler of one pool of a fleet file (the file `fleet simulate` reads)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servecap.errors import ServecapError, did_you_mean
from servecap.fleet.file_schema import load_fleet_file
from servecap.policy.autoscalers import AutoscalerSettings


@dataclass(frozen=True, slots=True)
class PoolAutoscaler:
    pool: str
    source: str  # the fleet file as given
    settings: AutoscalerSettings
    notes: tuple[str, ...] = ()
    model: str | None = None  # the pool's model (catalog id or config path), to check the servers'


def model_mismatch(pool_model: str | None, served: list[str]) -> str | None:
    """A note when the servers serve another model than the pool's (their ``model_name`` label
    against the fleet file's model; a served name that ends with the pool's model's name, e.g.
    ``/models/Llama-3.1-8B`` for ``meta-llama/Llama-3.1-8B``, counts as the same)."""
    if pool_model is None or not served:
        return None
    want = pool_model.rstrip("/").split("/")[-1].lower()
    other = sorted({m for m in served if m.rstrip("/").split("/")[-1].lower() != want})
    if not other:
        return None
    return (
        f"the servers serve {', '.join(other)}, the fleet file's pool runs {pool_model}: its autoscaler's "
        "advice is for another model (--fleet/--pool)"
    )


def pool_autoscaler(path: Path | str, pool: str | None = None) -> PoolAutoscaler:
    """The autoscaler settings of ``pool`` (default: the only pool, or the only autoscaled one),
    its preset and overrides resolved as ``fleet simulate`` resolves them; one
    :class:`ServecapError` naming the field when the file or the pool does not fit."""
    f = load_fleet_file(path)
    names = [p.name for p in f.pools]
    if pool is None:
        scaled = [p for p in f.pools if p.autoscaler is not None]
        if len(f.pools) == 1:
            chosen = f.pools[0]
        elif len(scaled) == 1:
            chosen = scaled[0]
        else:
            raise ServecapError("pool", None, f"{path} has pools {', '.join(names)}: name one with --pool")
    else:
        match = [p for p in f.pools if p.name == pool]
        if not match:
            raise ServecapError(
                "pool", pool, f"not a pool of {path} (pools: {', '.join(names)})" + did_you_mean(pool, names)
            )
        chosen = match[0]
    if chosen.autoscaler is None:
        raise ServecapError(
            f"pools.{chosen.name}.autoscaler",
            None,
            f"pool {chosen.name!r} of {path} has no autoscaler: nothing to advise (docs/fleet.md, Autoscalers)",
        )
    a = chosen.autoscaler
    from servecap.fleet.file_schema import plan_pool

    # a preset whose target comes from the pool's plan (keda-vllm) reads it; a pool that cannot be
    # planned (the file's deployment does not fit) keeps the preset's fixed target, and says so
    notes = []
    try:
        the_plan = plan_pool(chosen, Path(path).parent)[0]
    except ServecapError as err:
        the_plan = None
        notes.append(f"pool {chosen.name!r} cannot be planned ({err.problem}): the preset's fixed target applies")
    settings = a.to_settings(the_plan)
    if a.schedule:
        notes.append("the autoscaler's schedule (times on the simulated clock) is left out: the floor is min_replicas")
    if a.predictive is not None:
        notes.append("the autoscaler's predictive floors (from a workload's rate curve) are left out")
    return PoolAutoscaler(chosen.name, str(path), settings, tuple(notes), chosen.model)
