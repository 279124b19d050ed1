"""LongMemEval: the reader (`reader`), its checked records (`records`), how a record becomes a
scope (`pairs`), the official measures re-implemented (`official`), its measure family
(`measures`), a format-faithful generator (`generator`) and the dataset's declaration (`spec`)."""
