"""Engine v2 block tests: their shared helper (``sim_support``) is importable by name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
