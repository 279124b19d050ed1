"""LongMemEval: the reader (`reader`), its checked records (`records`), how a record becomes a
scope (`pairs`), its measure family (`measures`), a format-faithful generator (`generator`)
and the dataset's declaration (`spec`). Its official measures, re-implemented, are
`recallbench.metrics.longmemeval`."""
