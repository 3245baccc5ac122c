"""A GPU's spec sheet, as the catalog row (with its sources) gives it."""

from __future__ import annotations

from dataclasses import dataclass

from servecap.errors import ServecapError
from servecap.units import GB_BYTES, GIB_BYTES


def gpu_family(gpu_id: str) -> str:
    """'H100-SXM' -> 'H100', 'A100-80GB-SXM' -> 'A100', 'RTX-4090' -> 'RTX-4090' (one chip,
    whatever its memory size or form factor)."""
    parts = gpu_id.split("-")
    return "-".join(parts[:2]) if parts[0].upper() == "RTX" else parts[0]


@dataclass(frozen=True, slots=True)
class GpuSpec:
    id: str
    name: str
    vendor: str
    memory_gb: float  # nameplate capacity (decimal GB, as the vendor prints it)
    hbm_bandwidth_tb_s: float
    bf16_dense_tflops: float | None  # None where no source gave a dense tensor figure
    interconnect: str
    interconnect_gb_s: float | None  # GPU-to-GPU, one direction, per GPU
    host_link_gb_s: float | None  # GPU <-> CPU memory, one direction (KV offload path)
    memory_bytes: int | None = None  # physical bytes where a source states them
    memory_gib_reported: float | None = None  # total memory torch/vLLM reports (from a real log)
    fp8_dense_tflops: float | None = None
    int8_dense_tops: float | None = None
    fp4_dense_tflops: float | None = None
    tdp_w: float | None = None
    rent_usd_per_hour: float | None = None
    rent_date: str | None = None
    purchase_usd: float | None = None
    purchase_date: str | None = None
    sources: tuple[str, ...] = ()
    nic: str | None = None  # the inter-node network card per GPU (InfiniBand/RoCE)
    nic_gb_s: float | None = None  # inter-node bandwidth per GPU, one direction
    link_latency_us: float | None = None  # one message over the scale-up link / the NIC
    nic_latency_us: float | None = None

    @property
    def family(self) -> str:
        return gpu_family(self.id)

    @property
    def total_memory_bytes(self) -> int:
        """The memory vLLM multiplies by ``gpu_memory_utilization``.

        vLLM uses what the driver reports (``torch.cuda.mem_get_info``), which is less than the
        nameplate (an A100-40GB reports 39.50 GiB). Order of preference: a reported figure from a
        real log; else the physical bytes the spec sheet states; else the nameplate GB.
        """
        if self.memory_gib_reported is not None:
            return int(self.memory_gib_reported * GIB_BYTES)
        if self.memory_bytes is not None:
            return self.memory_bytes
        return int(self.memory_gb * GB_BYTES)

    @property
    def total_memory_basis(self) -> str:
        if self.memory_gib_reported is not None:
            return f"{self.memory_gib_reported:.2f} GiB as reported by the driver"
        if self.memory_bytes is not None:
            return "physical bytes from the spec sheet"
        return f"nameplate {self.memory_gb:g} GB"

    def dense_tflops(self, rate: str) -> float:
        """Peak dense tensor TFLOPS for a compute rate, falling back to the next wider one."""
        if rate == "fp4" and self.fp4_dense_tflops:
            return self.fp4_dense_tflops
        if rate in ("fp4", "fp8") and self.fp8_dense_tflops:
            return self.fp8_dense_tflops
        if self.bf16_dense_tflops is None:
            raise ServecapError(
                "gpu.bf16_dense_tflops",
                None,
                f"{self.id} has no sourced dense BF16 TFLOPS; add it with --gpu-file",
            )
        return self.bf16_dense_tflops

    def link_gb_s(self, field: str) -> float:
        value = self.interconnect_gb_s if field == "interconnect_gb_s" else self.host_link_gb_s
        if value is None:
            raise ServecapError(f"gpu.{field}", None, f"{self.id} has no sourced {field}; add it with --gpu-file")
        return value
