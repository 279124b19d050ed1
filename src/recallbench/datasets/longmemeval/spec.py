"""LongMemEval, declared (`recallbench.datasets.base.DatasetSpec`)."""

from recallbench.datasets.base import DATA_OPTION, UNIT_OPTION, DatasetOption, DatasetSpec

SPEC = DatasetSpec(
    name="longmemeval",
    order=1,
    title="LongMemEval",
    reader="recallbench.datasets.longmemeval.reader",
    measures="recallbench.datasets.longmemeval.measures:family",
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
            doc="a session's text is its user turns (`user`) or every turn (`all`)",
        ),
        DatasetOption(
            "--gold",
            "choice",
            "Gold = answer_session_ids (default), or the official run_retrieval.py rule, "
            "which scores questions without gold vacuously",
            choices=("answer_session_ids", "official"),
            default="answer_session_ids",
            refused_elsewhere=True,
            doc="the gold rule; `official` is LongMemEval's `run_retrieval.py` rule, recorded "
            "in `suite.json`'s `options` as `gold` "
            "([LongMemEval](longmemeval.md#which-questions-are-scored))",
        ),
        DatasetOption(
            "--abstention",
            "choice",
            "Abstention questions ('_abs'): dropped (default, as LongMemEval's retrieval "
            "evaluation does) or kept and scored",
            choices=("drop", "keep"),
            default="drop",
            refused_elsewhere=True,
            doc="`drop` leaves the abstention questions (`_abs`) out, as LongMemEval's "
            "retrieval evaluation does; `keep` scores them with their `answer_session_ids` "
            "(all 500 questions), recorded in `suite.json`'s `options` as `abstention`",
        ),
    ),
    generator="recallbench.datasets.longmemeval.generator",
    docs="longmemeval.md",
    example="longmemeval_s_cleaned.json",
    reads="your copy of a LongMemEval file (never downloaded)",
    what="your copy of a LongMemEval file: one store per question, sessions or turns as memories",
    scope="one question",
)
