"""Metric arithmetic (`arithmetic`, trec_eval definitions; `longmemeval`, LongMemEval's
official code), measures as values (`measures`) and the statistics of a comparison
(`stats`)."""
