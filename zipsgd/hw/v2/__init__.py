"""Engine v2: stream-order lanes with lane-local feature memories (``docs/HARDWARE.md``,
"Engine v2").  Built beside the v1 engine until it replaces it."""
