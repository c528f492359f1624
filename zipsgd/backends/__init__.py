"""The backends that run the generated engine: ``verilator``, ``board`` and ``board-sim``.

Each is an :class:`~zipsgd.host.backend.EngineBackend` registered under its name in the
``zipsgd.backends`` entry-point group (``pyproject.toml``); ``zipsgd.host.backend.get_backend``
finds it there.  This layer sits above the simulation (``zipsgd.sim``) and the host package.
"""
