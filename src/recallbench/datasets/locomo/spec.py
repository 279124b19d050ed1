"""LoCoMo, declared (`recallbench.datasets.base.DatasetSpec`)."""

from recallbench.datasets.base import DATA_OPTION, UNIT_OPTION, DatasetSpec

SPEC = DatasetSpec(
    name="locomo",
    order=2,
    title="LoCoMo",
    reader="recallbench.datasets.locomo.reader",
    measures="recallbench.datasets.locomo.reader:measures",
    top_k=10,
    options=(DATA_OPTION, UNIT_OPTION),
    generator="recallbench.datasets.locomo.generator",
    docs="locomo.md",
    example="locomo10.json",
    reads="your copy of `locomo10.json` (CC BY-NC: never commit it)",
    what="your copy of `locomo10.json`: one store per conversation, sessions or turns as memories",
    scope="one conversation",
)
