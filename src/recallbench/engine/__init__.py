"""Running a stage's tasks: the executors (in process, worker processes, Ray), the
stages' side of them, a worker's state and stores, the vector cache and its preparation."""
