"""LoCoMo, declared (`recallbench.datasets.base.DatasetSpec`)."""

from recallbench.datasets.base import DATA_OPTION, UNIT_OPTION, DatasetOption, DatasetSpec

SPEC = DatasetSpec(
    name="locomo",
    order=2,
    title="LoCoMo",
    reader="recallbench.datasets.locomo.reader",
    measures="recallbench.datasets.locomo.measures:family",
    top_k=10,
    options=(
        DATA_OPTION,
        UNIT_OPTION,
        DatasetOption(
            "--categories",
            "choice",
            "Questions scored: categories 1-4 (default) or all, category 5 (adversarial) too",
            choices=("1-4", "all"),
            default="1-4",
            refused_elsewhere=True,
            doc="the questions scored: `1-4` leaves category 5 (adversarial) out, as most "
            "published figures do; `all` scores it with its evidence, in its own row and in "
            "the overall figures, recorded in `suite.json`'s `options` as `categories` "
            "([LoCoMo](locomo.md#which-questions-are-scored))",
        ),
    ),
    generator="recallbench.datasets.locomo.generator",
    docs="locomo.md",
    example="locomo10.json",
    reads="your copy of `locomo10.json` (CC BY-NC: never commit it)",
    what="your copy of `locomo10.json`: one store per conversation, sessions or turns as memories",
    scope="one conversation",
)
