"""Shared pytest configuration (project-specific fixtures go in later)."""

from __future__ import annotations

import os

from hypothesis import settings

# Hypothesis profiles: "ci" (selected automatically when CI is set) has no per-example
# deadline, because timings on the shared 2-core CI machine under xdist are noisy, and
# prints the reproduction blob of a failure. Select explicitly with HYPOTHESIS_PROFILE=...
settings.register_profile("ci", deadline=None, print_blob=True)
settings.register_profile("dev")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
