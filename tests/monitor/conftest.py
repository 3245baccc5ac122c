import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config: object) -> None:
    config.addinivalue_line(  # type: ignore[attr-defined]
        "markers", "slow: runs in real time against a live emulator (about 35 s, little CPU); it still runs in CI"
    )
