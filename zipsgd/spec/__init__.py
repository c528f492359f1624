"""The one definition of every format: stream layout, fixed point, engine widths, random
generators.  Hardware, golden model, host and benches all import from here."""
