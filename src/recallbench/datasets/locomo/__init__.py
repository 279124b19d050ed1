"""LoCoMo: the reader (`reader`), a format-faithful generator (`generator`) and the
dataset's declaration (`spec`)."""
