"""The pipeline stages. Each is a function from upstream artifact envelopes (and options) to
a new envelope; the stage commands (`recallbench.cli.main`) and the in-process chain
(`recallbench.commands.pipeline`) only call them, in the order `builddir.artifacts.STAGES`
defines."""
