"""The build directory's files: artifact envelopes and fingerprints, safe paths below a
claimed directory, the lock, the scope spool and the query stage's rows."""
