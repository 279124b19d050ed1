"""The lowest layer: errors, escaping, ids, the internal model, progress, signals and
the process's end, threads, input files, strict JSON, what the embedding path asks of an
embedder, the peak memory of a process tree and where the code under test comes from;
what every other layer may use."""
