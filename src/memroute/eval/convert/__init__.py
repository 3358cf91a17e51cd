"""Converters from the public evaluation sets, as their authors publish them, to the JSON Lines that
``memroute eval`` reads (formats in docs/evaluate.md). One module per source family:

    locomo      snap-research/LoCoMo data/locomo10.json          -> sessions.jsonl, qa.jsonl
    sgd         dstc8-schema-guided-dialogue train/, dev/          -> train.jsonl, dev.jsonl, services.jsonl
    multiwoz    MultiWOZ dialogues + MultiWOZ 2.2 schema.json      -> dev.jsonl, services.jsonl
    jmultiwoz   llm-jp/JMultiWOZ-TC (dataset.zip unzipped)         -> dev.jsonl, train.jsonl, tools.jsonl
    clinc150 / banking77 / kochat                                  -> train/dev.jsonl, labels.jsonl

Each writes a ``stats.json`` with its counts, and stops with an ``InputError`` naming the file and what is
missing when the input is not what the source publishes.
"""

SOURCES = ("locomo", "sgd", "multiwoz", "jmultiwoz", "clinc150", "banking77", "kochat")
