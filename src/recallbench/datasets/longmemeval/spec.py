"""LongMemEval, declared (`recallbench.datasets.base.DatasetSpec`)."""

from recallbench.datasets.base import DATA_OPTION, UNIT_OPTION, DatasetOption, DatasetSpec

SPEC = DatasetSpec(
    name="longmemeval",
    order=1,
    title="LongMemEval",
    reader="recallbench.datasets.longmemeval.reader",
    measures="recallbench.datasets.longmemeval.reader:measures",
    top_k=10,
    options=(
        DATA_OPTION,
        UNIT_OPTION,
        DatasetOption(
            "--session-text",
            "choice",
            "User turns joined by spaces (official, default) or every turn",
            choices=("user", "all"),
            default="user",
        ),
        DatasetOption(
            "--gold",
            "choice",
            "Gold = answer_session_ids (default), or the official run_retrieval.py rule, "
            "which scores questions without gold vacuously",
            choices=("answer_session_ids", "official"),
            default="answer_session_ids",
            refused_elsewhere=True,
        ),
    ),
    generator="recallbench.datasets.longmemeval.generator",
    docs="longmemeval.md",
    example="longmemeval_s_cleaned.json",
    reads="your copy of a LongMemEval file (never downloaded)",
    what="your copy of a LongMemEval file: one store per question, sessions or turns as memories",
    scope="one question",
)
