"""LongMemEval: the reader (`reader`), how a record becomes a scope (`pairs`), the
official measures re-implemented (`official`) and a format-faithful generator (`generator`)."""
