"""LoCoMo: the reader (`reader`), its measure family (`measures`), a format-faithful generator
(`generator`) and the dataset's declaration (`spec`)."""
