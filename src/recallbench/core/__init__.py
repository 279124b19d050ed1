"""The lowest layer: errors, escaping, ids, the internal model, progress, signals and
the process's end, threads, input files, strict JSON; what every other layer may use."""
